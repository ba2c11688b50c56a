"""Infeasibility is reported only with a certificate (the violation-minimization problem
has a certified positive minimum), never for a feasible problem, whatever β."""
import numpy as np
import pytest

import constrfl as cf
from constrfl import functions as fn, prox
from constrfl.problems import neyman_pearson
from constrfl.problems.datasets import make_classification
from constrfl.problems.partition import stratified_split

E1 = np.array([1.0, 0.0, 0.0])
BETAS = [1e-3, 1e-2, 0.1, 1.0, 100.0, 1000.0]
METHODS = {"newton": dict(inner="newton"), "cproxal": dict(method="cproxal"),
           "newton_fixed_beta": dict(inner="newton", fixed=True), "admm": dict(inner="admm")}


def np_synthetic(r):
    """Neyman-Pearson with an intercept: any bound r > 0 is attainable (a large
    intercept drives the class-1 loss to 0); r = 0.01 is nearly tight."""
    d = make_classification(n_samples=300, n_features=4, seed=1)
    return neyman_pearson(d.X, d.y, stratified_split(d.y, 3, seed=1), r)


def np_unattainable(r=0.5):
    """No intercept and symmetric class-1 rows (x and −x): L¹(w) ≥ log 2 > r for all w."""
    rng = np.random.default_rng(0)
    X1 = rng.standard_normal((20, 3))
    X1 = np.r_[X1, -X1]
    X0 = rng.standard_normal((30, 3))
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
INFEASIBLE = {
    "contradictory_equalities": lambda: quadratics(           # w₁ = 1 at one, w₁ = 2 at the other
        h=(fn.Affine(E1[None], [-1.0]), fn.Affine(E1[None], [-2.0]))),
    "unattainable_np_bound": np_unattainable,
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
        assert res.kkt.feasibility > 0.1


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


def test_no_minimizer_is_said_plainly():
    """Logistic loss on separable data has no minimizer: the iterates run off; the
    solve ends at max_outer and says why, and does not claim unboundedness."""
    rng = np.random.default_rng(0)
    X = np.c_[rng.standard_normal((40, 2)), np.ones(40)]
    y = (X[:, 0] > 0).astype(float)
    p = cf.Problem([cf.Client(objective=fn.LogisticLoss(X, y))])
    res = cf.solve(p, inner="newton", max_outer=200)
    assert res.status == "max_iterations"
    assert "may have no minimizer" in res.message and "SquaredL2" in res.message
