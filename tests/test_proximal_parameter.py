"""The proximal term's own parameter η (docs/algorithms.md §3): η = β until β reaches
β_max, then η alone grows where the outer steps do not contract
(constrfl.solvers.proxal.next_penalties).  Oracle: the closed-form solution of a
one-variable LP and the KKT residuals recomputed by cf.kkt."""
import numpy as np
import pytest

import constrfl as cf
from constrfl import functions as fn, prox, status as st
from constrfl.solvers.proxal import next_penalties, outer_stall

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
