"""A solve that can no longer make progress stops with an honest status: the inner
Newton method's stall test and the outer loop's (constrfl.solvers.proxal.outer_stall).
Oracle: the KKT residuals recomputed from the data by cf.kkt at the returned point."""
import numpy as np
import constrfl as cf
from constrfl import functions as fn, status as st
from constrfl.solvers.proxal import STALL_WINDOW, outer_stall

EPS = (1e-6, 1e-6)


def _record(stationarity, step=1.0, multiplier_step=1.0, w_norm=1.0):
    return dict(stationarity=stationarity, feasibility=0.0, complementarity=0.0,
                definition1=0.0, step=step, multiplier_step=multiplier_step, w_norm=w_norm,
                inner_converged=True)


def test_an_iteration_that_changes_nothing_is_a_stall():
    within = [_record(1e-3), _record(5e-4, step=0.0, multiplier_step=0.0)]
    assert outer_stall(within, EPS)[0] == st.OPTIMAL_INACCURATE
    beyond = [_record(1.0), _record(1.0, step=0.0, multiplier_step=0.0)]
    assert outer_stall(beyond, EPS)[0] == st.NUMERICAL_ERROR


def test_progress_is_no_stall():
    assert outer_stall([_record(1e-2)] * 30, EPS) is None      # w or multipliers moved


def _ill_conditioned(top, seed=0, d=20):
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    A = (Q * np.geomspace(1e-3, top, d)) @ Q.T
    return cf.Problem([cf.Client(objective=fn.Quadratic(A, rng.standard_normal(d)), name="a")])


def test_a_tolerance_below_the_rounding_level_ends_optimal_inaccurate():
    # ‖A‖ = 1e10, ‖w*‖∞ ≈ 71: ∇f at w* rounded to doubles is ~1e-5 (w* refined in long
    # double), so tol = 1e-6 is out of reach (at ‖A‖ = 1e8 it is 3e-7: reachable, and
    # reached); before the stall tests this ran all 200 outer iterations, max_iterations
    problem = _ill_conditioned(1e10)
    res = cf.solve(problem, tol=1e-6)
    assert res.status == st.OPTIMAL_INACCURATE
    assert res.outer_iterations < 200
    kkt = cf.kkt(problem, res.w, res.multipliers)
    assert 1e-6 < kkt.stationarity <= st.INACCURATE_FACTOR * 1e-6


def test_far_beyond_the_rounding_level_it_is_a_numerical_error():
    problem = _ill_conditioned(1e12)
    res = cf.solve(problem, tol=1e-6)
    assert res.status == st.NUMERICAL_ERROR
    assert "changed neither w nor the multipliers" in res.message
    assert cf.kkt(problem, res.w, res.multipliers).stationarity > st.INACCURATE_FACTOR * 1e-6


def test_subproblems_that_stall_without_progress_end_the_solve():
    progress = [dict(_record(10.0 ** -j), inner_converged=True) for j in range(2, 5)]
    stuck = [dict(_record(8e-5), inner_converged=False) for _ in range(STALL_WINDOW)]
    assert outer_stall(progress + stuck[:-1], EPS) is None          # not a window yet
    status, message = outer_stall(progress + stuck, EPS)
    assert status == st.OPTIMAL_INACCURATE and "ended unsolved" in message
    halving = stuck[:-1] + [dict(_record(4e-5), inner_converged=False)]
    assert outer_stall(progress + halving, EPS) is None             # the best halved
    solved_one = stuck[:-1] + [dict(_record(8e-5), inner_converged=True)]
    assert outer_stall(progress + solved_one, EPS) is None
