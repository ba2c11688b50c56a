"""Secure summation (secure=True, constrfl.federation.secure): the clients' masked uploads
say nothing on their own, their sum is the plain sum bit for bit, and every way a sum
could go wrong (a missing client, a resent message, a resume, too few clients) is
handled."""
import numpy as np
import pytest
from scipy.stats import chi2

pytest.importorskip("cryptography")

import constrfl as cf
from constrfl.errors import ClientFailure, PartyError
from constrfl.exactsum import add_into, decode, encode
from constrfl.federation import InProcessFederation
from constrfl.federation.base import aggregate
from constrfl.federation.runtime import PartyRuntime
from constrfl.federation.secure import Masks, SiteSecret, ring_neighbours
from constrfl.messages import SUMS, LAYOUT, MessageType as M
from constrfl.parties import PartyContext

from builders import np_problem
from test_sums_only import _correlation, least_squares_sites


def record_uploads(monkeypatch):
    """Every client's encoded reply as the server receives it: ``[(type, {name: reply})]``."""
    seen, original = [], InProcessFederation._exchange

    def spy(self, seq, message_type, payloads):
        replies = original(self, seq, message_type, payloads)
        seen.append((message_type, {n: dict(r) for n, r in replies.items()
                                    if isinstance(r, dict)}))
        return replies
    monkeypatch.setattr(InProcessFederation, "_exchange", spy)
    return seen


@pytest.mark.parametrize("method, options, n, secure", [
    ("fedproxal", {"inner": "newton"}, 5, True),
    ("fedproxal", {"inner": "newton-cg"}, 5, True),
    ("fedproxal", {"inner": "admm"}, 5, True),
    ("fedavg", {"client_fraction": 0.6, "rounds": 12, "penalty": "quadratic"}, 5, True),
    ("fedproxal", {"inner": "newton"}, 9, 2),
    ("fedavg", {"client_fraction": 0.6, "rounds": 12, "penalty": "quadratic"}, 9, 2),
])
def test_secure_solve_is_the_plain_solve_bit_for_bit(method, options, n, secure):
    """The masks cancel exactly in the ring (every client's neighbours, or 2 each on
    the ring of the round's cohort): the same iterates, multipliers and statuses, one
    round more (the key agreement)."""
    p = np_problem(n, 0.4)
    plain = cf.solve(p, method, **options)
    masked = cf.solve(p, method, secure=secure, **options)
    assert masked.status == plain.status
    assert masked.w.tobytes() == plain.w.tobytes()
    assert masked.rounds == plain.rounds + 1
    for name in plain.multipliers:
        assert masked.multipliers[name].ineq.tobytes() == plain.multipliers[name].ineq.tobytes()
    if method == "fedproxal":
        assert plain.status == "optimal"
        cert = cf.certify(p, masked)
        assert cert.ok, cert.failures


def split_upload(reply):
    """``{field: ring elements}`` of an encoded reply, by its layout."""
    out, at = {}, 0
    for item in reply[LAYOUT].split(";"):
        name, size = item.split(":")
        n = int(size) if size else 1
        out[name] = np.array(reply[SUMS][at:at + n])
        at += n
    return out


def seeded_keys(monkeypatch, seed=0):
    """The clients' key pairs drawn from a seeded generator instead of the OS's (every
    32 bytes are an X25519 private key): a test of the masks' bytes then sees the same
    masks on every run."""
    rng, original = np.random.default_rng(seed), SiteSecret.__init__

    def seeded(self, private=None):
        original(self, rng.bytes(32) if private is None else private)
    monkeypatch.setattr(SiteSecret, "__init__", seeded)


def uniform_uploads(replies):
    """The bytes of each reply's ring elements pass a χ² test of uniformity (255 degrees
    of freedom), all together at the 0.1% level (each at 0.1%/len(replies): Bonferroni);
    replies of fewer than 20·256 bytes are not examined, and at least one must be."""
    replies, examined = list(replies), 0
    for reply in replies:
        raw = np.frombuffer(np.array(reply[SUMS]).tobytes(), dtype=np.uint8)
        expected = raw.size / 256
        if expected < 20:
            continue
        counts = np.bincount(raw, minlength=256)
        statistic = float(((counts - expected) ** 2 / expected).sum())
        if chi2.sf(statistic, 255) < 1e-3 / len(replies):
            return False
        examined += 1
    return examined > 0


def worst_correlation(seen, p, data):
    """The largest correlation of any field of any site's upload, decoded as a curious
    server would (NaN read as 0), with that site's XᵢᵀXᵢ (off the diagonal, against a
    Hessian triangle) or Xᵢᵀyᵢ (against a d-vector)."""
    d = p.dim
    tri, off = np.triu_indices(d), np.triu_indices(d, 1)
    stats = {c.name: ((X.T @ X)[off], X.T @ y) for c, (X, y) in zip(p.clients, data)}
    worst = 0.0
    for kind, replies in seen:
        for name, reply in replies.items():
            if SUMS not in reply:
                continue
            gram, moment = stats[name]
            for field, ring in split_upload(reply).items():
                v = np.nan_to_num(decode(ring))
                if v.size == tri[0].size:
                    H = np.zeros((d, d))
                    H[tri] = v
                    worst = max(worst, _correlation(H[off], gram))
                elif v.size == d:
                    worst = max(worst, _correlation(v, moment))
    return worst


def test_a_curious_server_reads_noise_in_each_upload(monkeypatch):
    """Everything the server receives in a secure Newton solve (recorded at
    ``_exchange``): each site's upload is uniform in the ring (its bytes' frequencies
    pass a χ² test, all uploads together at the 0.1% level; the keys seeded), and no
    field of it correlates with the site's XᵢᵀXᵢ or Xᵢᵀyᵢ, where the same record of a
    plain solve has the Hessian sum's correlation 1; the uploads' exact sum is the plain
    sum."""
    p, data = least_squares_sites()
    seeded_keys(monkeypatch)
    seen = record_uploads(monkeypatch)
    res = cf.solve(p, inner="newton", secure=True, max_outer=2)
    masked = [(k, r) for k, r in seen if k != M.SECURE_KEYS]
    assert len(masked) == res.rounds - 1
    assert uniform_uploads(r for _, replies in masked for r in replies.values())
    assert worst_correlation(masked, p, data) < 0.9
    seen.clear()
    plain = cf.solve(p, inner="newton", max_outer=2)
    assert worst_correlation(seen, p, data) > 0.99           # the same record, unmasked
    assert plain.w.tobytes() == res.w.tobytes()


def mask_of(masks, seq, entries, cohort=None):
    """A client's mask alone: Masks.mask_into on zeros."""
    return masks.mask_into(seq, np.zeros((entries, 4), dtype=np.uint64), cohort)


def clients_masks(n=3, neighbours=2):
    secrets = [SiteSecret() for _ in range(n)]
    peers = [s.public_bytes() for s in secrets]
    return [Masks(s, peers, neighbours) for s in secrets]


def test_masks_cancel_over_a_cohort_and_only_there():
    """Three clients' masks for one message sum to zero in the ring; a cohort's masks
    (a baseline's sample) sum to zero over the cohort; two of three leave noise; a
    client's mask is the same for the same message and fresh for another."""
    clients = clients_masks()
    masks = [mask_of(c, 7, 5) for c in clients]
    total = np.zeros_like(masks[0])
    for m in masks:
        add_into(total, m)
    assert not total.any()
    partial = np.zeros_like(masks[0])
    for m in masks[:2]:
        add_into(partial, m)
    assert partial.any()
    cohort = (0, 2)
    a = mask_of(clients[0], 8, 5, cohort)
    add_into(a, mask_of(clients[2], 8, 5, cohort))
    assert not a.any()
    assert mask_of(clients[0], 7, 5).tobytes() == masks[0].tobytes()
    assert mask_of(clients[0], 9, 5).tobytes() != masks[0].tobytes()


@pytest.mark.parametrize("n", [3, 4, 7, 10])
@pytest.mark.parametrize("k", [2, 3, 4, 6])
def test_the_neighbour_ring_is_symmetric_and_k_connected(n, k):
    """The graph of :func:`ring_neighbours` is symmetric, of degree min(2⌈k/2⌉, n − 1),
    and stays connected when any 2⌈k/2⌉ − 1 clients are taken out (brute force): the
    server with fewer clients' help than the degree reads only sums."""
    graph = {i: set(ring_neighbours(i, n, k)) for i in range(n)}
    degree = min(2 * -(-k // 2), n - 1)
    assert all(len(graph[i]) == degree and i not in graph[i] for i in graph)
    assert all(i in graph[j] for i in graph for j in graph[i])
    import itertools
    for out in itertools.combinations(range(n), min(degree - 1, n - 2)):
        left = set(range(n)) - set(out)
        seen, todo = set(), [min(left)]
        while todo:
            v = todo.pop()
            if v not in seen:
                seen.add(v)
                todo += [u for u in graph[v] if u in left]
        assert seen == left


def test_masks_over_a_sparse_ring_cancel_and_hide_each_upload():
    """Ten clients with 4 neighbours each: the masks of every message (computed ahead
    in batches, shorter messages the start of longer ones) sum to zero over all ten and
    to noise over any nine; each is nonzero."""
    clients = clients_masks(10, 4)
    for seq, entries in [(1, 3), (2, 3), (3, 40), (4, 2), (90, 5)]:
        masks = [mask_of(c, seq, entries) for c in clients]
        assert all(m.any() for m in masks)
        total = np.zeros_like(masks[0])
        for m in masks:
            add_into(total, m)
        assert not total.any()
        for left_out in range(10):
            partial = np.zeros_like(masks[0])
            for i, m in enumerate(masks):
                if i != left_out:
                    add_into(partial, m)
            assert partial.any()


def test_an_upload_of_no_entries_is_sent_as_it_is():
    """Sums of no entries (every sum field of a reply empty) have nothing to hide: each
    client returns them unchanged, with or without a cohort, and the next message's
    masks still cancel (it used to divide by the message's length: ZeroDivisionError,
    a client error in a secure solve)."""
    clients = clients_masks(4, 2)
    for cohort in (None, (0, 1, 3)):
        for c in clients if cohort is None else [clients[i] for i in cohort]:
            assert mask_of(c, 3, 0, cohort).shape == (0, 4)
    total = np.zeros((6, 4), dtype=np.uint64)
    for c in clients:
        add_into(total, mask_of(c, 4, 6))
    assert not total.any()


def test_the_mask_stream_is_the_librarys_aes_ctr():
    """PRGᵢⱼ(seq) is AES-128-CTR under the pair's key with the counter starting at
    seq·2⁶⁴, as the library's own CTR mode computes it, bit for bit (the per-pair AES
    contexts, the masks computed ahead and the AES counters shared with the other
    clients of the thread are kept only for speed): client 0's mask is the sum of its
    pairs' streams (both above it), message after message, each computed right after
    client 2's of the same message (whose counters it takes)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    masks, _, other = clients_masks()
    assert masks.index == 0
    # a batch computed ahead (9 entries) whose messages take their masks' start from it,
    # the longer ones (30, 300) computing the rest alone; a new batch at a far message
    # number; past it two messages too long to batch (300: computed alone), one after
    # the other
    for seq, entries in [(1, 9), (2, 9), (3, 30), (4, 1), (5, 300), (6, 9),
                         (2 ** 40 + 3, 9), (2 ** 40 + 4, 20), (2 ** 40 + 300, 300),
                         (2 ** 40 + 301, 300)]:
        nonce = seq.to_bytes(8, "big") + bytes(8)
        expected = np.zeros((entries, 4), dtype=np.uint64)
        for j in (1, 2):
            ctr = Cipher(algorithms.AES(masks.pair_key(j)), modes.CTR(nonce)).encryptor()
            add_into(expected, np.frombuffer(ctr.update(bytes(32 * entries)),
                                             np.uint64).reshape(entries, 4).copy())
        mask_of(other, seq, entries)
        assert mask_of(masks, seq, entries).tobytes() == expected.tobytes()


def test_a_sum_with_a_client_missing_is_refused():
    """The server never forms a masked sum without every client's upload (noise), nor
    one over replies of different layouts."""
    reply = {SUMS: encode(np.ones(3)), LAYOUT: "a:3"}
    with pytest.raises(ValueError, match="missing"):
        aggregate("admm.step", {"a": reply, "b": reply}, masked=["a", "b", "c"])
    with pytest.raises(PartyError, match="differ") as err:
        aggregate("admm.step", {"a": reply, "b": reply, "c": {**reply, LAYOUT: "b:3"}},
                  masked=["a", "b", "c"])
    assert err.value.party == "c" and err.value.status == "client_error"


def test_a_lost_client_ends_a_secure_solve_resumably(monkeypatch):
    """A client gone mid-solve ends it as client_failure with the last iterate (no sum
    is formed without it); resumed once it is back, the solve ends where an
    uninterrupted one does, bit for bit."""
    p = np_problem(4, 0.4)
    whole = cf.solve(p, inner="admm", secure=True)
    original, calls = PartyRuntime.call, {"n": 0}

    def gone(self, seq, message_type, payload):
        if self.ctx.party.name == p.clients[2].name:
            calls["n"] += 1
            if calls["n"] > whole.rounds * 3 // 4:
                return ClientFailure(self.ctx.party.name, "its node went away")
        return original(self, seq, message_type, payload)
    monkeypatch.setattr(PartyRuntime, "call", gone)
    lost = cf.solve(p, inner="admm", secure=True)
    assert lost.status == "client_failure" and p.clients[2].name in lost.message
    assert np.isfinite(lost.w).all() and lost.history
    monkeypatch.setattr(PartyRuntime, "call", original)
    back = cf.solve(p, resume=lost)
    assert back.status == "optimal"
    assert back.w.tobytes() == whole.w.tobytes()


def test_a_resent_message_gets_the_same_masked_reply():
    """A runtime answers a repeated sequence number with its cached reply, and a runtime
    restored from its snapshot masks a recomputed reply with the same bits."""
    p = np_problem(3, 0.4)
    rts = [PartyRuntime(PartyContext(c, p.regularizer)) for c in p.clients]
    keys = [rt.call(1, M.SECURE_KEYS, {})["public_key"] for rt in rts]
    peers = np.concatenate(keys)
    first = rts[0].call(2, M.KKT_REPORT, {"w": np.zeros(p.dim), "penalty_weight": 10.0,
                                          "peers": peers, "neighbours": 2})
    again = rts[0].call(2, M.KKT_REPORT, {"w": np.zeros(p.dim), "penalty_weight": 10.0,
                                          "peers": peers, "neighbours": 2})
    assert again is first
    snap = rts[0].snapshot()
    fresh = PartyRuntime(PartyContext(p.clients[0], p.regularizer),
                         {**snap, "seq": 1, "reply": None})
    redo = fresh.call(2, M.KKT_REPORT, {"w": np.zeros(p.dim), "penalty_weight": 10.0})
    assert np.array(redo[SUMS]).tobytes() == np.array(first[SUMS]).tobytes()


def test_a_client_without_its_keys_refuses_to_send_plain_sums():
    """A masked round reaching a runtime that lost its keys (restored without them) is a
    client_error, never an unmasked upload."""
    p = np_problem(3, 0.4)
    rt = PartyRuntime(PartyContext(p.clients[0], p.regularizer))
    reply = rt.call(1, M.KKT_REPORT, {"w": np.zeros(p.dim), "penalty_weight": 10.0,
                                      "masked": 1})
    assert isinstance(reply, PartyError) and reply.status == "client_error"
    assert "keys" in str(reply)


@pytest.mark.parametrize("neighbours", [1, 0, -1])
def test_a_client_refuses_to_mask_with_fewer_than_two_neighbours(neighbours):
    """A round asking a client to mask with fewer than 2 neighbours (with one, that
    neighbour and the server together would read its upload) is a client_error naming
    the neighbours, never an upload; a federation is not built with such a number either
    (0 is False there: no masks, and none claimed), nor a solve."""
    p = np_problem(3, 0.4)
    rts = [PartyRuntime(PartyContext(c, p.regularizer)) for c in p.clients]
    peers = np.concatenate([rt.call(1, M.SECURE_KEYS, {})["public_key"] for rt in rts])
    reply = rts[0].call(2, M.KKT_REPORT, {"w": np.zeros(p.dim), "penalty_weight": 10.0,
                                          "masked": 1, "peers": peers,
                                          "neighbours": neighbours})
    assert isinstance(reply, PartyError) and reply.status == "client_error"
    assert "neighbours" in str(reply)
    if neighbours:
        with pytest.raises(ValueError, match="at least 2 neighbours"):
            InProcessFederation(p, secure=neighbours)
    else:                                    # a federation's secure=0 is False: no masks
        assert InProcessFederation(p, secure=neighbours).secure is None
    with pytest.raises(ValueError, match="at least 2"):
        cf.solve(p, secure=neighbours)


def test_secure_needs_three_clients_and_a_federation():
    with pytest.raises(ValueError, match="at least 3 clients"):
        cf.solve(np_problem(2), secure=True)
    with pytest.raises(ValueError, match="cproxal"):
        cf.solve(np_problem(3), "cproxal", secure=True)
    with pytest.raises(ValueError, match="private=False"):
        cf.solve(np_problem(3), secure=True, private=False)
    with pytest.raises(TypeError, match="secure must be True, False or a number"):
        cf.solve(np_problem(3), secure=2.0)
    with pytest.raises(ValueError, match="at least 2 neighbours"):
        cf.solve(np_problem(3), secure=1)
    with pytest.raises(ValueError, match="3 clients a round; client_fraction=0.4 samples 2"):
        cf.solve(np_problem(5), "fedavg", penalty="quadratic", client_fraction=0.4,
                 secure=True)


def test_a_stopped_secure_solve_resumes_bit_for_bit():
    """The public keys travel in the checkpoint (no second key agreement): a solve
    stopped after 2 outer iterations and resumed ends where the uninterrupted one does,
    in the same rounds."""
    p = np_problem(4, 0.4)
    whole = cf.solve(p, inner="admm", secure=True)
    part = cf.solve(p, inner="admm", secure=True, max_outer=2)
    assert part.status == "max_iterations"
    rest = cf.solve(p, resume=part, max_outer=whole.outer_iterations + 5)
    assert rest.status == whole.status == "optimal"
    assert rest.w.tobytes() == whole.w.tobytes()
    assert rest.rounds == whole.rounds


def test_the_server_party_is_not_masked_and_clients_are():
    """The server's own share (its global constraints) is its own: unmasked; the
    clients' replies carry masked sums."""
    p = np_problem(3, 0.4, server_separation=1.0)
    fed = InProcessFederation(p, secure=True)
    sums = fed.broadcast(M.KKT_REPORT, {"w": np.zeros(p.dim), "penalty_weight": 10.0})
    plain = InProcessFederation(p).broadcast(M.KKT_REPORT, {"w": np.zeros(p.dim),
                                                           "penalty_weight": 10.0})
    for k in plain:
        assert np.asarray(sums[k]).tobytes() == np.asarray(plain[k]).tobytes()
    assert fed.traffic.rounds == 2                    # the key agreement and the report
