"""The federated scaling (constrfl.scaling, docs/algorithms.md §8a): the rescaled
functions and regularizers against the originals at w = Dx (chain rule), and scaled
solves whose results, residuals and multipliers are in the user's units (cf.kkt at the
returned point, cvxpy on the pooled problem)."""
import numpy as np
import pytest
import scipy.sparse as sp

import constrfl as cf
from constrfl import functions as fn
from constrfl import problems, prox
from constrfl.scaling import (column_stats, equilibrate, row_scales, row_scaling,
                              scaled_regularizer)

RNG = np.random.default_rng(7)
D = 2.0 ** RNG.integers(-6, 7, size=5)
X = RNG.standard_normal((30, 5))
Y01 = (RNG.random(30) < 0.5).astype(float)
M = RNG.standard_normal((5, 5))


@pytest.mark.parametrize("f", [
    fn.Quadratic(M @ M.T, RNG.standard_normal(5), 0.3),
    fn.Affine(RNG.standard_normal((3, 5)), RNG.standard_normal(3)),
    fn.Affine(RNG.standard_normal(5), 0.4),
    fn.LeastSquares(X, RNG.standard_normal(30)),
    fn.LeastSquares(sp.csr_array(X * (RNG.random(X.shape) < 0.3)), RNG.standard_normal(30)),
    fn.LogisticLoss(X, Y01),
    2.0 * fn.LogisticLoss(X, Y01) - fn.Affine(RNG.standard_normal(5)) + 1.5,
    fn.SquaredNorm(RNG.standard_normal((4, 5)), RNG.standard_normal(4)),   # the wrapper
], ids=lambda f: repr(f)[:24])
def test_rescaled_function_is_f_of_Dx(f):
    """value, gradient, Hessian and Hessian products of x ↦ f(Dx) from f at Dx."""
    g = f.rescaled(D)
    x, v = RNG.standard_normal(5), RNG.standard_normal(5)
    np.testing.assert_allclose(g.value(x), f.value(D * x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g.grad(x), np.asarray(f.grad(D * x)) * D, rtol=1e-12,
                               atol=1e-12)
    if f.size is None:
        H = f.hess(D * x)
        np.testing.assert_allclose(g.hess(x), D[:, None] * H * D[None, :], rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_allclose(g.hessvec(x, v), D * (H @ (D * v)), rtol=1e-10,
                                   atol=1e-10)
    assert (g.curvature, g.size, g.dim) == (f.curvature, f.size, f.dim)


@pytest.mark.parametrize("P", [prox.Zero(), prox.L1(0.3), prox.SquaredL2(0.7),
                               prox.ElasticNet(0.2, 0.5) + prox.Box(-1.0, 2.0),
                               prox.NonNegative(), prox.L1(0.1) + prox.Box(-3.0, 0.5)],
                         ids=repr)
def test_scaled_regularizer_is_c_P_of_Dx(P):
    """x ↦ c·P(Dx): its value, its subgradients cD∂P(Dx) and its prox (the minimizer
    of tc·P(Dz) + ½‖z − v‖², checked by its optimality condition in P's own terms)."""
    c = 0.25
    Q = scaled_regularizer(P, D, c)
    for _ in range(5):
        x = RNG.standard_normal(5) / D
        x = Q.prox(x, 0.0)                              # into the (scaled) domain
        assert Q.value(x) == pytest.approx(c * P.value(D * x), rel=1e-12, abs=1e-14)
        lo, hi = P.subgradients(D * x)
        qlo, qhi = Q.subgradients(x)
        np.testing.assert_allclose(qlo, c * D * lo, rtol=1e-12)
        np.testing.assert_allclose(qhi, c * D * hi, rtol=1e-12)
        v, t = RNG.standard_normal(5) / D, 0.8
        z = Q.prox(v, t)                                # 0 ∈ tcD∂P(Dz) + z − v
        assert P.dist(D * z, (z - v) / (t * c * D)) <= 1e-9


def test_factors_are_powers_of_two_and_a_ball_keeps_its_coordinates():
    A = np.diag([1e4, 1.0, 1e-3]) @ RNG.standard_normal((3, 3))
    party = cf.Client(objective=fn.Quadratic(np.diag([1e6, 1.0, 1e-2])),
                      constraints=[fn.Affine(A, np.ones(3))])
    reply, e, _ = column_stats(party, np.ones(3))
    for P in (prox.Box(-1.0, 1.0), prox.L2Ball(2.0)):
        Dc, c = equilibrate(reply, P)       # one party: the sums are its stats
        for f in (*Dc, c, *e):
            assert f > 0 and np.log2(f) == np.round(np.log2(f))
        assert np.any(Dc != 1.0) == P.separable


def _badly_scaled_qp():
    rng = np.random.default_rng(1)
    d = 8
    B = rng.standard_normal((d, d))
    P = B @ B.T * np.diag([1, 1e3, 1, 1e-2, 1, 1, 1e2, 1])
    P = 0.5 * (P + P.T)
    q = rng.standard_normal(d)
    rows = np.array([1e3, 1, 1e-2, 10, 1, 100])
    A = rng.standard_normal((6, d)) * rows[:, None]
    b = np.abs(rng.standard_normal(6)) * rows
    clients = [cf.Client(objective=fn.Quadratic(P / 2, q / 2),
                         constraints=[fn.Affine(A[k::2], -b[k::2])], name=f"c{k}")
               for k in range(2)]
    return cf.Problem(clients, server=cf.Server(equalities=[fn.Affine(np.ones(d), -1.0)]),
                      regularizer=prox.Box(-1.0, 2.0))


@pytest.mark.filterwarnings("ignore:neyman_pearson. feature scales differ")
@pytest.mark.parametrize("build", [
    _badly_scaled_qp,
    lambda: problems.neyman_pearson(np.c_[X * [1e3, 1, 1, 1e-2, 1], np.ones(30)], Y01,
                                    np.repeat([0, 1, 2], 10), 0.6,
                                    regularizer=prox.L1(1e-2)),
], ids=["qp", "neyman-pearson"])
def test_scaled_solve_is_in_user_units(build):
    """A scaled solve's w, multipliers, residuals and objective are the user's: cf.kkt
    at the returned point equals res.kkt, it meets tol, and F(w) matches cvxpy's
    optimum of the pooled problem."""
    pytest.importorskip("cvxpy")
    problem = build()
    res = cf.solve(problem, tol=1e-6, scaling=True)
    assert res.status == "optimal", res.message
    assert res.state["solver"].scale_columns is not None        # it was scaled
    k = cf.kkt(problem, res.w, res.multipliers)
    for name in ("stationarity", "feasibility", "complementarity"):
        assert getattr(k, name) == pytest.approx(getattr(res.kkt, name), rel=1e-9,
                                                 abs=1e-12)
        assert getattr(k, name) <= 1e-6
    assert res.objective == pytest.approx(problem.objective(res.w), rel=1e-12)
    ref = cf.certify(problem, res).reference_objective
    assert abs(res.objective - ref) <= 1e-6 * max(1.0, abs(ref))


def test_a_scaled_solve_resumes_bit_for_bit(tmp_path):
    """The scaling is part of the saved state: a scaled solve stopped after two outer
    iterations, saved and resumed ends where the uninterrupted one does."""
    problem = _badly_scaled_qp()
    full = cf.solve(problem, scaling=True)
    part = cf.solve(problem, scaling=True, max_outer=2)
    assert part.state["solver"].scale_columns is not None
    part.save(tmp_path / "part.npz")
    rest = cf.solve(problem, resume=cf.load_result(tmp_path / "part.npz"),
                    max_outer=full.settings["max_outer"])
    assert rest.status == full.status == "optimal"
    np.testing.assert_array_equal(rest.w, full.w)
    assert rest.rounds == full.rounds


def test_row_scales_touch_only_the_far_rows():
    """Under ``scaling="rows"`` a row is scaled by 1/√‖∇cⱼ‖∞ (a power of two) only when
    its norm lies outside [1/16, 16]; a zero row is left alone."""
    C = np.array([[1e3, 0.0], [1.0, -2.0], [1e-3, 0.0], [0.0, 0.0], [0.0, 16.0]])
    party = cf.Client(objective=fn.Quadratic(np.eye(2)), name="c",
                      constraints=[fn.Affine(C, np.zeros(5))])
    e, _ = row_scales(party, np.zeros(2), far=16.0)
    np.testing.assert_array_equal(e, [2.0 ** -5, 1.0, 32.0, 1.0, 1.0])   # 1/√1e3 ≈ 2⁻⁵
    assert "scale_columns" not in row_scaling(party, np.zeros(2), far=1e4)  # none far


def test_row_scaled_solve_is_in_user_units():
    """``scaling="rows"`` (the default): each party scales its own far rows, no round
    and no change of variables; w, multipliers and residuals are the user's (cf.kkt at
    the returned point equals res.kkt), and F(w) matches cvxpy's optimum."""
    pytest.importorskip("cvxpy")
    problem = _badly_scaled_qp()
    res = cf.solve(problem, tol=1e-6)
    assert res.settings["scaling"] == "rows" and res.status == "optimal", res.message
    k = cf.kkt(problem, res.w, res.multipliers)
    for name in ("stationarity", "feasibility", "complementarity"):
        assert getattr(k, name) == pytest.approx(getattr(res.kkt, name), rel=1e-9,
                                                 abs=1e-12)
        assert getattr(k, name) <= 1e-6
    ref = cf.certify(problem, res).reference_objective
    assert abs(res.objective - ref) <= 1e-6 * max(1.0, abs(ref))
    parties = res.state["parties"]                  # rows of 1e3, 1e-2 and 100 were scaled
    assert all("scale_columns" in parties[c]["state"] for c in ("c0", "c1"))
    assert "scale_columns" not in parties["server"]["state"]   # its one row: norm 1


def test_rows_within_range_leave_the_solve_bit_for_bit():
    """No row far from 1: the solve is the unscaled one, bit for bit."""
    problem = problems.neyman_pearson(np.c_[X, np.ones(30)], Y01, np.repeat([0, 1, 2], 10),
                                      0.6)
    rows, off = cf.solve(problem, scaling="rows"), cf.solve(problem, scaling=False)
    np.testing.assert_array_equal(rows.w, off.w)
    assert rows.rounds == off.rounds and rows.status == off.status == "optimal"
