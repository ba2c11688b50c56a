"""Edge cases of how a solve ends and resumes (issue 22, items 2–4)."""
import numpy as np
import pytest

import constrfl as cf
from builders import np_problem
from constrfl import functions as fn, prox


def test_a_callback_that_raises_at_the_solution_leaves_it_optimal():
    """The residuals at the last iterate meet tol: that is the answer, whatever the
    callback did after it (its exception is kept, as for any failed callback)."""
    p = np_problem(3)
    full = cf.solve(p, inner="newton")
    assert full.status == "optimal"
    last = full.outer_iterations - 1

    def fails_at_the_end(rec):
        if rec["k"] == last:
            raise RuntimeError("logging failed")

    res = cf.solve(p, inner="newton", callback=fails_at_the_end)
    assert res.status == "optimal" and res.success
    assert isinstance(res.error.__cause__, RuntimeError)
    assert "logging failed" in res.message
    assert np.array_equal(res.w, full.w) and res.rounds == full.rounds


def test_a_callback_that_raises_before_the_solution_stops_the_solve():
    p = np_problem(3)
    res = cf.solve(p, inner="newton", callback=lambda rec: 1 / 0)
    assert res.status == "stopped" and res.outer_iterations == 1
    assert "ZeroDivisionError" in res.message


class FailsAt:
    """A client objective whose ``calls``-th gradient raises (a fault at its site)."""

    def __init__(self, f, calls):
        self.f, self.at, self.calls = f, calls, 0
        self.fn = cf.functions.Custom(f.value, self.grad, f.hess, dim=f.dim)

    def grad(self, w):
        self.calls += 1
        if self.calls == self.at:
            raise OSError("disk gone")
        return self.f.grad(w)


@pytest.mark.parametrize("inner", ["newton", "admm"])
def test_a_fault_in_the_first_subproblem_reports_the_kkt_at_w0(inner):
    """Stopped before outer iteration 0 ended, the result's residuals and objective are
    those at w⁰ with zero multipliers, as cf.kkt computes them on the pooled functions."""
    p = np_problem(3)
    spy = FailsAt(p.clients[1].objective, 6)
    c = p.clients[1]
    p.clients[1] = cf.Client(objective=spy.fn, constraints=c.constraints, name=c.name)
    res = cf.solve(p, inner=inner)
    assert res.status == "client_error" and res.outer_iterations == 0
    ref = cf.kkt(p, res.w, res.multipliers)
    for field in ("stationarity", "feasibility", "complementarity", "definition1"):
        assert getattr(res.kkt, field) == pytest.approx(getattr(ref, field), rel=1e-12,
                                                        abs=1e-15)
    assert np.isfinite(res.kkt.stationarity) and res.kkt.stationarity > 0
    pooled = sum(cl.objective.value(res.w) for cl in p.clients) + p.regularizer.value(res.w)
    assert res.objective == pytest.approx(pooled, rel=1e-12)
    assert all(not np.any(m.ineq) and not np.any(m.eq) for m in res.multipliers.values())


def test_resume_keeps_the_tolerance():
    """tol=1e-10 stopped by max_outer and resumed without tol continues to 1e-10, bit
    for bit as the uninterrupted solve."""
    p = np_problem(3)
    full = cf.solve(p, tol=1e-10, inner="newton")
    assert full.status == "optimal" and full.outer_iterations > 3
    assert full.kkt.meets(1e-10, 1e-10)
    part = cf.solve(p, tol=1e-10, inner="newton", max_outer=2)
    assert part.status == "max_iterations"
    again = cf.solve(p, resume=part, max_outer=200)
    assert again.status == "optimal" and again.kkt.meets(1e-10, 1e-10)
    assert np.array_equal(again.w, full.w) and again.rounds == full.rounds


def test_resume_with_a_new_tolerance_uses_it():
    p = np_problem(3)
    part = cf.solve(p, tol=1e-10, inner="newton", max_outer=2)
    looser = cf.solve(p, resume=part, max_outer=200, tol=1e-4)
    assert looser.status == "optimal" and looser.kkt.meets(1e-4, 1e-4)
    assert looser.settings["tol"] == [1e-4, 1e-4]


def test_a_linear_algebra_failure_in_the_server_ends_numerical_error(monkeypatch):
    """Any LinAlgError of the server's arithmetic is a status with the last iterate,
    not an exception out of cf.solve."""
    from constrfl.solvers import newton
    problem = cf.Problem([cf.Client(objective=fn.Quadratic(np.eye(3), np.ones(3)))],
                         regularizer=prox.Box(-0.5, 0.5))

    def failing(*args):
        raise np.linalg.LinAlgError("Matrix is not positive definite")
    monkeypatch.setattr(newton, "prox_newton_point", failing)
    res = cf.solve(problem)
    assert res.status == "numerical_error" and "linear algebra" in res.message
    assert isinstance(res.error, np.linalg.LinAlgError)
    np.testing.assert_array_equal(res.w, problem.start_point())    # the last iterate: w⁰
