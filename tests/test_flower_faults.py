"""Faults on the in-memory Grid: lost messages and replies, error replies, SuperNode
restarts (state restored from the site's directory), a site gone for good
(``client_failure``, then resumed to the same answer), a ClientApp that raises, and a
server that never waits past its limits."""
import time

import numpy as np
import pytest

import constrfl as cf
from builders import np_problem

pytest.importorskip("flwr")

from constrfl.errors import ClientFailure  # noqa: E402
from constrfl.result import load_result  # noqa: E402
from constrfl.flower import codec, local_grid, simulate  # noqa: E402
from constrfl.flower.client import client_app  # noqa: E402
from constrfl.flower.grid import LocalGrid  # noqa: E402
from test_flower import assert_same  # noqa: E402

NP = np_problem(5, 0.4, server_separation=0.7)
NEWTON = dict(inner="newton")                       # 24 rounds to optimality
#: what a deployment of NP's 5 sites runs with by default (run_server): secure
#: aggregation, its key agreement message 1; each solver message one later than plain
SECURE = dict(secure=True)
FAST = dict(client_timeout=5.0, resend_after=0.05)  # resend soon, fail after 5 s
SITE = "client-2"


@pytest.fixture(scope="module")
def reference():
    return cf.solve(NP, **NEWTON, **SECURE)


def at_message(seq, site, action, then=None):
    """A fault hook: ``action`` on the first delivery of message ``seq`` to ``site``
    (``then(node_id)`` runs first), nothing otherwise.  Records the node it hit."""
    hits = []

    def hook(s, node, msg):
        if s == site and codec.meta(msg.content).get("seq") == seq and not hits:
            hits.append(node)
            if then is not None:
                then(node)
            return action
    hook.hits = hits
    return hook


@pytest.mark.parametrize("action", ["drop", "drop_reply", "unavailable"])
def test_a_lost_message_reply_or_error_reply_is_retried(tmp_path, reference, action):
    grid = local_grid(NP, tmp_path)
    hook = at_message(10, SITE, action)
    res = simulate(NP, grid=grid, faults=hook, **NEWTON, **FAST)
    assert hook.hits and [(s, a) for s, _, a in grid.stats.faults] == [(SITE, action)]
    assert_same(reference, res)
    # what the site's ClientApp ran beyond the others: message 10 twice when its reply
    # was lost; a second "which site are you?" after an error reply
    ran = grid.nodes[grid.node_of(SITE)].delivered
    others = grid.nodes[grid.node_of("client-0")].delivered
    assert ran - others == {"drop": 0, "drop_reply": 1, "unavailable": 1}[action]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_restarted_supernode_resumes_from_its_site_directory(tmp_path, when):
    """The SuperNode restarts (new node id, empty context.state, fresh ClientApp) just
    before it runs message 31 of an ADMM solve, or just after it ran it and wrote its
    state (the reply is lost): the server finds the site on its new node, resends, and
    the site carries on from its file — the same final point, bit for bit."""
    opts = dict(inner="admm", max_outer=2, max_inner=20)
    reference = cf.solve(NP, **opts, **SECURE)
    grid = local_grid(NP, tmp_path)
    old = grid.node_of(SITE)
    hook = at_message(31, SITE, "drop" if when == "before" else "drop_reply",
                      then=grid.restart)
    res = simulate(NP, grid=grid, faults=hook, **opts, **FAST)
    assert hook.hits == [old] and grid.node_of(SITE) != old
    assert_same(reference, res)


def test_a_restart_that_lost_the_site_directory_is_a_client_error(tmp_path):
    def wipe(node):
        grid.restart(node)
        for f in tmp_path.glob(f"{SITE}.state.*"):
            f.unlink()
    grid = local_grid(NP, tmp_path)
    res = simulate(NP, grid=grid, faults=at_message(13, SITE, "drop", then=wipe),
                   **NEWTON, **FAST)
    assert res.status == "client_error"
    assert SITE in res.message and "state" in res.message and "expects 12" in res.message
    assert res.error is not None and res.error.party == SITE
    partial = cf.solve(NP, max_outer=res.outer_iterations, **NEWTON, **SECURE)
    assert res.w.tobytes() == partial.w.tobytes()


def test_a_site_gone_for_good_ends_client_failure_and_resumes_to_the_same_answer(
        tmp_path, reference):
    grid = local_grid(NP, tmp_path)
    gone = {}

    def leave(node):
        gone["node"] = grid.remove(node)
    t0 = time.perf_counter()
    res = simulate(NP, grid=grid, faults=at_message(16, SITE, "drop", then=leave),
                   **NEWTON, client_timeout=0.5, resend_after=0.05)
    elapsed = time.perf_counter() - t0
    assert res.status == "client_failure" and SITE in res.message
    assert isinstance(res.error, ClientFailure) and res.error.party == SITE
    assert elapsed < 0.5 + 3.0                       # waited client_timeout, not more
    # the last completed outer iterate, its multipliers and history are kept
    partial = cf.solve(NP, max_outer=res.outer_iterations, **NEWTON, **SECURE)
    assert res.outer_iterations >= 1 and res.rounds == 15
    assert res.w.tobytes() == partial.w.tobytes()
    for party, m in partial.multipliers.items():
        assert res.multipliers[party].ineq.tobytes() == m.ineq.tobytes()
    assert res.history == partial.history
    # saved, loaded, and resumed once the site is back (a new node, the same directory)
    res.save(tmp_path / "result")
    loaded = load_result(tmp_path / "result")
    grid.add(*gone["node"])
    final = simulate(NP, grid=grid, resume=loaded, **FAST)
    assert_same(reference, final)


def test_a_clientapp_that_raises_is_a_client_error(tmp_path):
    clients = {c.name: c for c in NP.clients}

    def build(context):
        if context.node_config["site"] == SITE:
            raise OSError("data file missing")
        return clients[context.node_config["site"]]
    grid = LocalGrid([({"site": n}, lambda: client_app(build, state_dir=tmp_path))
                      for n in clients])
    res = simulate(NP, grid=grid, **NEWTON, **FAST)
    assert res.status == "client_error" and res.outer_iterations == 0
    assert "data file missing" in res.message and SITE in res.message


def test_the_server_stops_waiting_at_max_time(tmp_path):
    grid = local_grid(NP, tmp_path)
    silent = at_message(5, SITE, "drop", then=grid.remove)
    t0 = time.perf_counter()
    res = simulate(NP, grid=grid, faults=silent, max_time=1.0, client_timeout=60.0,
                   **NEWTON)
    assert res.status == "time_limit" and time.perf_counter() - t0 < 4.0
    assert np.all(np.isfinite(res.w))
