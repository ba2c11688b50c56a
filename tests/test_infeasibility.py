"""Infeasibility is reported only with a proof (a certified positive lower bound on the
minimum of the violation V = Σ‖[c]₊‖² + ‖h‖² over dom P), never for a feasible problem,
whatever β — nor for one whose violation only tends to 0 at infinity."""
import re

import numpy as np
import pytest
from scipy.optimize import linprog, minimize

import constrfl as cf
from constrfl import functions as fn, prox
from constrfl.problems import neyman_pearson
from constrfl.problems.datasets import make_classification
from constrfl.problems.partition import stratified_split
from constrfl.solvers.diagnostics import (_probe_directions, cutting_plane_bound, running_off,
                                          stalled)

E1 = np.array([1.0, 0.0, 0.0])
BETAS = [1e-3, 1e-2, 0.1, 1.0, 100.0, 1000.0]
METHODS = {"newton": dict(inner="newton"), "cproxal": dict(method="cproxal"),
           "newton_fixed_beta": dict(inner="newton", fixed=True), "admm": dict(inner="admm")}


def np_synthetic(r):
    """Neyman-Pearson with an intercept: any bound r > 0 is attainable (a large
    intercept drives the class-1 loss to 0); r = 0.01 is nearly tight."""
    d = make_classification(n_samples=300, n_features=4, seed=1)
    return neyman_pearson(d.X, d.y, stratified_split(d.y, 3, seed=1), r)


def unattainable_rows():
    """Class-0 rows, and class-1 rows in pairs x, −x (no intercept)."""
    rng = np.random.default_rng(0)
    X1 = rng.standard_normal((20, 3))
    return rng.standard_normal((30, 3)), np.r_[X1, -X1]


def np_unattainable(r=0.5):
    """No intercept and symmetric class-1 rows (x and −x): L¹(w) ≥ log 2 > r for all w."""
    X0, X1 = unattainable_rows()
    return cf.Problem([cf.Client(objective=fn.LogisticLoss(X0, np.zeros(30)),
                                 constraints=[fn.LogisticLoss(X1, np.ones(40)) - r])])


def quadratics(c=(None, None), h=(None, None), P=None):
    """Two clients with strongly convex quadratics and the given constraints."""
    rng = np.random.default_rng(0)
    clients = []
    for ci, hi in zip(c, h):
        A = rng.standard_normal((6, 3))
        clients.append(cf.Client(objective=fn.Quadratic(A.T @ A / 6 + 0.1 * np.eye(3),
                                                        rng.standard_normal(3)),
                                 constraints=[ci] if ci is not None else [],
                                 equalities=[hi] if hi is not None else []))
    return cf.Problem(clients, regularizer=P)


FEASIBLE = {
    "np": lambda: np_synthetic(0.4),
    "np_nearly_tight": lambda: np_synthetic(0.01),
    "affine": lambda: quadratics(c=(fn.Affine(-E1, 1.0), None)),                 # w₁ ≥ 1
    "equality": lambda: quadratics(h=(fn.Affine(E1[None], [-5.0]), None)),       # w₁ = 5
    "box_bounded": lambda: quadratics(c=(fn.Affine(-E1, 0.5), None), P=prox.Box(-1.0, 1.0)),
}
def np_unattainable_in_a_box():
    """np_unattainable with w₁ ≥ 0.5 (w₂, w₃ free): V's minimum over the box is at
    w₁ = 0.5, where ∇V pushes against the bound."""
    return cf.Problem(np_unattainable().clients,
                      regularizer=prox.Box(lower=[0.5, -np.inf, -np.inf]))


INFEASIBLE = {
    "contradictory_equalities": lambda: quadratics(           # w₁ = 1 at one, w₁ = 2 at the other
        h=(fn.Affine(E1[None], [-1.0]), fn.Affine(E1[None], [-2.0]))),
    "unattainable_np_bound": np_unattainable,
    "unattainable_np_bound_in_a_box": np_unattainable_in_a_box,
    "ball_excludes_feasible_set": lambda: quadratics(c=(fn.Affine(-E1, 2.0), None),  # w₁ ≥ 2
                                                     P=prox.L2Ball(1.0)),
    "boxed_l1_excludes_feasible_set": lambda: quadratics(c=(fn.Affine(-E1, 1.0), None),
                                                         P=prox.L1(0.01) + prox.Box(upper=0.0)),
    "box_excludes_feasible_set": lambda: quadratics(c=(fn.Affine(-E1, 1.0), None),
                                                    P=prox.Box(upper=0.0)),
    "contradictory_inequalities": lambda: quadratics(          # w₁ ≤ −1 and w₁ ≥ 1
        c=(fn.Affine(E1, 1.0), fn.Affine(-E1, 1.0))),
}


def sweep(method):
    """(β, options) pairs: every β, the ADMM only a slower pair; ``fixed`` keeps β."""
    opts = dict(METHODS[method])
    fixed = opts.pop("fixed", False)
    return [(b, dict(opts, beta_max=b) if fixed else opts)
            for b in (BETAS if method != "admm" else [1e-3, 1.0])]


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("case", sorted(FEASIBLE))
def test_feasible_problems_are_never_called_infeasible(case, method):
    p = FEASIBLE[case]()
    for beta, opts in sweep(method):
        res = cf.solve(p, beta=beta, **opts)
        assert res.status == "optimal", (beta, res.status, res.message)


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("case", sorted(INFEASIBLE))
def test_infeasible_problems_are_certified(case, method):
    p = INFEASIBLE[case]()
    for beta, opts in sweep(method):
        res = cf.solve(p, beta=beta, **opts)
        assert res.status == "infeasible", (beta, res.status, res.message)
        assert res.outer_iterations <= 60
        assert "min ‖[c]₊‖² + ‖h‖² over dom P = " in res.message
        assert "(a lower bound by " in res.message
        assert res.kkt.feasibility > 0.1


@pytest.mark.parametrize("case", sorted(INFEASIBLE))
def test_a_scaled_solve_checks_over_the_scaled_dom_p(case):
    """With scaling=True the solvers' P is the scaled Piecewise; the check minimizes V
    over its box as over the user's (it took dom P = Rⁿ there, and a box that excludes
    the feasible set ran to max_iterations)."""
    res = cf.solve(INFEASIBLE[case](), scaling=True)
    assert res.state["solver"].scale_columns is not None        # it was scaled
    assert res.status == "infeasible", res.message
    assert res.outer_iterations <= 60


def test_small_beta_is_raised_not_reported():
    """A feasible problem whose violation stalls at a tiny β: the check finds a
    feasible point, raises β tenfold and says so in the history."""
    res = cf.solve(FEASIBLE["affine"](), beta=1e-3, beta_max=1e-3, inner="newton")
    notes = [h["infeasibility_check"] for h in res.history if "infeasibility_check" in h]
    assert res.status == "optimal" and notes and "β raised to 0.01" in notes[0]
    assert res.history[-1]["beta"] > 1e-3


def test_unbounded_objective():
    """min −w₁ subject to w₂ ≤ 1: the objective falls without bound along feasible
    iterates."""
    e = np.eye(3)
    p = cf.Problem([cf.Client(objective=fn.Affine(-e[0]), constraints=[fn.Affine(e[1], -1.0)]),
                    cf.Client(objective=fn.Quadratic(np.diag([0.0, 1.0, 1.0])))])
    for method in ("admm", "newton", "cproxal"):
        res = cf.solve(p, **METHODS[method])
        assert res.status == "unbounded", res.message
        assert res.outer_iterations <= 25 and "unbounded below" in res.message


def _ray(curvature):
    """min −w₁ + (curvature/2)w₁² subject to w₂ ≤ 1: no minimizer for curvature 0, else
    one at w₁ = 1/curvature."""
    e = np.eye(3)
    return cf.Problem([cf.Client(objective=fn.Affine(-e[0]), constraints=[fn.Affine(e[1], -1.0)]),
                       cf.Client(objective=fn.Quadratic(np.diag([curvature, 1.0, 1.0])))])


@pytest.mark.parametrize("curvature, claim", [(0.0, True), (1e-7, False)])
def test_the_unbounded_claim_needs_a_feasible_ray_along_which_f_falls_linearly(curvature,
                                                                               claim):
    """The trajectory alone cannot tell a far-away minimizer (w₁ = 10⁷) from none: the
    probe along the last step (two counted rounds) can."""
    from constrfl.federation import InProcessFederation
    from constrfl.solvers.diagnostics import ray_probe
    problem = _ray(curvature)
    fed = InProcessFederation(problem)
    w_prev, w = np.array([1e3, 0.0, 0.0]), np.array([2e3, 0.0, 0.0])
    objective = -w[0] + curvature / 2 * w[0] ** 2
    rounds = fed.traffic.rounds
    evidence = ray_probe(problem, fed, w_prev, w, objective, 1e-6)
    assert bool(evidence) == claim and fed.traffic.rounds == rounds + 2
    if claim:
        assert "falls linearly" in evidence


def test_no_minimizer_is_said_plainly():
    """Logistic loss on separable data has no minimizer: the iterates run off.  With
    η = β (``eta_max=beta_max``) they run off slowly, never reach an ε-stationary point,
    and the solve ends at max_outer saying why, without claiming unboundedness.  With
    the default η they run off fast enough to reach a point where ‖∇f‖∞ ≤ ε₁ — an
    (ε₁, ε₂)-KKT point of Definition 1, checked here by the gradient written out."""
    rng = np.random.default_rng(0)
    X = np.c_[rng.standard_normal((40, 2)), np.ones(40)]
    y = (X[:, 0] > 0).astype(float)
    p = cf.Problem([cf.Client(objective=fn.LogisticLoss(X, y))])
    res = cf.solve(p, inner="newton", max_outer=200, eta_max=1e4)
    assert res.status == "max_iterations"
    assert "may have no minimizer" in res.message and "SquaredL2" in res.message
    res = cf.solve(p, inner="newton", max_outer=200)
    assert res.status == "optimal"
    s = 2 * y - 1                                           # labels ±1
    grad = X.T @ (-s / (1 + np.exp(s * (X @ res.w)))) / len(y)
    assert np.max(np.abs(grad)) <= 1e-6


# -- no claim without a proof ----------------------------------------------------------

def separable_np(r=1e-6):
    """Issue 19: NP on separable data (the label is the sign of the first feature):
    w = 1000·e₀ makes every class-1 loss ~1e-17 ≤ r, so the problem is feasible; its
    violation V falls to 0 only as w runs off, so at any finite point ∇V is tiny while
    V > 0."""
    rng = np.random.default_rng(0)
    X = np.c_[rng.standard_normal((300, 4)), np.ones(300)]
    y = (X[:, 0] > 0) * 1.0
    ids = np.repeat([0, 1, 2], 100)
    return neyman_pearson(X, y, ids, r), X, y, ids


def class1_losses(X, y, ids, w):
    """The clients' mean class-1 logistic losses log(1 + e^{−xᵀw}), written out."""
    return np.array([np.mean(np.logaddexp(0.0, -X[(ids == i) & (y == 1)] @ w))
                     for i in range(3)])


def test_separable_data_is_not_called_infeasible():
    """The check finds a stationary best point with V ≈ 3e-10, which the old rule
    (V > m(10ε₂)²) called infeasible; no check proves it (no bound from the cutting
    planes; or a best point within 10ε₂ of feasibility), so the solve goes on, reaches
    feasible iterates and, the iterates running off towards the infimum with a growing
    η, an ε-KKT point, whose residuals cf.kkt recomputes.  (With η = β it ended
    max_iterations.)"""
    problem, X, y, ids = separable_np()
    assert np.all(class1_losses(X, y, ids, 1000.0 * np.eye(5)[0]) <= 1e-6)   # feasible
    res = cf.solve(problem, max_outer=100, max_time=30)
    assert res.status == "optimal", res.message
    assert cf.kkt(problem, res.w, res.multipliers).meets(1e-6, 1e-6)
    checks = [h["infeasibility_check"] for h in res.history if "infeasibility_check" in h]
    assert checks and all("not proven infeasible" in c or "may exist" in c for c in checks)
    assert np.all(class1_losses(X, y, ids, res.w) - 1e-6 <= 1e-6)          # ε₂-feasible
    assert res.kkt.feasibility <= 1e-6


def test_an_unproven_check_is_repeated_in_the_final_message():
    """A solve that ends max_iterations still infeasible says what the last check found;
    one whose last iterate is feasible does not."""
    note = "min ‖[c]₊‖² + ‖h‖² over dom P ≤ 1e-01 (…): not proven infeasible; β stays 1"
    history = [dict(k=k, w_norm=1.0, feasibility=0.3) for k in range(12)]
    history[6]["infeasibility_check"] = note
    assert running_off(history) == f"; the last infeasibility check (outer iteration 6): {note}"
    history[-1]["feasibility"] = 0.0
    assert running_off(history) == ""


def test_checks_that_leave_beta_thin_out():
    """A stalled violation is checked every 5 outer iterations while β changes, but
    after j checks in a row at the current β only 5·2ʲ iterations after the last."""
    def history(n, checks, beta_after=None):
        h = [dict(k=k, feasibility=0.3, beta=1.0) for k in range(n)]
        for k in checks:
            h[k]["infeasibility_check"] = "…"
        for r in h[beta_after or n:]:
            r["beta"] = 10.0
        return h
    assert stalled(history(10, [4], beta_after=5), 4, 1e-6)      # β raised: 5 later
    assert not stalled(history(13, [4]), 4, 1e-6)                # one at this β: 10
    assert stalled(history(14, [4]), 4, 1e-6)
    assert not stalled(history(28, [4, 9]), 9, 1e-6)             # two at this β: 20
    assert stalled(history(29, [4, 9]), 9, 1e-6)
    assert stalled(history(14, [4, 9], beta_after=10), 9, 1e-6)  # β raised since: 5


# -- the cutting-plane bound against independent oracles ---------------------------------

def planes_minimum(values, grads, points, center):
    """min over y of maxₖ Fₖ + gₖᵀ(center + y − xₖ), by linear programming (HiGHS)."""
    K, n = grads.shape
    a = values + np.einsum("kj,kj->k", grads, center - points)
    res = linprog(np.r_[np.zeros(n), 1.0], A_ub=np.c_[grads, -np.ones(K)], b_ub=-a,
                  bounds=[(None, None)] * (n + 1), method="highs")
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_cutting_plane_bound_is_below_the_planes_minimum(n):
    """For planes whose gradients hold 0 inside their hull (weights μ), the bound is
    finite with n + 1 planes, and never above the minimum of their maximum (the LP
    optimum), which is below the infimum of any convex function they touch."""
    rng = np.random.default_rng(n)
    for K in (n + 1, 2 * n + 3):
        for _ in range(20):
            h = rng.standard_normal((K, n)) * rng.uniform(0.1, 10, n)
            mu = rng.dirichlet(np.ones(K))
            grads = h - mu @ h                                   # Σμₖgₖ = 0
            values, points = rng.uniform(0, 5, K), rng.standard_normal((K, n))
            center = rng.standard_normal(n)
            bound = cutting_plane_bound(values, grads, points, center)
            lp = planes_minimum(values, grads, points, center)
            assert bound <= lp + 1e-12 * (1 + abs(lp))
            if K == n + 1:
                assert np.isfinite(bound)


@pytest.mark.parametrize("n", [1, 3, 6])
def test_cutting_plane_bound_of_a_quadratic_at_simplex_probes(n):
    """F = F* + ½(w − c)ᵀM(w − c) probed at c + δM⁻¹vₖ (gradients δvₖ, a regular
    simplex): the bound is Σₖ(Fₖ − δ²qₖ)/(n + 1) = F* − δ²·mean(qₖ)/2, below F*."""
    rng = np.random.default_rng(n)
    B = rng.standard_normal((n, n))
    M, c, F_star, delta = B @ B.T + 0.1 * np.eye(n), rng.standard_normal(n), 0.7, 0.3
    D, q = _probe_directions(M)
    points = c + delta * D.T
    values = F_star + 0.5 * np.einsum("kj,jl,kl->k", points - c, M, points - c)
    grads = (points - c) @ M
    bound = cutting_plane_bound(values, grads, points, c)
    np.testing.assert_allclose(q, np.einsum("kj,jl,kl->k", grads / delta,
                                            np.linalg.inv(M), grads / delta))
    assert bound == pytest.approx(F_star - 0.5 * delta ** 2 * q.mean(), rel=1e-12)
    assert bound < F_star


def test_cutting_plane_bound_needs_gradients_around_zero():
    """F = e^{−w₁} + e^{−w₂} (inf 0, not attained): gradients all in one orthant prove
    nothing, however small; nor do too few planes."""
    points = np.array([[20.0, 21.0], [22.0, 20.5], [21.0, 23.0]])
    values = np.exp(-points).sum(axis=1)
    grads = -np.exp(-points)
    assert cutting_plane_bound(values, grads, points, points[0]) == -np.inf
    g2 = np.array([[1.0, 0.0], [-1.0, 0.0]])
    assert cutting_plane_bound(np.ones(2), g2, np.zeros((2, 2)), np.zeros(2)) == -np.inf


def test_the_certified_bounds_are_below_the_minimum_violation():
    """The bound in the message is at most V* computed independently (L-BFGS-B on V over
    the box, from several starts) and within 25% of it."""
    X1 = unattainable_rows()[1]

    def V(w):                               # [L¹(w) − 0.5]₊², the loss written out
        return max(np.mean(np.logaddexp(0.0, -X1 @ w)) - 0.5, 0.0) ** 2

    for make, box in ((np_unattainable, None),
                      (np_unattainable_in_a_box, [(0.5, None), (None, None), (None, None)])):
        res = cf.solve(make())
        bound = float(re.search(r"over dom P = ([0-9.e+-]+)", res.message).group(1))
        starts = np.random.default_rng(0).standard_normal((5, 3)) + [1.0, 0, 0]
        v_star = min(minimize(V, x0, bounds=box, method="L-BFGS-B",
                              options=dict(ftol=1e-15, gtol=1e-12)).fun for x0 in starts)
        assert 0.75 * v_star <= bound <= v_star, (bound, v_star)
