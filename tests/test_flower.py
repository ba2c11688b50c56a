"""constrfl on Flower: the codec, and simulate() against cf.solve bit for bit.

Runs on the in-memory Grid (no Ray, no sockets); skipped without flwr.
"""
import logging

import numpy as np
import pytest

import constrfl as cf
from builders import lcqp_problem, np_problem, sparse_np, wide_np

NP = np_problem(5, 0.4, server_separation=0.7)
LCQP = lcqp_problem()


flwr = pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Message  # noqa: E402
from flwr.app.metadata import validate_message_type  # noqa: E402

from constrfl.messages import MessageType as M  # noqa: E402
from constrfl.flower import codec, simulate  # noqa: E402

# float64 values a naive codec would get wrong: signed zero, subnormals, infinities,
# a NaN with a payload, the extremes
SPECIAL = np.concatenate([
    [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308 / 3, np.inf, -np.inf, np.nan,
     np.finfo(float).max, np.finfo(float).tiny, 1 / 3],
    np.array([0x7FF8000000000123, 0xFFF0000000000001], dtype=np.uint64).view(np.float64)])


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


# -- the codec -----------------------------------------------------------------------------

def test_message_types_map_to_flower_categories():
    assert codec.flower_type(M.compound(M.AL_UPDATE, M.ADMM_START)) == \
        "query.al_update__admm_start"
    assert codec.flower_type(M.ADMM_STEP) == "train.admm_step"
    assert codec.flower_type(M.NEWTON_EVAL) == "evaluate.newton_eval"
    types = codec.known_types()
    assert M.compound(M.AL_BEGIN, M.NEWTON_EVAL) in types
    flower = [codec.flower_type(t) for t in types]
    assert len(set(flower)) == len(flower)               # no two types collide
    assert all(validate_message_type(f) for f in flower)


@pytest.mark.parametrize("scalar", [np.int64(1), np.bool_(True), np.float32(1.0)])
def test_records_refuse_numpy_scalars(scalar):
    with pytest.raises(TypeError):
        ConfigRecord({"x": scalar})                         # Flower's own rule
    with pytest.raises(TypeError, match="not plain data"):
        codec.encode({"x": scalar}, {})


def test_codec_refuses_float64_scalars_that_flower_would_accept():
    ConfigRecord({"x": np.float64(1.0)})                    # a float subclass: accepted
    with pytest.raises(TypeError, match="not plain data"):  # the protocol's rule is
        codec.encode({"x": np.float64(1.0)}, {})            # stricter (check_payload)


def test_party_error_travels_as_an_answer():
    err = cf.errors.PartyError("numerical_error", "constraints[0]", "value is NaN")
    content = codec.encode_error(err, {"seq": 4, "site": "a", "solve": "s"})
    back = codec.decode(content)
    assert isinstance(back, cf.errors.PartyError)
    assert (back.status, back.slot, back.reason, back.party) == \
        ("numerical_error", "constraints[0]", "value is NaN", "a")
    assert str(back) == "client 'a': constraints[0]: value is NaN"


def test_site_state_packs_exactly_and_survives_a_torn_write(tmp_path):
    state = {"mu": SPECIAL.copy(), "nu": np.zeros(0), "H": SPECIAL[:6].reshape(2, 3),
             "beta": 100.0, "gamma": -0.0, "rho": np.nan, "local_max_iter": 100,
             "local_hessian": True, "note": "x"}
    snap = {"state": state, "seq": 12, "reply": {"e": SPECIAL[::-1].copy(), "primal": 0.5}}
    back, fields = codec.unpack_state(codec.pack_state(snap, {"solve": "s1"}))
    assert fields == {"solve": "s1"} and back["seq"] == 12
    for part in ("state", "reply"):
        assert list(back[part]) == list(snap[part])
        for k, v in snap[part].items():
            if isinstance(v, np.ndarray):
                assert back[part][k].shape == v.shape and np.array_equal(bits(back[part][k]),
                                                                         bits(v))
            else:
                assert type(back[part][k]) is type(v)
                assert np.array_equal(bits(np.float64(back[part][k])), bits(np.float64(v))) \
                    if isinstance(v, float) else back[part][k] == v
    store = codec.SiteStore(tmp_path / "site.state")
    assert store.load() == (None, {})
    first = codec.pack_state(dict(snap, seq=1), {"solve": "s1"})
    store.save(first)
    store.save(codec.pack_state(dict(snap, seq=2), {"solve": "s1"}))
    assert codec.SiteStore(tmp_path / "site.state").load()[0]["seq"] == 2
    newest = max(store.slots, key=lambda p: p.stat().st_mtime_ns)
    newest.write_bytes(newest.read_bytes()[:-5])               # a write cut short
    assert codec.SiteStore(tmp_path / "site.state").load()[0]["seq"] == 1


# -- simulate() against cf.solve, bit for bit -------------------------------------------------

def assert_same(a, b):
    """Two results equal bit for bit: point, multipliers, counters, history.  ``b`` may
    hold fewer parties' multipliers (a deployment's server keeps only its own: each site
    keeps its own)."""
    assert (a.status, a.message) == (b.status, b.message)
    assert a.w.tobytes() == b.w.tobytes()
    assert "server" in b.multipliers and set(b.multipliers) <= set(a.multipliers)
    for party in b.multipliers:
        assert a.multipliers[party].ineq.tobytes() == b.multipliers[party].ineq.tobytes()
        assert a.multipliers[party].eq.tobytes() == b.multipliers[party].eq.tobytes()
    assert (a.rounds, a.bytes_up, a.bytes_down, a.outer_iterations, a.inner_iterations) == \
        (b.rounds, b.bytes_up, b.bytes_down, b.outer_iterations, b.inner_iterations)
    assert len(a.history) == len(b.history)
    for ra, rb in zip(a.history, b.history):
        assert ra.keys() == rb.keys()
        for k in ra:
            assert np.array_equal(np.float64(ra[k]), np.float64(rb[k]), equal_nan=True), k
    assert np.array_equal([a.objective, *vars(a.kkt).values()],
                          [b.objective, *vars(b.kkt).values()], equal_nan=True)


def deployed(prob, **opts):
    """cf.solve as a deployment runs it: secure aggregation on with 3 sites or more
    (run_server's default), so that simulate's answer is this one bit for bit."""
    return cf.solve(prob, secure=len(prob.clients) >= 3, **opts)


CASES = {
    "admm": dict(max_outer=2, max_inner=40),   # al.begin+admm.start, admm.step, al.update+…
    #                                            (the second subproblem with the metric Jᵢ)
    "newton": dict(inner="newton"),            # to optimality
    "newton-cg": dict(inner="newton-cg"),      # to optimality, Hessian-vector rounds
    "fedavg": dict(method="fedavg", penalty="quadratic", rounds=6, client_fraction=0.6),
    "fedadam": dict(method="fedadam", penalty="quadratic", rounds=6),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("problem", ["np", "lcqp"])
def test_simulate_equals_solve_bit_for_bit(problem, case):
    prob = NP if problem == "np" else LCQP
    opts = CASES[case]
    if problem == "lcqp" and case.startswith("fed"):
        opts = dict(opts, client_lr=1e-3)
    if problem == "lcqp" and case == "admm":
        opts = dict(opts, max_inner=30)          # d = 50: cheaper rounds, same messages
    expected = deployed(prob, tol=1e-6, **opts)
    got = simulate(prob, tol=1e-6, **opts)
    assert_same(expected, got)
    assert got.rounds > 0 and got.history
    if case.startswith("newton"):
        assert got.status == "optimal"


def test_a_recycling_newton_cg_equals_solve_bit_for_bit(monkeypatch):
    """Newton-CG's recycled directions (a block in ``newton.eval``, their products a sum
    field of its reply) and its blocks of products cross Flower's codec and the secure
    sum as any field does."""
    from constrfl.federation import base
    blocks, broadcast = [], base.Federation.broadcast

    def spy(self, kind, payload, *args, **kwargs):
        if "v" in payload:
            blocks.append((kind, payload["v"].size // payload["w"].size))
        return broadcast(self, kind, payload, *args, **kwargs)
    monkeypatch.setattr(base.Federation, "broadcast", spy)
    _, prob = wide_np()
    expected = deployed(prob, tol=1e-6, inner="newton-cg")
    del blocks[:]
    got = simulate(prob, tol=1e-6, inner="newton-cg")
    assert any(kind != M.NEWTON_HVP and size > 1 for kind, size in blocks)  # recycled
    assert any(kind == M.NEWTON_HVP and size > 1 for kind, size in blocks)  # a block
    assert_same(expected, got)
    assert got.status == "optimal"


def test_newton_basis_equals_solve_bit_for_bit():
    """The row bases, the cores and the inequalities' models (B6) of
    ``inner="newton-basis"`` cross the codec exactly."""
    _, prob = wide_np(server_rows=40)
    expected = cf.solve(prob, tol=1e-6, inner="newton-basis", private=False)
    got = simulate(prob, tol=1e-6, inner="newton-basis", private=False)
    assert_same(expected, got)
    assert got.status == "optimal"


@pytest.mark.parametrize("regularizer", [cf.prox.SquaredL2(1e-2), cf.prox.L1(1e-3)])
def test_sparse_hessians_equal_solve_bit_for_bit(regularizer):
    """The sparse parties' patterns, entries and constraint rows (B4) of
    ``inner="newton-basis"`` cross the codec exactly."""
    _, prob = sparse_np(regularizer, server_rows=40)
    expected = cf.solve(prob, tol=1e-6, inner="newton-basis", private=False)
    got = simulate(prob, tol=1e-6, inner="newton-basis", private=False)
    assert_same(expected, got)
    assert got.status == "optimal"


@pytest.mark.parametrize("method", cf.BASELINES)
def test_every_baseline_equals_solve_with_a_composite_regularizer(method):
    """Three rounds of each baseline on NP with an L1 term: the clients' composite
    steps (FedMid, FedDualAvg) use the regularizer the ClientApp was given."""
    prob = np_problem(3, 0.4, regularizer=cf.prox.L1(0.01))     # no server: FedCAda
    opts = dict(method=method, rounds=3, local_steps=2, penalty="quadratic")
    assert_same(deployed(prob, **opts), simulate(prob, **opts))


def test_cproxal_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="centralized"):
        simulate(NP, method="cproxal")


def test_a_server_view_without_row_counts_refuses_rho_samples():
    from constrfl.flower.grid import LocalGrid
    from constrfl.flower.server import run_server
    from constrfl.problem import ServerSide
    view = ServerSide(NP.dim, NP.client_names, NP.server, NP.regularizer)
    with pytest.raises(ValueError, match="row counts"):
        run_server(LocalGrid([]), view, inner="admm", rho="samples")


def test_the_server_app_logs_a_line_per_outer_iteration(capsys):
    """A deployment's ServerApp says where the solve is: one line per outer iteration on
    its stderr, unless the application configured the constrfl logger itself."""
    res = simulate(NP, backend="inmemory", max_outer=2)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "constrfl: outer iteration" in line]
    assert len(lines) == res.outer_iterations == 2
    assert not logging.getLogger("constrfl").handlers          # taken off again


# -- secure aggregation, a deployment's default -----------------------------------------------

def test_a_curious_serverapp_reads_only_noise_from_each_site(monkeypatch):
    """Everything the ServerApp receives from the sites on the in-memory grid (after
    Flower's serialization) in a default deployment of 4 least-squares sites: each
    site's upload is uniform in the ring and no field correlates with its XᵢᵀXᵢ or Xᵢᵀyᵢ;
    the answer is cf.solve's (secure=True, and so the plain one's) bit for bit."""
    pytest.importorskip("cryptography")
    from constrfl.flower.server import FlowerFederation
    from test_secure import seeded_keys, uniform_uploads, worst_correlation
    from test_sums_only import least_squares_sites
    p, data = least_squares_sites()
    seeded_keys(monkeypatch)
    seen, original = [], FlowerFederation._exchange

    def spy(self, seq, message_type, payloads):
        replies = original(self, seq, message_type, payloads)
        seen.append((message_type, {n: r for n, r in replies.items() if isinstance(r, dict)}))
        return replies
    monkeypatch.setattr(FlowerFederation, "_exchange", spy)
    got = simulate(p, inner="newton", max_outer=2)
    assert seen[0][0] == M.SECURE_KEYS and len(seen) == got.rounds
    masked = seen[1:]
    assert uniform_uploads(r for _, replies in masked for r in replies.values())
    assert worst_correlation(masked, p, data) < 0.9
    assert_same(cf.solve(p, inner="newton", max_outer=2, secure=True), got)
    assert got.w.tobytes() == cf.solve(p, inner="newton", max_outer=2).w.tobytes()


def test_two_sites_deploy_without_masks_and_say_so(caplog):
    """With 2 sites a sum would show each site the other's upload: a deployment runs
    without secure aggregation and logs why; asking for it is refused."""
    prob = np_problem(2, 0.4)
    with caplog.at_level(logging.WARNING, logger="constrfl.flower"):
        got = simulate(prob, inner="newton")
    assert "secure aggregation is off: 2 sites" in caplog.text
    assert_same(cf.solve(prob, inner="newton"), got)
    with pytest.raises(ValueError, match="at least 3 clients"):
        simulate(prob, inner="newton", secure=True)


def test_a_site_takes_the_newer_of_its_context_and_its_file(tmp_path):
    """The file is written before each reply leaves; a SuperNode may store the
    ClientApp's context after the reply went out, and the next message may come first:
    the site resumes from whichever of the two is newer (it answered message 2, not 1)."""
    from flwr.app import Context, RecordDict
    from constrfl.federation.runtime import PartyRuntime
    from constrfl.flower.client import _runtime
    from constrfl.parties import PartyContext
    p = np_problem(2, 0.4)
    party = PartyContext(p.clients[0], p.regularizer)
    rt = PartyRuntime(party)
    snaps = []
    for seq in (1, 2):
        rt.call(seq, M.KKT_REPORT, {"w": np.zeros(p.dim), "penalty_weight": 10.0})
        snaps.append(codec.pack_state(rt.snapshot(), {"solve": "s"}))

    def context(blob):
        return Context(run_id=1, node_id=1, node_config={}, run_config={},
                       state=RecordDict({codec.META: codec.state_to_records(blob)}))
    for in_context, in_file in ((snaps[0], snaps[1]), (snaps[1], snaps[0])):
        store = codec.SiteStore(tmp_path / f"{len(list(tmp_path.iterdir()))}.state")
        store.save(in_file)
        assert _runtime(party, context(in_context), store, "s", False).seq == 2
    other = codec.SiteStore(tmp_path / "other.state")
    other.save(snaps[1])
    assert _runtime(party, context(snaps[0]), other, "another solve", False).seq == 0
