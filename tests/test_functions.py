"""Functions: derivatives against finite differences, cvxpy forms against values,
curvature bookkeeping of the arithmetic."""
import cvxpy as cp
import numpy as np
import pytest

from constrfl import functions as fn
from constrfl import kernels

rng = np.random.default_rng(1)
d = 4
X = rng.standard_normal((30, d))
ylab = (X[:, 0] + 0.3 * rng.standard_normal(30) > 0).astype(float)
sw = rng.uniform(0.5, 2.0, 30)
A = rng.standard_normal((d, d))
A = A @ A.T
C = rng.standard_normal((2, d))
# sparse rows like one-hot encoded data (~15% nonzero, column 9 all zero): on these
# LogisticLoss and LeastSquares hand the kernels a CSR
Xsp = np.zeros((200, 10))
Xsp[np.arange(200), rng.integers(1, 9, 200)] = 1.0  # one category a row
Xsp[:, 0] = rng.standard_normal(200) * (rng.random(200) < 0.5)  # a half-empty numeric column
ysp = (Xsp[:, 0] + 0.5 * rng.standard_normal(200) > 0).astype(float)
swsp = rng.uniform(0.5, 2.0, 200)

SCALAR = {
    "quadratic": fn.Quadratic(A, rng.standard_normal(d), 0.7),
    "affine1d": fn.Affine(C[0], 0.3),
    "lsq": fn.LeastSquares(X, X @ np.ones(d), sample_weight=sw),
    "logistic": fn.LogisticLoss(X, ylab),
    "logistic_weighted": fn.LogisticLoss(X, ylab, sample_weight=sw),
    "combo": 0.5 * fn.LogisticLoss(X, ylab) + fn.Quadratic(A) - 0.2,
    "lsq_sparse": fn.LeastSquares(Xsp, Xsp @ np.arange(10.0), sample_weight=swsp),
    "logistic_sparse": fn.LogisticLoss(Xsp, ysp, sample_weight=swsp),
    "squared_norm": fn.SquaredNorm(),
    "squared_norm_b": fn.SquaredNorm(b=rng.standard_normal(d)),
    "squared_norm_Ab": fn.SquaredNorm(rng.standard_normal((3, d)), rng.standard_normal(3)),
}


def fd_grad(f, w, h=1e-6):
    return np.array([(f(w + h * e) - f(w - h * e)) / (2 * h) for e in np.eye(w.size)]).T


@pytest.mark.parametrize("name", sorted(SCALAR))
def test_scalar_derivatives(name):
    f = SCALAR[name]
    w = rng.standard_normal(f.dim or d)
    assert np.allclose(f.grad(w), fd_grad(f.value, w), rtol=1e-6, atol=1e-7)
    assert np.allclose(f.hess(w), fd_grad(f.grad, w), rtol=1e-6, atol=1e-7)
    v, g = f.value_grad(w)
    assert v == pytest.approx(f.value(w), rel=1e-14) and np.allclose(g, f.grad(w), rtol=1e-14)


@pytest.mark.parametrize("name", sorted(SCALAR))
def test_cvxpy_form_matches_value(name):
    f = SCALAR[name]
    w = rng.standard_normal(f.dim or d)
    var = cp.Variable(w.size)
    var.value = w
    assert float(f.cvxpy(var).value) == pytest.approx(f.value(w), rel=1e-10)


def test_logistic_matches_formula():
    w = rng.standard_normal(d)
    z = X @ w
    ref = np.sum(sw * (np.logaddexp(0, z) - ylab * z)) / sw.sum()
    assert SCALAR["logistic_weighted"].value(w) == pytest.approx(ref, rel=1e-13)


def test_vector_affine_and_custom():
    h = fn.Affine(C, [1.0, -1.0])
    w = rng.standard_normal(d)
    assert np.allclose(h.value(w), C @ w + [1, -1]) and h.grad(w) is h.C
    c = fn.Custom(lambda w: np.array([w @ w, w[0] ** 2]), lambda w: np.vstack([2 * w, 2 * w[0] * np.eye(d)[0]]),
                  lambda w: np.stack([2 * np.eye(d), 2 * np.outer(np.eye(d)[0], np.eye(d)[0])]),
                  dim=d, size=2)
    y = np.array([0.5, 2.0])
    assert np.allclose(c.hess(w, y), np.eye(d) + 4 * np.outer(np.eye(d)[0], np.eye(d)[0]))
    assert np.allclose(c.grad(w), fd_grad(c.value, w), atol=1e-6)


def test_curvature_bookkeeping():
    f, g = fn.LogisticLoss(X, ylab), fn.LeastSquares(X, ylab)
    aff = fn.Affine(C[0])
    assert (f - 0.2).curvature == "convex"
    assert (f - g).curvature == "nonconvex" and not (f - g).is_convex
    assert (f - aff).curvature == "convex"
    assert (-f).curvature == "concave"
    assert (2.0 * aff - aff).curvature == "affine"
    assert fn.Quadratic(np.diag([1.0, -1.0])).curvature == "nonconvex"
    assert fn.Quadratic(np.zeros((2, 2)), [1.0, 0.0]).curvature == "affine"
    with pytest.raises(fn.NoCvxpyForm):
        fn.Custom(np.sum, np.ones_like).cvxpy(cp.Variable(2))


def test_minibatch_gradient_is_unbiased_subset():
    f = fn.LogisticLoss(X, ylab)
    w = rng.standard_normal(d)
    g = f.minibatch_grad(w, np.random.default_rng(0), 10)
    idx = np.sort(np.random.default_rng(0).choice(30, size=10, replace=False))
    assert np.allclose(g, fn.LogisticLoss(X[idx], ylab[idx]).grad(w), rtol=1e-12)
    assert np.array_equal(f.minibatch_grad(w, np.random.default_rng(0)), f.grad(w))


@pytest.mark.parametrize("cls", [fn.LogisticLoss, fn.LeastSquares])
@pytest.mark.parametrize("weighted", [False, True])
def test_sparse_data_takes_csr_path(cls, weighted, monkeypatch):
    f = cls(Xsp, ysp, sample_weight=swsp if weighted else None)
    assert isinstance(f._Xk, kernels.CSR) and np.array_equal(f.X, Xsp)  # X itself stays dense
    dense_data = cls(X, ylab)
    assert dense_data._Xk is dense_data.X
    monkeypatch.setattr(kernels, "CSR_MAX_DENSITY", -1.0)  # never sparse: the dense path
    g = cls(Xsp, ysp, sample_weight=swsp if weighted else None)
    assert g._Xk is g.X
    w = np.random.default_rng(5).standard_normal(10)
    for out in (lambda h: h.value(w), lambda h: h.grad(w), lambda h: h.hess(w),
                lambda h: h.value_grad(w)[0], lambda h: h.value_grad(w)[1],
                lambda h: h.minibatch_grad(w, np.random.default_rng(0), 50)):
        assert np.linalg.norm(out(f) - out(g)) <= 1e-12 * np.linalg.norm(out(g))


def test_cached_reuses_only_a_repeated_point():
    """``Cached(f)`` reuses its last evaluation while w's values repeat; its results must
    stay f's at the current w whatever the caller does with w or with what it got back
    (reference: the kernels called directly)."""
    f = fn.Cached(fn.LogisticLoss(X, ylab, sample_weight=sw))

    def ref(w):
        return kernels.logistic_value_grad_hess(X, ylab, sw, w)

    w = rng.standard_normal(d)
    g = f.grad(w)
    g[:] = 0.0                                   # the caller scribbles on its copy
    H = f.hess(w)
    H[:] = 0.0
    np.testing.assert_array_equal(f.grad(w), ref(w)[1])
    np.testing.assert_array_equal(f.hess(w), ref(w)[2])
    w += 0.5                                     # the same array, moved in place
    v, g, H = ref(w)
    assert f.value(w) == v and np.array_equal(f.value_grad(w)[1], g)
    np.testing.assert_array_equal(f.hess(w, 2.0), 2.0 * H)
    assert f.curvature == "convex" and f.n_samples == len(X)
    with pytest.raises(TypeError):
        fn.Cached(fn.Affine(C))                  # vector-valued


def test_cached_evaluates_once_per_point(monkeypatch):
    calls = []
    inner = fn.LogisticLoss(X, ylab)
    monkeypatch.setattr(inner, "value_grad", lambda w: calls.append(1) or (1.0, np.ones(d)))
    f = fn.Cached(inner)
    combo = 0.3 * f + f - 0.1                    # f in three places, as in the fairness template
    w = np.zeros(d)
    combo.value_grad(w)
    (f - 0.2).value_grad(w.copy())               # same values, another array
    assert len(calls) == 1
    combo.value_grad(w + 1.0)
    assert len(calls) == 2


def test_squared_norm_is_the_squared_residual():
    M, b = rng.standard_normal((3, d)), rng.standard_normal(3)
    w = rng.standard_normal(d)
    assert fn.SquaredNorm(M, b).value(w) == pytest.approx(np.sum((M @ w - b) ** 2), rel=1e-14)
    assert fn.SquaredNorm(b=w).value(w) == 0.0
    assert fn.SquaredNorm().value(w) == pytest.approx(np.sum(w ** 2), rel=1e-15)
    f = fn.SquaredNorm(M)
    assert f.dim == d and f.quadratic and f.curvature == "convex"
    np.testing.assert_allclose(f.hess(w), 2 * M.T @ M, rtol=1e-15)
    assert fn.SquaredNorm().dim is None and fn.SquaredNorm(b=b).dim == 3
    assert (fn.SquaredNorm() - 4.0).curvature == "convex"
    with pytest.raises(ValueError, match=r"SquaredNorm: b has shape \(2,\), expected \(3,\)"):
        fn.SquaredNorm(M, np.ones(2))
