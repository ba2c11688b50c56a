"""cf.kkt without multipliers: it estimates them (min of the stationarity residual).

Oracles: cvxpy/Clarabel's solution and duals of the pooled problem (a KKT point and its
multipliers), and an independent cvxpy model of the estimate itself:
min over (μ ≥ 0, ν, z ∈ ∂P(w)) of ‖∇f + ∇cᵀμ + ∇hᵀν + z‖∞, written from the definitions."""
import functools

import cvxpy as cp
import numpy as np
import pytest

import constrfl as cf
from constrfl import functions as fn
from constrfl import prox
from constrfl.residuals import EstimatedKKT, estimate_multipliers
from builders import lcqp_problem, np_problem

CASES = {
    "np_local_and_global": lambda: np_problem(5, 0.4, server_separation=0.7),
    "np_l1": lambda: np_problem(5, 0.5, regularizer=prox.L1(0.02)),
    "np_l1_two": lambda: np_problem(2, 0.4, regularizer=prox.L1(0.02)),
    "np_l1_nonneg": lambda: np_problem(3, 0.5, regularizer=prox.L1(0.02) + prox.NonNegative()),
    "lcqp": lcqp_problem,
}


@functools.lru_cache(maxsize=None)
def case(name):
    prob = CASES[name]()
    cert = cf.certify(prob, np.zeros(prob.dim))
    assert cert.reference_status == "optimal"
    return prob, cert.reference_w, cert.reference_multipliers


def stacked(mults, prob):
    return np.concatenate([np.r_[mults[p.name].ineq, mults[p.name].eq] for p in prob.parties])


@pytest.mark.parametrize("name", sorted(CASES))
def test_optimal_point_is_stationary_without_multipliers(name):
    prob, w, duals = case(name)
    k = cf.kkt(prob, w, atol=1e-6)            # the interior-point w sits near kinks
    assert isinstance(k, EstimatedKKT) and k.multipliers_estimated and k.estimate == "lp"
    assert k.stationarity <= 1e-6 and k.complementarity <= 1e-6 and k.feasibility <= 1e-6
    # the estimate recovers cvxpy's duals (unique here: LICQ holds at these optima)
    est, ref = stacked(k.multipliers, prob), stacked(duals, prob)
    assert np.max(np.abs(est - ref)) <= 1e-6 * max(1.0, np.max(np.abs(ref)))   # 6e-8 seen
    assert np.max(np.abs(ref)) > 1e-2                        # constraints that matter
    # the residuals are those of cf.kkt at the estimated multipliers
    assert cf.kkt(prob, w, k.multipliers, atol=1e-6) == k


def test_zero_multipliers_were_the_old_answer_and_are_wrong():
    prob, w, _ = case("np_local_and_global")
    zeros = {p.name: (np.zeros(p.n_ineq), np.zeros(p.n_eq)) for p in prob.parties}
    assert cf.kkt(prob, w, zeros).stationarity > 0.1
    assert cf.kkt(prob, w).stationarity <= 1e-6


def brute_force_minimum(prob, w):
    """min ‖g₀ + Aλ + z‖∞ over μ ≥ 0, ν free, z ∈ ∂(λ_1‖·‖₁)(w), in cvxpy."""
    g0 = sum(p.f_value_grad(w)[1] for p in prob.parties)
    terms, cons = g0, []
    for p in prob.parties:
        if p.n_ineq:
            mu = cp.Variable(p.n_ineq, nonneg=True)
            terms = terms + p.c_value_jac(w)[1].T @ mu
        if p.n_eq:
            terms = terms + p.h_jac(w).T @ cp.Variable(p.n_eq)
    lam = prob.regularizer.lam
    z = cp.Variable(prob.dim)
    cons = [z[j] == lam * np.sign(w[j]) if w[j] != 0 else cp.abs(z[j]) <= lam
            for j in range(prob.dim)]
    value = cp.Problem(cp.Minimize(cp.norm_inf(terms + z)), cons).solve(
        solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return value


@pytest.mark.parametrize("seed", range(3))
def test_estimate_is_the_minimum_at_a_non_optimal_point(seed):
    prob, w_opt, _ = case("np_l1_two")     # 2 constraints in d = 6: not always stationary
    rng = np.random.default_rng(seed)
    w = prox.L1(0.02).prox(w_opt + 0.05 * rng.standard_normal(prob.dim), 1.0)  # kinks kept
    w[rng.integers(prob.dim)] = 0.0
    k = cf.kkt(prob, w)
    assert k.estimate == "lp"
    ref = brute_force_minimum(prob, w)
    assert ref > 1e-3                                         # not a KKT point
    assert k.stationarity == pytest.approx(ref, abs=1e-8)


def test_ties_go_to_the_inactive_constraint_at_zero():
    """A client states the same bound twice, once loosened by 1: the gradients are
    equal, so stationarity alone cannot tell which multiplier to use; the inactive
    copy gets 0 (else complementarity would read ≈ min(μ, 1))."""
    base = np_problem(2, 0.4)
    c1 = base.clients[1]                      # its bound binds (client-0's does not)
    twin = cf.Client(objective=c1.objective, constraints=[c1.constraints[0] - 1.0,
                                                          c1.constraints[0]], name="twin")
    prob = cf.Problem([base.clients[0], twin])
    ref = cf.certify(prob, np.zeros(prob.dim))
    k = cf.kkt(prob, ref.reference_w)
    mu = k.multipliers["twin"].ineq
    assert mu[0] == 0.0 and mu[1] > 1e-2
    assert k.stationarity <= 1e-6 and k.complementarity <= 1e-6


def test_no_constraints_and_outside_the_domain():
    prob = cf.Problem([cf.Client(objective=fn.Quadratic(np.eye(3), -np.ones(3)))],
                      regularizer=prox.Box(-0.5, 0.5))
    k = cf.kkt(prob, np.full(3, 0.5))
    assert k.estimate == "none" and k.stationarity == 0.0
    assert cf.kkt(prob, np.full(3, 0.7)).stationarity == np.inf       # outside dom P
    c = cf.Client(objective=fn.Quadratic(np.eye(3)), constraints=[fn.Affine(np.ones(3), 1.0)])
    out = cf.Problem([c], regularizer=prox.Box(-0.5, 0.5))
    mults, how = estimate_multipliers(out, np.full(3, 0.7))
    assert how == "none" and np.all(mults["client-0"].ineq == 0)


def test_non_separable_regularizer_uses_the_least_squares_fallback():
    """L2Ball: the documented fallback fits λ to the smooth part only.  With the ball
    inactive at the optimum that is the exact answer."""
    prob = np_problem(3, 0.4, regularizer=prox.L2Ball(100.0))
    ref = cf.certify(prob, np.zeros(prob.dim))
    k = cf.kkt(prob, ref.reference_w)
    assert k.estimate == "least-squares"
    assert k.stationarity <= 1e-6
    duals = stacked(ref.reference_multipliers, prob)
    assert np.max(np.abs(stacked(k.multipliers, prob) - duals)) <= 1e-5


def test_definition1_row_by_row():
    """|cⱼ| on rows with μⱼ > atol, [cⱼ]₊ on the others, |hⱼ|: the largest, and the sum
    of squares; inf for a negative μ and NaN for a NaN value (never a silent zero)."""
    from constrfl.residuals import definition1, definition1_sq
    c, mu = np.array([-0.5, 0.2, -0.3]), np.array([1.0, 0.0, 1e-9])
    assert definition1(c, np.zeros(0), mu) == 0.5
    assert definition1(c, np.zeros(0), mu, atol=1e-8) == 0.5
    assert definition1(c[1:], np.zeros(0), mu[1:]) == 0.3
    assert definition1(c[1:], np.zeros(0), mu[1:], atol=1e-8) == 0.2
    assert definition1(c, np.array([0.1, -0.7]), mu) == 0.7
    assert definition1(np.zeros(0), np.zeros(0), np.zeros(0)) == 0.0
    assert definition1(c, np.zeros(0), np.array([1.0, -1e-3, 0.0])) == np.inf
    assert np.isnan(definition1(np.array([np.nan, 1.0]), np.zeros(0), np.zeros(2)))
    assert np.isnan(definition1(c, np.array([np.nan]), mu))
    c, mu = np.array([-0.5, 0.2, -0.3]), np.array([1.0, 0.0, 1e-9])
    assert definition1_sq(c, np.zeros(0), mu) == 0.5 ** 2 + 0.2 ** 2 + 0.3 ** 2
    assert definition1_sq(c, np.zeros(0), mu, atol=1e-8) == 0.5 ** 2 + 0.2 ** 2
    assert definition1_sq(c[1:], np.zeros(0), mu[1:]) == 0.2 ** 2 + 0.3 ** 2
    assert definition1_sq(c[1:], np.zeros(0), mu[1:], atol=1e-8) == 0.2 ** 2
    assert definition1_sq(c, np.array([0.1, -0.7]), mu) == \
        0.5 ** 2 + 0.2 ** 2 + 0.3 ** 2 + 0.1 ** 2 + 0.7 ** 2
    assert definition1_sq(np.zeros(0), np.zeros(0), np.zeros(0)) == 0.0
    assert definition1_sq(c, np.zeros(0), np.array([1.0, -1e-3, 0.0])) == np.inf
    assert np.isnan(definition1_sq(np.array([np.nan, 1.0]), np.zeros(0), np.zeros(2)))
    assert np.isnan(definition1_sq(c, np.array([np.nan]), mu))
