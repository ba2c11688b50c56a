"""The proximal term's own parameter η (docs/algorithms.md §3): η = β until β reaches
β_max, then η alone grows where the outer steps do not contract
(constrfl.solvers.proxal.next_penalties).  Oracle: the closed-form solution of a
one-variable LP and the KKT residuals recomputed by cf.kkt."""
import numpy as np
import pytest

import constrfl as cf
from constrfl import functions as fn, prox, status as st
from constrfl.solvers.proxal import first_eta, next_penalties, outer_stall

EPS = (1e-6, 1e-6)


def _far_lp():
    """min −10⁻³w s.t. w − 10⁴ ≤ 0 (a client's constraint), 0 ≤ w ≤ 2·10⁴: w* = 10⁴,
    μ* = 10⁻³.  With η = β ≤ 10⁴ each outer iteration moves w by at most η·10⁻³ = 10."""
    client = cf.Client(objective=fn.Quadratic(np.zeros((1, 1)), [-1e-3]),
                       constraints=[fn.Affine([[1.0]], [-1e4])], name="a")
    return cf.Problem([client], regularizer=prox.Box(0.0, 2e4))


@pytest.mark.parametrize("method", ["fedproxal", "cproxal"])
def test_an_lp_with_a_far_solution_is_solved(method):
    problem = _far_lp()
    res = cf.solve(problem, method=method, tol=1e-6)
    assert res.status == st.OPTIMAL
    assert res.w[0] == pytest.approx(1e4, abs=1e-6)
    assert res.multipliers["a"].ineq[0] == pytest.approx(1e-3, abs=1e-6)
    kkt = cf.kkt(problem, res.w, res.multipliers)
    assert kkt.meets(*EPS)
    assert max(r["eta"] for r in res.history) > max(r["beta"] for r in res.history)


def test_with_eta_tied_to_beta_the_same_lp_crawls():
    # the paper's Ψ_k (η = β, here eta_max = beta_max): steps of η·10⁻³ = 10
    res = cf.solve(_far_lp(), tol=1e-6, eta_max=1e4)
    assert res.status == st.MAX_ITERATIONS
    assert all(r["eta"] == r["beta"] for r in res.history)
    assert res.w[0] < 5e3


def _record(feasibility, stationarity, step):
    return dict(feasibility=feasibility, stationarity=stationarity, step=step)


def test_eta_follows_beta_below_its_cap():
    slow = [_record(0.0, 1.0, 1.0), _record(0.0, 1.0, 1.0)]
    assert next_penalties(slow, 100.0, 100.0, 1e4, 1e6, EPS) == (1e3, 1e3)
    infeasible = [_record(1.0, 0.0, 1.0), _record(1.0, 0.0, 0.1)]
    assert next_penalties(infeasible, 100.0, 100.0, 1e4, 1e6, EPS) == (1e3, 1e3)
    fine = [_record(1.0, 1.0, 1.0), _record(0.1, 1.0, 0.1)]
    assert next_penalties(fine, 100.0, 100.0, 1e4, 1e6, EPS) == (100.0, 100.0)


def test_at_the_cap_of_beta_a_slow_step_raises_eta_alone():
    slow = [_record(0.0, 1.0, 1.0), _record(0.0, 1.0, 1.0)]
    assert next_penalties(slow, 1e4, 1e4, 1e4, 1e6, EPS) == (1e4, 1e5)
    assert next_penalties(slow, 1e4, 1e6, 1e4, 1e6, EPS) == (1e4, 1e6)      # η_max
    infeasible_and_slow = [_record(1.0, 1.0, 1.0), _record(1.0, 1.0, 1.0)]
    assert next_penalties(infeasible_and_slow, 1e4, 1e4, 1e4, 1e6, EPS) == (1e4, 1e4)


def test_an_unchanged_iterate_is_no_stall_when_the_next_subproblem_differs():
    nothing = [dict(stationarity=5e-4, feasibility=0.0, complementarity=0.0,
                    definition1=0.0, step=0.0, multiplier_step=0.0)]
    assert outer_stall(nothing, EPS, repeats=False) is None
    assert outer_stall(nothing, EPS, repeats=True)[0] == st.OPTIMAL_INACCURATE


def _stalled(beta, definition1=0.0, converged=False):
    return dict(feasibility=definition1, stationarity=3e-6, step=1e-3, beta=beta,
                definition1=definition1, inner_converged=converged)


def test_subproblems_stalled_at_feasible_points_lower_beta():
    """Three subproblems in a row at this β ended unsolved at feasible, not yet stationary
    iterates: β ← β/10 (η stays), not below the first β; not when one of them was
    solved, infeasible, or at another β."""
    first = _record(1.0, 1.0, 1.0) | dict(beta=100.0, definition1=1.0, inner_converged=True)
    floor = [first] + [_stalled(1e4)] * 3
    assert next_penalties(floor, 1e4, 1e6, 1e4, 1e6, EPS) == (1e3, 1e6)
    assert next_penalties([first | dict(beta=1e4)] + [_stalled(1e4)] * 3,
                          1e4, 1e6, 1e4, 1e6, EPS)[0] == 1e4           # the first β
    for odd in (_stalled(1e4, converged=True), _stalled(1e4, definition1=1e-5),
                _stalled(1e3)):
        assert next_penalties([first, _stalled(1e4), odd, _stalled(1e4)],
                              1e4, 1e6, 1e4, 1e6, EPS)[0] == 1e4


def test_a_qp_far_from_the_origin_is_solved_to_tol():
    """Maros–Meszaros QGROW7 (‖w*‖∞ ≈ 1.1e6, one client), where the subproblems' rounding
    (β∇c∇cᵀ at the spacing of the floats at w) is near tol: it ended optimal_inaccurate
    at 0.2 before the step form of the box step, at 1e-5 with β raised to 1e5 by the
    penalty step; β is kept at 1e4 or lowered (the floor rule above).  Oracles: cf.kkt
    recomputes the residuals, and the objective matches Clarabel's on the pooled QP."""
    from conftest import dataset_dir
    from constrfl.problems import federated_qp
    from constrfl.problems.datasets import load_maros_meszaros
    import scipy.sparse as sp
    cp = pytest.importorskip("cvxpy")
    qp = load_maros_meszaros(dataset_dir("maros_meszaros") / "QGROW7.mat")
    problem = federated_qp(qp.P, qp.q, qp.A, qp.l, qp.u, qp.r, n_clients=1)
    res = cf.solve(problem, tol=1e-6, max_time=120)
    assert res.status == st.OPTIMAL, res.message
    assert cf.kkt(problem, res.w, res.multipliers).meets(*EPS)
    x = cp.Variable(qp.n)
    ref = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, sp.csr_matrix(qp.P), assume_PSD=True)
                                 + qp.q @ x), [qp.A @ x <= qp.u, qp.A @ x >= qp.l])
    ref.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert res.objective == pytest.approx(ref.value + qp.r, rel=1e-7)


def test_the_first_eta_is_100_over_the_least_ridge_weight():
    """η₀ = 100/σ (σ the least ridge weight, every coordinate ridged), between β and
    η_max; β where a coordinate has no ridge, where P is not piecewise quadratic, and
    where η may not leave β (eta_max ≤ beta_max)."""
    assert first_eta(prox.SquaredL2(1e-3), 4, 100.0, 1e4, 1e6) == pytest.approx(1e5)
    assert first_eta(prox.SquaredL2(np.array([1e-3, 1e-5, 1.0])), 3, 100.0, 1e4, 1e6) == 1e6
    assert first_eta(prox.SquaredL2(10.0), 4, 100.0, 1e4, 1e6) == 100.0       # 10 < β
    assert first_eta(prox.ElasticNet(0.1, 1e-2), 4, 100.0, 1e4, 1e6) == pytest.approx(1e4)
    assert first_eta(prox.SquaredL2(np.array([1e-3, 0.0])), 2, 100.0, 1e4, 1e6) == 100.0
    assert first_eta(prox.L1(0.1), 4, 100.0, 1e4, 1e6) == 100.0
    assert first_eta(prox.SquaredL2(1e-3), 4, 100.0, 1e4, 1e4) == 100.0       # η = β
