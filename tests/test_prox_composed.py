"""prox.Ridged (a regularizer plus a ridge) and prox.Leading (a regularizer of the first
k coordinates in scaled units, the rest free): prox against closed forms derived here and
against cvxpy, value and subgradients against each other (one-sided slopes), pieces,
dist at the prox's fixed points, and the checks."""
import cvxpy as cp
import numpy as np
import pytest

from constrfl import prox
from constrfl.settings import choose_inner

rng = np.random.default_rng(7)
d, k = 6, 5                                          # Leading: 5 coordinates and one free
SIGMA = np.array([0.01, 0.5, 1.0, 3.0, 40.0])
INNERS = {
    "zero": prox.Zero(),
    "l1": prox.L1(0.3),
    "sql2": prox.SquaredL2(0.2),
    "enet": prox.ElasticNet(0.1, 0.4),
    "box": prox.Box(-0.2, 0.5),
    "l1+nonneg": prox.L1(0.2) + prox.NonNegative(),
    "l2ball": prox.L2Ball(0.8),
    "l1ball": prox.L1Ball(0.9),
}
SEPARABLE = ["zero", "l1", "sql2", "enet", "box", "l1+nonneg"]
T_VALUES = [0.0, 0.7, np.r_[0.3, 1.0, 2.0, 0.5, 9.0, 4.0]]


def soft(v, kappa):
    return np.sign(v) * np.maximum(np.abs(v) - kappa, 0.0)


def one_sided_dist(P, w, g, h=1e-7):
    """dist∞(0, g + ∂P(w)) for a separable P from its values only: per coordinate
    max(0, −D⁺, −D⁻), D^± the one-sided difference slopes of x ↦ g_j·x + P(w + x e_j)."""
    F0, out = P.value(w), []
    for j in range(w.size):
        e = np.eye(w.size)[j] * h
        up = (g[j] * h + P.value(w + e) - F0) / h
        down = (-g[j] * h + P.value(w - e) - F0) / h
        out.append(max(0.0, -up, -down))
    return max(out)


def assert_subgradients_match_values(P):
    """dist from P's subgradient intervals against the one-sided slopes of its values,
    at points of its prox (on kinks and bounds)."""
    for _ in range(3):
        w = P.prox(3 * rng.standard_normal(d), 1.0)
        g = rng.standard_normal(d)
        assert P.value(w) < np.inf and P.dist(w, g) < np.inf
        assert P.dist(w, g) == pytest.approx(one_sided_dist(P, w, g), abs=1e-6)


def cvxpy_prox(P, v, t):
    x = cp.Variable(v.size)
    expr, cons = P.cvxpy(x)
    if np.ndim(t):                                   # separable: t per coordinate
        obj = sum(t[j] * term for j, term in enumerate(per_coordinate(P, x)))
    else:
        obj = t * expr
    cp.Problem(cp.Minimize(obj + 0.5 * cp.sum_squares(x - v)), cons).solve(
        solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return x.value


def per_coordinate(P, x):
    """P's terms coordinate by coordinate (separable P), from its cvxpy expression on a
    vector that is x in coordinate j and 0 elsewhere (P(0) = 0 for these P)."""
    terms = []
    for j in range(x.size):
        e = np.eye(x.size)[:, j]
        terms.append(P.cvxpy(cp.multiply(e, cp.hstack([x[j]] * x.size)))[0])
    return terms


# -- Ridged ------------------------------------------------------------------------------

@pytest.mark.parametrize("t", T_VALUES[1:])
def test_ridged_prox_closed_forms(t):
    """By hand: min t(R(x) + (a/2)‖x‖²) + ½‖x − v‖² is R's prox at v/(1 + ta) with
    step t/(1 + ta), so L1 gives soft(v, tλ)/(1 + ta) (the ElasticNet's), a Box the
    clipped v/(1 + ta) and an L2 ball v/(1 + ta) projected onto it."""
    a, v = 0.6, 2 * rng.standard_normal(d)
    s = 1 + np.asarray(t) * a
    np.testing.assert_allclose(prox.Ridged(prox.L1(0.3), a).prox(v, t),
                               soft(v, np.asarray(t) * 0.3) / s, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(prox.Ridged(prox.Box(-0.2, 0.5), a).prox(v, t),
                               np.clip(v / s, -0.2, 0.5), rtol=1e-14)
    np.testing.assert_array_equal(prox.Ridged(prox.Zero(), a).prox(v, t), v / s)
    if np.ndim(t) == 0:
        x = v / s
        np.testing.assert_allclose(prox.Ridged(prox.L2Ball(0.8), a).prox(v, t),
                                   x * min(1.0, 0.8 / np.linalg.norm(x)), rtol=1e-14)


@pytest.mark.parametrize("name", sorted(INNERS))
def test_ridged_prox_matches_cvxpy_and_is_stationary(name):
    P = prox.Ridged(INNERS[name], 0.6)
    for t in T_VALUES[1:] if name in SEPARABLE else T_VALUES[1:2]:
        v = 2 * rng.standard_normal(d)
        z = P.prox(v, t)
        np.testing.assert_allclose(z, cvxpy_prox(P, v, t), atol=1e-6)
        assert P.value(z) < np.inf
        assert P.dist(z, (z - v) / np.broadcast_to(t, (d,))) <= 1e-12   # 0 ∈ ∂P(z) + (z − v)/t


@pytest.mark.parametrize("name", SEPARABLE)
def test_ridged_subgradients_match_its_values(name):
    assert_subgradients_match_values(prox.Ridged(INNERS[name], 0.6))


def test_ridged_value_pieces_and_ridge_weights():
    w, g = rng.standard_normal(d), rng.standard_normal(d)
    P = prox.Ridged(prox.ElasticNet(0.1, 0.4), 0.6)
    assert P.value(w) == pytest.approx(0.1 * np.abs(w).sum() + 0.5 * 1.0 * w @ w, rel=1e-14)
    q, lam, lo, hi = P.pieces(d)
    np.testing.assert_array_equal(q, np.full(d, 1.0))
    np.testing.assert_array_equal(lam, np.full(d, 0.1))
    assert P.separable and P.exact_dist and P.ridge_weights(d) is None     # L1 part
    np.testing.assert_array_equal(prox.Ridged(prox.SquaredL2(0.4), 0.6).ridge_weights(d),
                                  np.full(d, 1.0))
    ball = prox.Ridged(prox.L2Ball(100.0), 0.6)          # non-separable: R's dist at g + a·w
    assert not ball.separable and ball.pieces(d) is None and ball.ridge_weights(d) is None
    assert ball.dist(w, g) == pytest.approx(np.max(np.abs(g + 0.6 * w)), rel=1e-14)
    nuclear = prox.Ridged(prox.Nuclear(0.1, (2, 3)), 0.6)
    assert nuclear.exact_dist is False
    assert nuclear.dist(w, g) == nuclear.inner.dist(w, g + 0.6 * w)


def test_ridged_checks_and_repr():
    with pytest.raises(ValueError, match="Ridged: lam"):
        prox.Ridged(prox.L1(0.1), -1.0)
    with pytest.raises(TypeError, match="Ridged: inner"):
        prox.Ridged(0.1, 1.0)
    with pytest.raises(ValueError, match=r"Box: lower has shape \(2,\), expected \(3,\)"):
        prox.Ridged(prox.Box([0.0, 0.0], 1.0), 0.5).check_dim(3)
    assert repr(prox.Ridged(prox.L1(0.01), 0.5)) == "Ridged(L1(lam=0.01), lam=0.5)"


# -- Leading -----------------------------------------------------------------------------

@pytest.mark.parametrize("t", T_VALUES)
def test_leading_prox_closed_forms(t):
    """By hand, coordinate j < k of min t·R(x/σ) + ½‖x − v‖²: for R = λ|·|,
    min tλ|x|/σ + ½(x − v)² is soft(v, tλ/σ); for R = (a/2)(·)², v/(1 + ta/σ²) (the
    weighted ridge SquaredL2(a/σ²)); for a Box, clip(v, σ·lo, σ·hi).  The last
    coordinate is free: v itself."""
    v = 2 * rng.standard_normal(d)
    tj = np.broadcast_to(t, (d,))[:k]
    z = prox.Leading(prox.L1(0.3), k, SIGMA).prox(v, t)
    np.testing.assert_allclose(z[:k], soft(v[:k], tj * 0.3 / SIGMA), rtol=1e-14, atol=1e-15)
    assert z[k] == v[k]
    ridge = prox.Leading(prox.SquaredL2(0.7), k, SIGMA)
    np.testing.assert_allclose(ridge.prox(v, t)[:k], v[:k] / (1 + tj * 0.7 / SIGMA ** 2),
                               rtol=1e-14)
    weighted = prox.SquaredL2(np.r_[0.7 / SIGMA ** 2, 0.0])
    np.testing.assert_allclose(ridge.prox(v, t), weighted.prox(v, t), rtol=1e-14)
    box = prox.Leading(prox.Box(-0.2, 0.5), k, SIGMA).prox(v, t)
    np.testing.assert_allclose(box, np.r_[np.clip(v[:k], -0.2 * SIGMA, 0.5 * SIGMA), v[k]],
                               rtol=1e-15)


def test_leading_ridge_is_smooth_for_the_newton_solvers():
    """A weighted ridge on the first k coordinates and nothing on the rest: ridge_weights
    gives (a/σ², 0), so inner="auto" takes Newton-CG above d = 2,000 (the Hessian's sum
    up to it) and the Newton step folds it into the smooth part; with an L1 part it is
    not smooth (the dense Newton up to d = 2,000, then the ADMM)."""
    big_k = 2200
    sigma = rng.uniform(0.1, 10.0, big_k)
    P = prox.Leading(prox.SquaredL2(0.01), big_k, sigma)
    q = P.ridge_weights(big_k + 1)
    np.testing.assert_allclose(q, np.r_[0.01 / sigma ** 2, 0.0], rtol=1e-15)
    assert choose_inner(big_k + 1, P) == "newton-cg"
    L1 = prox.Leading(prox.Ridged(prox.L1(0.01), 0.01), big_k, sigma)
    assert L1.ridge_weights(big_k + 1) is None and choose_inner(big_k + 1, L1) == "admm"


@pytest.mark.parametrize("name", sorted(INNERS))
def test_leading_prox_matches_cvxpy_and_is_stationary(name):
    inner = prox.Ridged(INNERS[name], 0.7)
    sigma = SIGMA if name in SEPARABLE else None
    P = prox.Leading(inner, k, sigma)
    for t in T_VALUES[1:] if name in SEPARABLE else T_VALUES[1:2]:
        v = 2 * rng.standard_normal(d)
        z = P.prox(v, t)
        if name in SEPARABLE:                        # written out: u = x/σ per coordinate
            x = cp.Variable(d)
            u = cp.multiply(1 / sigma, x[:k])
            tk = np.broadcast_to(t, (d,))[:k]
            expr = sum(tk[j] * term for j, term in enumerate(per_coordinate(inner, u)))
            cons = inner.cvxpy(u)[1]
            cp.Problem(cp.Minimize(expr + 0.5 * cp.sum_squares(x - v)), cons).solve(
                solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
            np.testing.assert_allclose(z, x.value, atol=1e-6)
        else:
            np.testing.assert_allclose(z, cvxpy_prox(P, v, t), atol=1e-6)
        assert z[k] == v[k]                          # the free coordinate is not touched
        # z = σ·lo at a bound, and z/σ may miss lo by an ulp (3·(-0.2)/3 != -0.2):
        # ulps of slack at the box, as dist's atol allows
        assert P.dist(z, (z - v) / np.broadcast_to(t, (d,)), atol=1e-15) <= 1e-12


@pytest.mark.parametrize("name", SEPARABLE)
def test_leading_subgradients_and_pieces_describe_it(name):
    """∂P = ∂R(u)/σ against one-sided slopes of P's values; the pieces (q, λ, lo, hi)
    give P's value inside the box and its prox in the closed form
    clip(soft(v, tλ)/(1 + tq), lo, hi); nothing on the free coordinate."""
    P = prox.Leading(prox.Ridged(INNERS[name], 0.7), k, SIGMA)
    q, lam, lo, hi = P.pieces(d)
    assert (q[k], lam[k], lo[k], hi[k]) == (0.0, 0.0, -np.inf, np.inf)
    # difference slopes need a curvature q·h well below the tolerance (scales near 1),
    # and points on the box exactly (powers of two: w/σ is then exactly u)
    assert_subgradients_match_values(
        prox.Leading(prox.Ridged(INNERS[name], 0.7), k, np.r_[0.5, 1.0, 2.0, 4.0, 8.0]))
    for _ in range(3):
        v, t = 2 * rng.standard_normal(d), rng.uniform(0.1, 3.0)
        closed = np.clip(soft(v, t * lam) / (1 + t * q), lo, hi)
        np.testing.assert_allclose(P.prox(v, t), closed, rtol=1e-12, atol=1e-14)
        inside = np.clip(rng.standard_normal(d), 0.99 * lo, 0.99 * hi)
        assert P.value(inside) == pytest.approx(
            float(0.5 * q @ inside ** 2 + lam @ np.abs(inside)), rel=1e-12)


def test_leading_non_separable_inner_and_free_coordinates():
    """Unscaled, any R: L2Ball on the first k coordinates projects them only; dist is the
    larger of R's on them and |g| on the free coordinates."""
    P = prox.Leading(prox.L2Ball(0.8), k)
    v = 3 * rng.standard_normal(d)
    z = P.prox(v, 1.0)
    np.testing.assert_allclose(z, np.r_[v[:k] * 0.8 / np.linalg.norm(v[:k]), v[k]],
                               rtol=1e-15)
    g = rng.standard_normal(d)
    assert P.dist(z, g) == max(prox.L2Ball(0.8).dist(z[:k], g[:k]), abs(g[k]))
    assert P.value(np.r_[np.zeros(k), 1e6]) == 0.0 and P.pieces(d) is None
    assert prox.Leading(prox.L2Ball(0.8), k, np.ones(k)).scale is None    # ones: no scale


def test_leading_checks_and_repr():
    with pytest.raises(ValueError, match="separable") as err:
        prox.Leading(prox.L2Ball(1.0), 3, np.array([1.0, 2.0, 3.0]))
    assert "L2Ball(radius=1.0)" in str(err.value)
    for bad in (np.ones(2), np.r_[1.0, 0.0, 1.0], np.r_[1.0, np.inf, 1.0]):
        with pytest.raises(ValueError, match="Leading: scale"):
            prox.Leading(prox.L1(0.1), 3, bad)
    with pytest.raises(ValueError, match="Leading: k"):
        prox.Leading(prox.L1(0.1), -1)
    with pytest.raises(ValueError, match="Leading: a regularizer of the first 3"):
        prox.Leading(prox.L1(0.1), 3).check_dim(2)
    with pytest.raises(ValueError, match=r"Box: lower has shape \(2,\), expected \(3,\)"):
        prox.Leading(prox.Box([0.0, 0.0], 1.0), 3).check_dim(4)
    prox.Leading(prox.Box([0.0, 0.0, 0.0], 1.0), 3).check_dim(4)
    text = repr(prox.Leading(prox.Ridged(prox.L1(0.01), 0.5), 3, np.r_[0.5, 1.0, 2.0]))
    assert text == "Leading(Ridged(L1(lam=0.01), lam=0.5), k=3, scale=<3 values in [0.5, 2]>)"
