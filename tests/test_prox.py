"""Regularizers: prox against cvxpy, and the exact distance dist∞(0, g + ∂P(w)) against
a small cvxpy LP over the subdifferential written out in the test."""
import cvxpy as cp
import numpy as np
import pytest

from constrfl import prox

rng = np.random.default_rng(2)
d = 6
REGS = {
    "zero": prox.Zero(),
    "l1": prox.L1(0.3),
    "sql2": prox.SquaredL2(0.7),
    "enet": prox.ElasticNet(0.2, 0.5),
    "box": prox.Box(-0.4, np.r_[0.3, 0.3, 0.3, 0.3, np.inf, 0.5]),
    "nonneg": prox.NonNegative(),
    "l2ball": prox.L2Ball(0.8),
    "l1ball": prox.L1Ball(0.9),
}


@pytest.mark.parametrize("name", sorted(REGS))
def test_prox_matches_cvxpy(name):
    P = REGS[name]
    v, t = 2 * rng.standard_normal(d), 0.7
    x = cp.Variable(d)
    expr, cons = P.cvxpy(x)
    cp.Problem(cp.Minimize(t * expr + 0.5 * cp.sum_squares(x - v)), cons).solve(
        solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    assert np.allclose(P.prox(v, t), x.value, atol=1e-7)
    assert P.value(P.prox(v, t)) < np.inf


def subdifferential_lp(name, P, w, g):
    """min ‖g + z‖∞ over z ∈ ∂P(w), written from the definitions (not from prox.py)."""
    z, s = cp.Variable(d), cp.Variable(nonneg=True)
    if name == "zero":
        cons = [z == 0]
    elif name == "l1":
        cons = [z[j] == P.lam * np.sign(w[j]) if w[j] != 0 else cp.abs(z[j]) <= P.lam
                for j in range(d)]
    elif name == "box":
        lo, up = np.broadcast_to(P.lower, d), np.broadcast_to(P.upper, d)
        cons = [z[j] <= 0 if w[j] == lo[j] else z[j] >= 0 if w[j] == up[j] else z[j] == 0
                for j in range(d)]
    elif name == "l2ball":
        cons = [z == s * w]
    elif name == "l1ball":
        cons = [z[j] == s * np.sign(w[j]) if w[j] != 0 else cp.abs(z[j]) <= s for j in range(d)]
    prob = cp.Problem(cp.Minimize(cp.norm_inf(g + z)), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return prob.value


@pytest.mark.parametrize("name", ["zero", "l1", "box", "l2ball", "l1ball"])
@pytest.mark.parametrize("trial", range(4))
def test_dist_is_exact(name, trial):
    P = REGS[name]
    w = P.prox(3 * rng.standard_normal(d), 1.0)     # lands on kinks / bounds / the sphere
    g = rng.standard_normal(d)
    assert P.dist(w, g) == pytest.approx(subdifferential_lp(name, P, w, g), abs=1e-8)


def test_dist_smooth_and_interior():
    w, g = rng.standard_normal(d), rng.standard_normal(d)
    assert prox.SquaredL2(0.7).dist(w, g) == pytest.approx(np.max(np.abs(g + 0.7 * w)))
    assert prox.L2Ball(100.0).dist(w, g) == pytest.approx(np.max(np.abs(g)))
    assert prox.L2Ball(0.1).dist(w, g) == np.inf           # outside the ball
    assert prox.Box(-0.1, 0.1).dist(w, g) == np.inf


def test_stationary_point_has_zero_dist():
    """w = prox_{tP}(w − t g) ⇔ 0 ∈ g + ∂P(w): at a fixed point dist is ~0."""
    for name in ["l1", "enet", "box", "l1ball", "l2ball"]:
        P = REGS[name]
        v = 3 * rng.standard_normal(d)
        w = P.prox(v, 1.0)
        assert P.dist(w, w - v) <= 1e-12, name


def test_bad_parameters():
    with pytest.raises(ValueError, match="L1: lam"):
        prox.L1(-1.0)
    with pytest.raises(ValueError, match="L2Ball: radius"):
        prox.L2Ball(0.0)
    with pytest.raises(ValueError, match="lower <= upper"):
        prox.Box(1.0, 0.0)
    with pytest.raises(ValueError, match=r"Box: lower has shape \(2,\), expected \(3,\)"):
        prox.Box([0.0, 0.0], 1.0).check_dim(3)
