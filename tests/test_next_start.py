"""The next start ahead (docs/algorithms.md §3): a Newton trial that likely ends its
subproblem also brings the next subproblem's first evaluation, so the outer iteration
ends without its multiplier round.  The iterates are the multiplier round's bit for bit,
with fewer rounds; the parties take the step taken ahead only when the server's next
message says the subproblem ended there, and undo it (with its record) otherwise."""
import json

import numpy as np
import pytest

import constrfl as cf
from constrfl import prox
from constrfl.errors import PartyError
from constrfl.federation.runtime import PartyRuntime
from constrfl.messages import MessageType as M
from constrfl.parties import PartyContext, reported_multipliers
from constrfl.problems import lcqp
from constrfl.solvers import newton, proxal
from builders import np_problem

CASES = {
    "np": (lambda: np_problem(4, 0.4, rows=300, server_separation=0.8), {}),
    "np-l1": (lambda: np_problem(3, 0.4, rows=300, regularizer=prox.L1(1e-2)), {}),
    "np-newton-cg": (lambda: np_problem(3, 0.4, rows=300, regularizer=prox.SquaredL2(1e-3)),
                     {"inner": "newton-cg"}),
    "lcqp": (lambda: lcqp(4, 30, 3, seed=0), {}),
}


def without_ahead(monkeypatch):
    monkeypatch.setattr(newton, "AHEAD_RESIDUAL", 0.0)
    monkeypatch.setattr(newton, "AHEAD_REDUCTION", 0.0)


def starts_ahead(monkeypatch):
    """Count the outer iterations that began from sums taken ahead."""
    used = []
    begin = newton.Newton.begin

    def counted(self, sums, wk, tau, beta, previous=None, eta=None):
        used.append("lagrangian_grad" not in sums)   # (a start round brings KKT shares)
        return begin(self, sums, wk, tau, beta, previous, eta)
    monkeypatch.setattr(newton.Newton, "begin", counted)
    return used


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_next_start_ahead_saves_rounds_bit_for_bit(case, monkeypatch):
    """The same iterates bit for bit, KKT records and Newton steps, in fewer rounds;
    certified by cvxpy on the pooled problem; the multipliers those of the multiplier
    round (to rounding: where the solve ends on a trial taken ahead, step 3 there is
    al.update's, the ride's takes cᵢ(x) from the evaluation's own pass)."""
    build, opts = CASES[case]
    problem = build()
    ahead = cf.solve(problem, tol=1e-6, **opts)
    assert ahead.status == "optimal" and cf.certify(problem, ahead).ok
    with monkeypatch.context() as m:
        without_ahead(m)
        waits = cf.solve(problem, tol=1e-6, **opts)
    assert waits.status == "optimal"
    assert ahead.w.tobytes() == waits.w.tobytes()
    assert ahead.inner_iterations == waits.inner_iterations
    assert ahead.rounds < waits.rounds
    keys = ("stationarity", "feasibility", "multiplier_step", "objective", "tau", "beta")
    assert len(ahead.history) == len(waits.history)
    for a, b in zip(ahead.history[:-1], waits.history[:-1]):
        assert [a[key] for key in keys] == [b[key] for key in keys]
    for key in keys:               # the last: to rounding (residuals of O(1) gradients)
        assert ahead.history[-1][key] == pytest.approx(waits.history[-1][key], rel=1e-9,
                                                       abs=1e-12), key
    for name, m in ahead.multipliers.items():
        assert np.allclose(m.ineq, waits.multipliers[name].ineq, rtol=1e-12, atol=1e-15)


def test_each_outer_iteration_saved_is_a_round(monkeypatch):
    """The rounds saved are the outer iterations started from sums taken ahead (one
    multiplier round each), and every such start was a trial's."""
    problem = np_problem(4, 0.4, rows=300, server_separation=0.8)
    used = starts_ahead(monkeypatch)
    ahead = cf.solve(problem, tol=1e-6)
    with monkeypatch.context() as m:
        without_ahead(m)
        waits = cf.solve(problem, tol=1e-6)
    assert sum(used) > 0
    # the last subproblem of each may end on the KKT ride: its round is saved either way
    assert waits.rounds - ahead.rounds in (sum(used), sum(used) + 1)


def test_a_solve_stopped_on_a_start_taken_ahead_resumes_bit_for_bit(monkeypatch, tmp_path):
    """Stopped by its callback right after an outer iteration that ended on a trial taken
    ahead (the parties still in the old subproblem, the step recorded), saved, loaded
    and resumed: the uninterrupted solve bit for bit, multipliers and history included."""
    problem = np_problem(4, 0.4, rows=300, server_separation=0.8)
    used = starts_ahead(monkeypatch)
    full = cf.solve(problem, tol=1e-6)
    k = next(i for i, u in enumerate(used[1:]) if u)      # outer iteration k ended ahead
    res = cf.solve(problem, tol=1e-6, callback=lambda r: r["k"] == k)
    assert res.status == "stopped" and res.outer_iterations == k + 1
    res.save(tmp_path / "stopped")
    again = cf.solve(problem, tol=1e-6, resume=cf.load_result(tmp_path / "stopped"))
    assert again.w.tobytes() == full.w.tobytes()
    assert (again.rounds, again.bytes_up, again.bytes_down) == (full.rounds, full.bytes_up,
                                                                 full.bytes_down)
    for name, m in full.multipliers.items():
        assert again.multipliers[name].ineq.tobytes() == m.ineq.tobytes()
    assert json.dumps(again.to_dict()["history"]) == json.dumps(full.to_dict()["history"])


def _party(problem):
    client = problem.clients[0]
    return PartyRuntime(PartyContext(client, problem.regularizer))


def _begun(problem, w, beta=100.0):
    """A party after ``al.begin`` at w (subproblem 0) and one Newton evaluation there."""
    rt = _party(problem)
    rt.call(1, M.AL_BEGIN, {"w": w, "beta": beta, "subproblem": 0})
    return rt


def test_a_party_takes_the_step_ahead_as_al_update_would():
    """newton.eval with next_beta at x: the next evaluation is al.update+newton.eval's at
    x bit for bit; the next subproblem's message makes the step the party's (μ, β, wᵏ as
    al.update leaves them, its kkt record that message's); a message of the same
    subproblem, or the al.update that ends it, undoes the step and its record."""
    problem = np_problem(3, 0.4, rows=300, server_separation=None)
    w0 = np.zeros(problem.dim)
    x = np.linspace(-0.3, 0.4, problem.dim)
    ask = {"w": x, "order": 2, "kkt": True, "subproblem": 0}

    # the multiplier round: al.update at x, then the next subproblem's evaluation
    plain = _begun(problem, w0)
    plain.call(2, M.NEWTON_EVAL, {"w": x, "order": 2, "subproblem": 0})
    start = plain.call(3, M.compound(M.AL_UPDATE, M.NEWTON_EVAL),
                       {"w": x, "beta": 1000.0, "order": 2, "subproblem": 0})
    # ahead
    early = _begun(problem, w0)
    reply = early.call(2, M.NEWTON_EVAL, dict(ask, next_beta=1000.0))
    pending = early.state
    assert pending["pending_subproblem"] == 1 and pending["mu"].tobytes() == \
        _begun(problem, w0).state["mu"].tobytes()
    layout = dict(part.split(":") for part in reply["layout"].split(";"))
    assert {"next_values", "next_grad", "next_hess", "next_no_hessian"} <= set(layout)
    _same_fields(reply, start, {"next_values": "values", "next_grad": "grad",
                                "next_hess": "hess", "lagrangian_grad": "lagrangian_grad",
                                "multiplier_step_sq": "multiplier_step_sq"})
    # the next subproblem's first message: the step is taken
    early.call(4, M.NEWTON_EVAL, {"w": x, "order": 2, "subproblem": 1})
    plain.call(4, M.NEWTON_EVAL, {"w": x, "order": 2, "subproblem": 1})
    for key in ("mu", "nu", "wk"):
        assert early.state[key].tobytes() == plain.state[key].tobytes(), key
    assert early.state["beta"] == plain.state["beta"] == 1000.0
    assert early.state["subproblem"] == plain.state["subproblem"] == 1
    assert not any(k.startswith("pending_") for k in early.state)
    taken = reported_multipliers(early.ctx.party, early.state, "kkt", 2)
    assert taken.ineq.tobytes() == reported_multipliers(
        plain.ctx.party, plain.state, "kkt", 3).ineq.tobytes()

    # the same subproblem goes on: undone, the record before it is the party's again
    undone = _begun(problem, w0)
    mu, record = undone.state["mu"], reported_multipliers(undone.ctx.party, undone.state)
    undone.call(2, M.NEWTON_EVAL, dict(ask, next_beta=1000.0))
    assert reported_multipliers(undone.ctx.party, undone.state).ineq.tobytes() != \
        record.ineq.tobytes()                                   # the record ahead
    undone.call(3, M.NEWTON_EVAL, {"w": x * 0.5, "order": 2, "subproblem": 0})
    assert undone.state["mu"] is mu and undone.state["beta"] == 100.0
    assert undone.state["subproblem"] == 0 and "pending_mu" not in undone.state
    assert undone.state["kkt_mu"].tobytes() == record.ineq.tobytes()
    assert undone.state["kkt_seq"] == 1                    # al.begin's, as it was
    # ... or ends by al.update: undone first, then al.update's own step, as without
    ended = _begun(problem, w0)
    ended.call(2, M.NEWTON_EVAL, dict(ask, next_beta=1000.0))
    ended.call(3, M.compound(M.AL_UPDATE, M.NEWTON_EVAL),
               {"w": x, "beta": 1000.0, "order": 2, "subproblem": 0})
    for key in ("mu", "nu", "wk", "kkt_mu"):
        assert ended.state[key].tobytes() == plain.state[key].tobytes(), key
    assert ended.state["subproblem"] == plain.state["subproblem"] == 1


def _same_fields(reply, other, names):
    """The encoded sums of ``reply``'s fields equal ``other``'s under ``names``."""
    def fields(r):
        out, at = {}, 0
        for part in r["layout"].split(";"):
            name, size = part.split(":")
            n = int(size) if size else 1
            out[name] = r["sums"][at:at + n]
            at += n
        return out
    a, b = fields(reply), fields(other)
    for mine, theirs in names.items():
        assert a[mine].tobytes() == b[theirs].tobytes(), mine


def test_a_party_without_the_step_ahead_refuses_the_next_subproblem():
    """A message of subproblem 1 to a party in subproblem 0 that took no step ahead for
    it (its state lost, or an older one restored) is that party's client_error, not an
    answer at the old multipliers; its state stays as it was."""
    problem = np_problem(3, 0.4, rows=300)
    rt = _begun(problem, np.zeros(problem.dim))
    before = rt.state
    reply = rt.call(2, M.NEWTON_EVAL, {"w": np.zeros(problem.dim), "order": 2,
                                       "subproblem": 1})
    assert isinstance(reply, PartyError) and reply.status == "client_error"
    assert "took no step ahead" in str(reply) and rt.state is before


def test_a_state_saved_before_the_subproblems_were_counted_takes_the_step():
    """A party resumed from a state without its subproblem's number (saved before the
    parties counted them) takes a step it took ahead with the next subproblem's message,
    as one that counts does."""
    problem = np_problem(3, 0.4, rows=300)
    x = np.linspace(-0.3, 0.4, problem.dim)
    ask = {"w": x, "order": 2, "kkt": True, "subproblem": 0, "next_beta": 1000.0}
    runtimes = [_begun(problem, np.zeros(problem.dim)) for _ in range(2)]
    runtimes[0].state = {k: v for k, v in runtimes[0].state.items() if k != "subproblem"}
    for rt in runtimes:
        rt.call(2, M.NEWTON_EVAL, ask)
        rt.call(3, M.NEWTON_EVAL, {"w": x, "order": 2, "subproblem": 1})
    old, new = (rt.state for rt in runtimes)
    assert old["mu"].tobytes() == new["mu"].tobytes() and old["beta"] == new["beta"] == 1000.0
    assert old["subproblem"] == new["subproblem"] == 1
