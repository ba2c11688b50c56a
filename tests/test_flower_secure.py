"""The secure sum's Flower mod (constrfl.flower.secure_sum_mod): a reply's sums travel as
an entry of its record where a mod sees them; the secure mod, outermost, masks them (a
mod inside it sees the plain encoding, the ServerApp noise whose sum is the plain sum);
a lost key agreement reply is resent harmlessly; a site whose keys are gone answers
client_error, never its plain sums."""
import numpy as np
import pytest

import constrfl as cf
from builders import np_problem

pytest.importorskip("flwr")
pytest.importorskip("cryptography")

from constrfl.exactsum import exact_sum  # noqa: E402
from constrfl.flower import codec, local_grid, simulate  # noqa: E402
from constrfl.flower.client import client_app  # noqa: E402
from constrfl.flower.grid import LocalGrid  # noqa: E402
from constrfl.flower.server import FlowerFederation  # noqa: E402
from constrfl.messages import SUMS, MessageType as M  # noqa: E402
from test_flower import assert_same  # noqa: E402
from test_flower_faults import FAST, NEWTON, NP, SITE, at_message  # noqa: E402


def test_a_mod_sees_the_sums_and_the_secure_mod_masks_them(tmp_path, monkeypatch):
    p = np_problem(4, 0.4)
    inside = {}                          # (site, seq) -> the sums a mod inside sees

    def spy(msg, context, call_next):
        reply = call_next(msg, context)
        sums = codec.sums_of(reply.content)
        if sums is not None:
            f = codec.meta(reply.content)
            inside[(f["site"], f["seq"])] = sums
        return reply
    server = {}                          # (site, seq) -> the sums the ServerApp receives
    original = FlowerFederation._exchange

    def record(self, seq, message_type, payloads):
        replies = original(self, seq, message_type, payloads)
        for n, r in replies.items():
            if isinstance(r, dict) and SUMS in r:
                server[(n, seq)] = np.array(r[SUMS])
        return replies
    monkeypatch.setattr(FlowerFederation, "_exchange", record)
    clients = {c.name: c for c in p.clients}
    grid = LocalGrid([({"site": n}, lambda: client_app(
        lambda ctx: clients[ctx.node_config["site"]], state_dir=tmp_path, mods=[spy]))
        for n in clients])
    grid.state_dir = tmp_path                 # (where simulate reads the sites' multipliers)
    got = simulate(p, grid=grid, inner="newton", max_outer=2)
    assert server and server.keys() == inside.keys()
    for key in server:
        assert server[key].tobytes() != inside[key].tobytes()          # masked
    for seq in {s for _, s in server}:
        masked = exact_sum([server[(n, seq)] for n in clients])
        plain = exact_sum([inside[(n, seq)] for n in clients])
        assert masked.tobytes() == plain.tobytes()                      # the same sum
    assert_same(cf.solve(p, inner="newton", max_outer=2, secure=True), got)


def test_a_resent_key_agreement_gets_the_same_key(tmp_path):
    """The mod answers a key agreement it has answered with the same public key (the
    server keeps the first reply that reaches it), a new agreement with a new one; and
    a deployment whose agreement reply was lost ends as the reference, bit for bit."""
    from flwr.app import Context, RecordDict
    from constrfl.flower.secure import secure_sum_mod
    grid = local_grid(NP, tmp_path)
    mod = secure_sum_mod(lambda context: SITE, lambda context, name: codec.SiteStore(
        tmp_path / "mod" / f"{name}.state"))
    context = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(),
                      run_config={})

    def key(seq):
        msg = grid.create_message(codec.encode({}, {"seq": seq, "solve": "s", "prev": 0}),
                                  codec.flower_type(M.SECURE_KEYS), 1, "")
        return codec.decode(mod(msg, context, None).content)["public_key"].tobytes()
    assert key(1) == key(1) != key(2)
    hook = at_message(1, SITE, "drop_reply")
    res = simulate(NP, grid=grid, faults=hook, **NEWTON, **FAST)
    assert hook.hits
    assert_same(cf.solve(NP, **NEWTON, secure=True), res)


def test_a_site_whose_keys_are_gone_answers_client_error(tmp_path):
    """A restarted SuperNode whose secure sum's keys were lost (its state kept) does
    not send its sums unmasked: client_error naming the site."""
    def wipe(node):
        grid.restart(node)
        for f in tmp_path.glob(f"{SITE}.secure.state.*"):
            f.unlink()
    grid = local_grid(NP, tmp_path)
    res = simulate(NP, grid=grid, faults=at_message(6, SITE, None, then=wipe), **NEWTON,
                   **FAST)
    assert res.status == "client_error"
    assert SITE in res.message and "keys" in res.message
