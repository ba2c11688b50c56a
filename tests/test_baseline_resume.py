"""A baseline stopped in the middle of a round resumes to the uninterrupted run bit for bit
(issue 22, item 1).

A round of a baseline is two messages: the clients' training exchange and the observer's
``kkt.report``.  A party answers a sequence number it has answered from its cache, so the
message that follows a stop must be the one that was cut off.  The faults here are
deterministic: a party's function raises once, at a chosen call.
"""
import time

import pytest

import constrfl as cf
from constrfl import functions as fn
from constrfl.api import BASELINES
from builders import np_problem
from test_stop_resume import same


class FailsOnce:
    """``f`` behind a Custom whose ``which`` ("value" or "grad") raises at its ``at``-th
    call, and only then."""

    def __init__(self, f, which, at):
        self.f, self.which, self.at, self.calls = f, which, at, 0
        self.fn = fn.Custom(lambda w: self._call("value", w), lambda w: self._call("grad", w),
                            f.hess, dim=f.dim)

    def _call(self, which, w):
        if which == self.which:
            self.calls += 1
            if self.calls == self.at:
                raise RuntimeError(f"{which} fails once")
        return getattr(self.f, which)(w)


def constrained(which=None, at=None):
    """Neyman-Pearson over 3 clients (each with its constraint); with ``which``, client
    1's objective fails once (:class:`FailsOnce`, kept as ``p.fails``)."""
    p = np_problem(3, 0.4, rows=300)
    if which is not None:
        c = p.clients[1]
        p.fails = FailsOnce(c.objective, which, at)
        p.clients[1] = cf.Client(objective=p.fails.fn, constraints=c.constraints,
                                 name=c.name)
    return p


def with_server(which=None, at=None):
    """:func:`constrained`'s clients and a server constraint ‖w‖² ≤ 1 whose ``which``
    fails once (:class:`FailsOnce`, kept as ``p.fails``)."""
    p = np_problem(3, 0.4, rows=300)
    g = fn.SquaredNorm() - 1.0
    fails = None if which is None else FailsOnce(g, which, at)
    p = cf.Problem(p.clients, server=cf.Server(constraints=[g if fails is None else fails.fn]))
    p.fails = fails
    return p


def first_call_in_round(r, which, build=constrained, **opts):
    """The number of the first call in round r of ``which`` of the function that
    ``build`` makes fail, counted in an uninterrupted run (how many calls a message
    makes is the handlers' business)."""
    p = build(which, at=0)                       # counts, never fails
    ends = [0]
    cf.solve(p, callback=lambda rec: ends.append(p.fails.calls), **opts)
    return ends[r - 1] + 1


PENALTY = dict(penalty="quadratic", penalty_weight=10.0, rounds=4, local_steps=3)


@pytest.mark.parametrize("method", BASELINES)
def test_stopped_in_the_observation_of_a_round_resumes_bit_for_bit(method):
    """Client 1's objective value (used only by the observer) fails in round 2's
    kkt.report, after client 0 has answered it: the resume sends that report again, not
    round 2's training again (client 0 answered it with its cached report: KeyError
    'mu'), and so does not count round 2's exchange twice."""
    opts = dict(PENALTY, method=method)
    full = cf.solve(constrained(), **opts)
    p = constrained("value", at=first_call_in_round(2, "value", **opts))
    res = cf.solve(p, **opts)
    assert res.status == "client_error" and "value fails once" in res.message
    assert res.outer_iterations == 1              # round 2 not observed: not kept
    same(cf.solve(p, resume=res), full)


def test_partial_participation_resumes_without_an_extra_round(tmp_path):
    """One client of three a round: round 2's is client 1, who fails in that round's
    observation, so it cached no reply: the old resume ran round 2's training again
    without an error, but counted it twice (a round and its bytes more than the
    uninterrupted run).  The pending round is saved and loaded with the result."""
    opts = dict(PENALTY, method="fedavg", client_fraction=1 / 3, rounds=6)
    full = cf.solve(constrained(), **opts)
    p = constrained("value", at=first_call_in_round(2, "value", **opts))
    res = cf.solve(p, **opts)
    assert res.status == "client_error" and res.outer_iterations == 1
    same(cf.solve(p, resume=cf.load_result(res.save(tmp_path))), full)


def test_stopped_in_a_training_exchange_sends_nothing_else():
    """With observe=False, client 1's gradient fails in round 2's training after client 0
    has answered it: the final model is not observed in its place (client 0 would answer
    that report with its cached training reply), and the resume completes the round."""
    opts = dict(PENALTY, method="fedavg", observe=False)
    full = cf.solve(constrained(), **opts)
    p = constrained("grad", at=first_call_in_round(2, "grad", **opts))
    res = cf.solve(p, **opts)
    assert res.status == "client_error" and "grad fails once" in res.message
    assert res.outer_iterations == 1
    same(cf.solve(p, resume=res), full)


def test_a_server_function_failing_in_a_round_does_not_repeat_its_exchange():
    """The server's own penalty gradient fails in round 2.  It is taken at the round's
    model before the clients' exchange (it was after it, and the resume ran the exchange
    again: a round and its bytes more than the uninterrupted run)."""
    opts = dict(PENALTY, method="fedavg")
    full = cf.solve(with_server(), **opts)
    p = with_server("grad", at=first_call_in_round(2, "grad", with_server, **opts))
    res = cf.solve(p, **opts)
    assert res.status == "client_error" and "the server" in res.message
    assert res.outer_iterations == 1 and res.rounds == full.history[0]["rounds"]
    same(cf.solve(p, resume=res), full)


def test_time_limit_in_a_round_resumes_bit_for_bit():
    """The issue's reproducer: a client whose objective value (the observer's) takes
    50 ms, max_time = 20 ms; resumed until the rounds are done, the run is the
    uninterrupted one (a resume makes progress: the first client of a message always
    answers)."""
    def problem():
        p = constrained()
        c, f = p.clients[1], p.clients[1].objective
        slow = fn.Custom(lambda w: (time.sleep(0.05), f.value(w))[1], f.grad, f.hess,
                         dim=f.dim)
        p.clients[1] = cf.Client(objective=slow, name=c.name)
        return p
    opts = dict(PENALTY, method="fedavg")
    p = problem()
    res = cf.solve(p, max_time=0.02, **opts)
    stops = 0
    while res.status == "time_limit" and stops < 100:
        stops += 1
        res = cf.solve(p, resume=res, max_time=0.02)
    assert PENALTY["rounds"] <= stops < 100
    same(res, cf.solve(problem(), **opts))


def test_client_failure_in_an_observation_on_flower_resumes_bit_for_bit(tmp_path):
    """On Flower: client 1's node leaves for good at round 2's kkt.report (message 5:
    the key agreement of secure aggregation, a deployment's default, then each round
    its exchange and its report), after the others answered it; client_failure, then
    resumed once the node is back, the uninterrupted run."""
    pytest.importorskip("flwr")
    from constrfl.flower import local_grid, simulate
    from test_flower_faults import at_message
    opts = dict(PENALTY, method="fedavg")
    p = constrained()
    grid, gone = local_grid(p, tmp_path), {}

    def leave(node):
        gone["node"] = grid.remove(node)
    hook = at_message(5, p.clients[1].name, "drop", then=leave)
    res = simulate(p, grid=grid, faults=hook, client_timeout=0.5, resend_after=0.05,
                   **opts)
    assert hook.hits and res.status == "client_failure" and res.outer_iterations == 1
    grid.add(*gone["node"])
    same(simulate(p, grid=grid, resume=res, client_timeout=5.0, resend_after=0.05),
         cf.solve(p, secure=True, **opts))
