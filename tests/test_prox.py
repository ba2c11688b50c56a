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
    "sql2-weighted": prox.SquaredL2(np.r_[0.0, 0.1, 0.7, 2.0, 5.0, 1e3]),
    "enet": prox.ElasticNet(0.2, 0.5),
    "box": prox.Box(-0.4, np.r_[0.3, 0.3, 0.3, 0.3, np.inf, 0.5]),
    "nonneg": prox.NonNegative(),
    "l2ball": prox.L2Ball(0.8),
    "l1ball": prox.L1Ball(0.9),
    "l1+nonneg": prox.L1(0.3) + prox.NonNegative(),
    "l1+box": prox.Box(-0.4, np.r_[0.3, 0.3, 0.3, 0.3, np.inf, 0.5]) + prox.L1(0.3),
    "enet+box": prox.ElasticNet(0.2, 0.5) + prox.Box(np.r_[-1, -1, 0.1, -1, -1, -1], 0.4),
    "sql2+box": prox.SquaredL2(0.7) + prox.Box(-0.3, 0.3),
}
BOXED = ["l1+nonneg", "l1+box", "enet+box", "sql2+box"]


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


def subdifferential_constraints(P, w, z):
    """``z ∈ ∂P(w)`` for the separable pieces, from the definitions."""
    if isinstance(P, prox.Box):
        lo, up = np.broadcast_to(P.lower, d), np.broadcast_to(P.upper, d)
        return [z[j] <= 0 if w[j] == lo[j] else z[j] >= 0 if w[j] == up[j] else z[j] == 0
                for j in range(d)]
    l1 = {prox.L1: lambda: P.lam, prox.ElasticNet: lambda: P.l1}.get(type(P), lambda: 0.0)()
    l2 = {prox.SquaredL2: lambda: P.lam, prox.ElasticNet: lambda: P.l2}.get(type(P),
                                                                            lambda: 0.0)()
    return [z[j] == l2 * w[j] + l1 * np.sign(w[j]) if w[j] != 0
            else cp.abs(z[j]) <= l1 for j in range(d)]


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
    elif name in BOXED:          # ∂(p + ι_B) = ∂p + N_B: a subgradient of each, summed
        zp, zb = cp.Variable(d), cp.Variable(d)
        cons = [z == zp + zb] + subdifferential_constraints(P.inner, w, zp) \
            + subdifferential_constraints(P.box, w, zb)
    else:
        cons = subdifferential_constraints(P, w, z)
    prob = cp.Problem(cp.Minimize(cp.norm_inf(g + z)), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return prob.value


@pytest.mark.parametrize("name", ["zero", "l1", "box", "l2ball", "l1ball"] + BOXED)
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
    for name in ["l1", "enet", "box", "l1ball", "l2ball"] + BOXED:
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
    with pytest.raises(ValueError, match=r"SquaredL2: lam has shape \(2,\), expected \(3,\)"):
        prox.SquaredL2([1.0, 2.0]).check_dim(3)
    with pytest.raises(ValueError, match="SquaredL2: lam must be a finite non-negative"):
        prox.SquaredL2([1.0, -2.0])


def test_weighted_ridge_value_and_dist():
    lam = REGS["sql2-weighted"].lam
    w, g = rng.standard_normal(d), rng.standard_normal(d)
    assert REGS["sql2-weighted"].value(w) == pytest.approx(0.5 * np.sum(lam * w ** 2), rel=1e-14)
    assert REGS["sql2-weighted"].dist(w, g) == pytest.approx(np.max(np.abs(g + lam * w)),
                                                             rel=1e-14)


# -- sums with a box ----------------------------------------------------------------------

@pytest.mark.parametrize("t", [0.0, 0.4, np.r_[0.1, 0.2, 0.3, 0.4, 0.5, 2.0]])
def test_l1_plus_nonnegative_prox_is_the_one_sided_threshold(t):
    """Closed form, derived by hand: min t·lam·x + ½(x − v)² over x ≥ 0 is max(v − t·lam, 0)."""
    P = REGS["l1+nonneg"]
    v = 2 * rng.standard_normal(d)
    np.testing.assert_array_equal(P.prox(v, t), np.maximum(v - t * 0.3, 0.0))


def one_sided_dist(P, w, g, h=1e-7):
    """Brute force from values only: in 1-D, dist(0, g_j + ∂p_j(w_j)) =
    max(0, −D⁺, −D⁻) with D^± the one-sided slopes of x ↦ g_j·x + P(w + (x − w_j)e_j)
    at w_j in the directions ±1 (inf where a step leaves dom P), by differences."""
    F0 = P.value(w)
    out = []
    for j in range(d):
        e = np.eye(d)[j] * h
        slopes = [(g[j] * h + P.value(w + e) - F0) / h, (-g[j] * h + P.value(w - e) - F0) / h]
        out.append(max(0.0, -slopes[0], -slopes[1]))
    return max(out)


@pytest.mark.parametrize("name", BOXED + ["l1", "enet", "box"])
@pytest.mark.parametrize("trial", range(3))
def test_dist_matches_one_sided_slopes(name, trial):
    P = REGS[name]
    w = P.prox(3 * rng.standard_normal(d), 1.0)    # on kinks and bounds
    g = rng.standard_normal(d)
    assert P.dist(w, g) == pytest.approx(one_sided_dist(P, w, g), abs=1e-6)


@pytest.mark.parametrize("a, b", [
    (prox.L1(0.1), prox.L2Ball(1.0)), (prox.L1(0.1), prox.L1(0.2)),
    (prox.Box(0, 1), prox.NonNegative()), (prox.L1Ball(1.0), prox.NonNegative()),
    (prox.Nuclear(0.1, (2, 3)), prox.Box(0, 1)), (prox.Zero(), prox.Box(0, 1)),
    (prox.L1(0.1) + prox.NonNegative(), prox.Box(0, 1)), (prox.L1(0.1), 3.0),
])
def test_other_sums_raise_type_error_naming_the_pair(a, b):
    with pytest.raises(TypeError, match="cannot add") as err:
        a + b
    assert repr(a) in str(err.value) and repr(b) in str(err.value)
    with pytest.raises(TypeError, match="cannot add"):
        b + a


def test_boxed_is_separable_and_checks_the_box_dimension():
    P = prox.ElasticNet(0.1, 0.2) + prox.Box([0.0, 0.0], 1.0)
    assert P.separable and P.exact_dist and repr(P).startswith("ElasticNet(")
    with pytest.raises(ValueError, match=r"Box: lower has shape \(2,\), expected \(3,\)"):
        P.check_dim(3)


def test_federated_solve_with_l1_plus_nonnegative_certifies():
    """L1 + NonNegative on Neyman-Pearson over five clients: the sign constraint binds
    (some coordinates sit at 0 where the plain L1 solution is negative)."""
    import constrfl as cf
    from builders import np_problem
    P = prox.L1(0.02) + prox.NonNegative()
    prob = np_problem(5, 0.5, regularizer=P)
    res = cf.solve(prob, method="fedproxal", tol=1e-6)
    assert res.status == "optimal", res.message
    cert = cf.certify(prob, res)
    assert cert.reference_status == "optimal"
    assert cert.objective_gap <= 1e-6 and cert.kkt.stationarity <= 1e-6, str(cert)
    assert cert.w_distance <= 1e-4
    assert np.all(res.w >= 0) and np.sum(res.w == 0) >= 1
    plain = cf.certify(np_problem(5, 0.5, regularizer=prox.L1(0.02)), np.zeros(prob.dim))
    assert plain.reference_w.min() < -1e-3             # without the box: negative entries
