import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
import scipy.sparse

from constrfl import kernels as K

SHAPES = [(1, 1), (1, 4), (6, 1), (40, 3), (257, 12)]
CASES = [(N, d, weighted) for N, d in SHAPES for weighted in (False, True)]
# "dense": X as a dense array, data with no zeros; "csr": X as a K.CSR, data
# ~30% nonzero with an all-zero row and column (where N, d > 1)
LAYOUTS = ["dense", "csr"]


def relerr(a, b, floor=1e-8):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), floor)


def make(N, d, weighted, seed=0, scale=1.0, layout="dense"):
    """(X, y, s, w) with X dense; sparse as described at LAYOUTS for "csr"."""
    rng = np.random.default_rng(seed + 1000 * N + d)
    X = rng.standard_normal((N, d)) * scale
    y = (rng.random(N) < 0.5).astype(float)
    s = rng.uniform(0.1, 3.0, N) if weighted else np.ones(N)
    w = rng.standard_normal(d)
    if layout == "csr":
        X *= rng.random((N, d)) < 0.3
        if N > 1:
            X[N // 2] = 0.0
        if d > 1:
            X[:, d // 2] = 0.0
    return X, y, s, w


def as_layout(X, layout):
    """What the kernels take for the (dense) matrix X in that layout."""
    return K.CSR.from_dense(X) if layout == "csr" else X


# ---- plain NumPy references, straight from the formulas -------------------
def ref_logistic(X, y, s, w):
    z = X @ w
    S = s.sum()
    p = 1.0 / (1.0 + np.exp(-z))
    val = np.sum(s * (np.log(1.0 + np.exp(z)) - y * z)) / S
    grad = X.T @ (s * (p - y)) / S
    hess = X.T @ np.diag(s * p * (1 - p)) @ X / S
    return val, grad, hess


def ref_lsq(X, y, s, w):
    r = X @ w - y
    S = s.sum()
    return np.sum(s * 0.5 * r**2) / S, X.T @ (s * r) / S, X.T @ np.diag(s) @ X / S


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("N,d,weighted", CASES)
def test_logistic_matches_numpy(N, d, weighted, layout):
    X, y, s, w = make(N, d, weighted, layout=layout)
    val, grad, hess = ref_logistic(X, y, s, w)
    X = as_layout(X, layout)
    v0 = K.logistic_value(X, y, s, w)
    v1, g1 = K.logistic_value_grad(X, y, s, w)
    v2, g2, H2 = K.logistic_value_grad_hess(X, y, s, w)
    for v in (v0, v1, v2):
        assert relerr(v, val) < 1e-12
    for g in (g1, g2):
        assert g.shape == (d,) and relerr(g, grad) < 1e-12
    assert H2.shape == (d, d) and relerr(H2, hess) < 1e-12
    assert np.array_equal(H2, H2.T)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("N,d,weighted", CASES)
def test_lsq_matches_numpy(N, d, weighted, layout):
    X, _, s, w = make(N, d, weighted, layout=layout)
    y = np.random.default_rng(N + d).standard_normal(N)
    val, grad, hess = ref_lsq(X, y, s, w)
    X = as_layout(X, layout)
    v, g = K.lsq_value_grad(X, y, s, w)
    H = K.lsq_hess(X, s)
    assert relerr(v, val) < 1e-12
    assert g.shape == (d,) and relerr(g, grad) < 1e-12
    assert H.shape == (d, d) and relerr(H, hess) < 1e-12
    assert np.array_equal(H, H.T)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("N,d,weighted", [(1, 1, False), (40, 3, True), (257, 12, True)])
def test_grad_rows(N, d, weighted, layout):
    X, y, s, w = make(N, d, weighted, layout=layout)
    Xk = as_layout(X, layout)
    yl = np.random.default_rng(N).standard_normal(N)
    rng = np.random.default_rng(d)
    for idx in (np.arange(N), rng.integers(0, N, size=max(1, N // 3)), np.array([N - 1, 0, N - 1])):
        idx = idx.astype(np.int64)
        Xi, yi, si, yli = X[idx], y[idx], s[idx], yl[idx]
        ref = ref_logistic(Xi, yi, si, w)[1]
        assert relerr(K.logistic_grad_rows(Xk, y, s, w, idx), ref) < 1e-12
        assert relerr(K.lsq_grad_rows(Xk, yl, s, w, idx), ref_lsq(Xi, yli, si, w)[1]) < 1e-12


# ---- finite differences ----------------------------------------------------
def fd_grad(f, w, h=1e-5):
    return np.array([(f(w + h * e) - f(w - h * e)) / (2 * h) for e in np.eye(len(w))])


def fd_jac(F, w, h=1e-5):
    return np.column_stack([(F(w + h * e) - F(w - h * e)) / (2 * h) for e in np.eye(len(w))])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("N,d,weighted", [(1, 1, False), (6, 1, True), (40, 3, True), (257, 12, False)])
def test_finite_differences(N, d, weighted, layout):
    X, y, s, w = make(N, d, weighted, layout=layout)
    X = as_layout(X, layout)
    yl = np.random.default_rng(N).standard_normal(N)
    _, g, H = K.logistic_value_grad_hess(X, y, s, w)
    assert relerr(g, fd_grad(lambda u: K.logistic_value(X, y, s, u), w)) < 1e-6
    assert relerr(H, fd_jac(lambda u: K.logistic_value_grad(X, y, s, u)[1], w)) < 1e-6
    _, gl = K.lsq_value_grad(X, yl, s, w)
    assert relerr(gl, fd_grad(lambda u: K.lsq_value_grad(X, yl, s, u)[0], w)) < 1e-6
    assert relerr(K.lsq_hess(X, s), fd_jac(lambda u: K.lsq_value_grad(X, yl, s, u)[1], w)) < 1e-6


# ---- stability against a 60-digit Decimal reference ------------------------
def decimal_logistic(X, y, s, w):
    """High-precision reference: z_j = X[j] @ w is formed in float64 by the same
    ordered sum the kernel uses; everything after that is done in 60 digits."""
    N, d = X.shape
    with localcontext() as ctx:
        ctx.prec = 60
        one = Decimal(1)
        S = sum(Decimal(v) for v in s)
        val, g, H = Decimal(0), [Decimal(0)] * d, [[Decimal(0)] * d for _ in range(d)]
        for j in range(N):
            zf = 0.0
            for k in range(d):
                zf += X[j, k] * w[k]
            z = Decimal(zf)
            sj, yj = Decimal(s[j]), Decimal(y[j])
            sig = one / (one + (-z).exp())
            val += sj * ((one + z.exp()).ln() - yj * z)
            xs = [Decimal(v) for v in X[j]]
            for a in range(d):
                g[a] += sj * (sig - yj) * xs[a]
                for b in range(d):
                    H[a][b] += sj * sig * (one - sig) * xs[a] * xs[b]
        return (float(val / S), np.array([float(v / S) for v in g]),
                np.array([[float(v / S) for v in row] for row in H]))


EXTREME_Z = [1000.0, -1000.0, 745.5, -745.5, 746.0, -746.0, 709.8, -709.8, 40.0, -40.0, 36.7, -36.7, 1e-3, 0.0]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("z", EXTREME_Z)
@pytest.mark.parametrize("y", [0.0, 1.0])
def test_stability_single_sample(z, y, layout):
    X, yy, s, w = np.ones((1, 1)), np.array([y]), np.ones(1), np.array([z])
    rv, rg, rH = decimal_logistic(X, yy, s, w)
    X = as_layout(X, layout)
    v, g, H = K.logistic_value_grad_hess(X, yy, s, w)
    for got, ref in ((v, rv), (g[0], rg[0]), (H[0, 0], rH[0, 0])):
        assert math.isfinite(got)
        assert math.isclose(got, ref, rel_tol=1e-14, abs_tol=1e-300), (got, ref)
    assert K.logistic_value(X, yy, s, w) == v


def test_stability_known_values():
    X, s = np.ones((1, 1)), np.ones(1)
    assert K.logistic_value(X, np.zeros(1), s, np.array([1000.0])) == 1000.0
    assert K.logistic_value(X, np.ones(1), s, np.array([-1000.0])) == 1000.0
    assert K.logistic_value(X, np.ones(1), s, np.array([1000.0])) == 0.0
    assert K.logistic_value(X, np.zeros(1), s, np.array([0.0])) == math.log(2.0)
    _, g, H = K.logistic_value_grad_hess(X, np.zeros(1), s, np.array([-1000.0]))
    assert g[0] == 0.0 and H[0, 0] == 0.0
    _, g, H = K.logistic_value_grad_hess(X, np.zeros(1), s, np.array([40.0]))
    assert g[0] == 1.0 and H[0, 0] == math.exp(-40.0)
    _, g, _ = K.logistic_value_grad_hess(X, np.ones(1), s, np.array([40.0]))
    assert math.isclose(g[0], -math.exp(-40.0), rel_tol=1e-15)  # naive sigma - 1 gives 0


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("weighted", [False, True])
def test_stability_mixed_batch(weighted, layout):
    rng = np.random.default_rng(7)
    N, d = 2 * len(EXTREME_Z), 3
    w = np.array([1.0, -0.5, 0.25])
    X = rng.standard_normal((N, d))
    if layout == "csr":
        X[:, 1:] *= rng.random((N, d - 1)) < 0.4
    z = np.array(EXTREME_Z + [-t for t in EXTREME_Z])
    X[:, 0] = (z - X[:, 1:] @ w[1:]) / w[0]  # rows hit the extreme margins
    y = (rng.random(N) < 0.5).astype(float)
    s = rng.uniform(0.1, 3.0, N) if weighted else np.ones(N)
    rv, rg, rH = decimal_logistic(X, y, s, w)
    X = as_layout(X, layout)
    v, g, H = K.logistic_value_grad_hess(X, y, s, w)
    assert np.isfinite(v) and np.all(np.isfinite(g)) and np.all(np.isfinite(H))
    assert relerr(v, rv) < 1e-13 and relerr(g, rg) < 1e-13 and relerr(H, rH) < 1e-13
    idx = np.arange(N, dtype=np.int64)
    assert relerr(K.logistic_grad_rows(X, y, s, w, idx), rg) < 1e-13


# ---- determinism -----------------------------------------------------------
def _bytes(out):
    return b"".join(np.asarray(o, dtype=float).tobytes() for o in (out if isinstance(out, tuple) else (out,)))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bit_reproducible_and_consistent(layout):
    X, y, s, w = make(300, 9, True, seed=3, layout=layout)
    X = as_layout(X, layout)
    yl = np.random.default_rng(1).standard_normal(300)
    idx = np.random.default_rng(3).integers(0, 300, 50).astype(np.int64)
    calls = [
        lambda: K.logistic_value(X, y, s, w),
        lambda: K.logistic_value_grad(X, y, s, w),
        lambda: K.logistic_value_grad_hess(X, y, s, w),
        lambda: K.logistic_grad_rows(X, y, s, w, idx),
        lambda: K.lsq_value_grad(X, yl, s, w),
        lambda: K.lsq_hess(X, s),
        lambda: K.lsq_grad_rows(X, yl, s, w, idx),
    ]
    for call in calls:
        assert _bytes(call()) == _bytes(call())
    # the fused kernels agree bit for bit with each other
    v0 = K.logistic_value(X, y, s, w)
    v1, g1 = K.logistic_value_grad(X, y, s, w)
    v2, g2, _ = K.logistic_value_grad_hess(X, y, s, w)
    assert v0 == v1 == v2 and g1.tobytes() == g2.tobytes()
    full = np.arange(300, dtype=np.int64)
    assert K.logistic_grad_rows(X, y, s, w, full).tobytes() == g1.tobytes()


# ---- CSR: construction, and the same numbers as dense ------------------------
@pytest.mark.parametrize("A", [np.zeros((1, 1)), np.ones((1, 1)), np.zeros((3, 2)),
                               np.array([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0], [-1.0, 0.0, np.nan]]),
                               make(257, 12, False, layout="csr")[0]])
def test_csr_from_dense(A):
    C = K.CSR.from_dense(A)
    ref = scipy.sparse.csr_matrix(A)  # keeps the NaN, as the dense kernels see it
    assert C.indptr.dtype == C.indices.dtype == np.int64 and C.data.dtype == np.float64
    assert C.ncols == A.shape[1]
    assert np.array_equal(C.indptr, ref.indptr) and np.array_equal(C.indices, ref.indices)
    assert np.array_equal(C.data, ref.data, equal_nan=True)
    assert np.array_equal(C.toarray(), ref.toarray(), equal_nan=True)   # and back


@pytest.mark.parametrize("N,d,weighted", CASES + [(500, 40, True)])
def test_csr_bit_identical_to_dense(N, d, weighted):
    """CSR leaves out only exact zeros, so every kernel returns the dense numbers."""
    X, y, s, w = make(N, d, weighted, layout="csr")
    C = K.CSR.from_dense(X)
    rng = np.random.default_rng(N * d)
    yl = rng.standard_normal(N)
    idx = rng.integers(0, N, size=max(1, N // 2)).astype(np.int64)
    for call in (lambda A: K.logistic_value(A, y, s, w),
                 lambda A: K.logistic_value_grad(A, y, s, w),
                 lambda A: K.logistic_value_grad_hess(A, y, s, w),
                 lambda A: K.logistic_grad_rows(A, y, s, w, idx),
                 lambda A: K.lsq_value_grad(A, yl, s, w),
                 lambda A: K.lsq_hess(A, s),
                 lambda A: K.lsq_grad_rows(A, yl, s, w, idx)):
        assert _bytes(call(C)) == _bytes(call(X))


@pytest.mark.parametrize("N,d", [(0, 4), (3, 1), (7, 5), (13, 130), (6, 2 * K.GRAM_TILE[1] + 1)])
def test_the_tiled_gram_is_the_row_by_row_sum_bit_for_bit(N, d):
    """The dense Gram, tile by tile and four rows at a time, adds each entry's terms in
    the rows' order: the same bits as a row-by-row loop (written here in NumPy) and as
    the CSR path; rows of weight 0 (here row 2) left out, weights of both signs."""
    rng = np.random.default_rng(N + d)
    X = rng.standard_normal((N, d))
    s, h, term = rng.random(N), rng.random(N), rng.integers(0, 2, N)
    b = np.array([1.0, -2.0])
    if N > 3:
        h[2] = 0.0
    coef = b[term] * s * h
    expected = np.zeros((d, d))
    for j in range(N):
        if coef[j] != 0.0:
            for a in range(d):
                expected[a, a:] += (coef[j] * X[j, a]) * X[j, a:]
    H = K.stacked_gram(X, s, term, h, b)
    assert H.tobytes() == expected.tobytes()
    assert K.stacked_gram(K.CSR.from_dense(X), s, term, h, b).tobytes() == expected.tobytes()


@pytest.mark.parametrize("margin", [1.0, 40.0, 1e3])
def test_csr_large_margins(margin):
    """Sparse rows scaled so that x_j^T w spreads over [-margin, margin]."""
    N = 60
    X, y, s, w = make(N, 10, True, layout="csr")
    z = X @ w
    X *= (margin * np.linspace(-1.0, 1.0, N) / np.where(z == 0.0, 1.0, z))[:, None]
    assert np.isclose(np.abs(X @ w).max(), margin)
    C = K.CSR.from_dense(X)
    v, g, H = K.logistic_value_grad_hess(C, y, s, w)
    gr = K.logistic_grad_rows(C, y, s, w, np.arange(N, dtype=np.int64))
    for a in (v, g, H, gr):
        assert np.all(np.isfinite(a))
    rv, rg, rH = decimal_logistic(X, y, s, w)
    assert relerr(v, rv) < 1e-13 and relerr(g, rg) < 1e-13 and relerr(H, rH) < 1e-13
    assert relerr(gr, rg) < 1e-13


def test_max_abs_diff():
    a, b = np.array([1.0, -2.0, 0.5]), np.array([0.5, 1.0, 0.5])
    assert K.max_abs_diff(a, b) == np.max(np.abs(a - b)) == 3.0
    assert K.max_abs_diff(a[:0], b[:0]) == 0.0
    assert np.isnan(K.max_abs_diff(np.array([np.nan, 5.0]), np.zeros(2)))
    assert K.max_abs_diff(np.array([np.inf]), np.zeros(1)) == np.inf


@pytest.mark.parametrize("d", [0, 1, 3, 7])
def test_pack_unpack_upper(d):
    """pack_upper (NumPy) takes the upper triangle row by row, unpack_upper (compiled)
    puts it back on both sides."""
    H = np.random.default_rng(d).standard_normal((d, d))
    H = H + H.T
    tri = K.pack_upper(H)
    assert tri.tolist() == [H[a, b] for a in range(d) for b in range(a, d)]
    assert np.array_equal(K.unpack_upper(tri, d), H)


def test_metric_times():
    """(ρI + JᵀJ)x, against the dense matrix."""
    x = np.array([1.0, -3.0, 0.25])
    assert np.array_equal(K.metric_times(0.3, np.zeros((0, 3)), x), 0.3 * x)
    J = np.random.default_rng(0).standard_normal((2, 3))
    assert np.allclose(K.metric_times(0.3, J, x), (0.3 * np.eye(3) + J.T @ J) @ x,
                       rtol=0, atol=1e-14)


def test_compiled_cg_updates_are_numpys_bit_for_bit():
    """K.cg_step and cg_direction_update round as NumPy's d += αp, r −= αHp and
    p *= β; p += r do (a product, then a sum: no fused multiply-add)."""
    rng = np.random.default_rng(4)
    d, r, p, Hp = (rng.standard_normal(100_000) * 10.0 ** rng.uniform(-3, 3, 100_000)
                   for _ in range(4))
    alpha, beta = 0.7306, 1.9113
    d1, r1, p1 = d.copy(), r.copy(), p.copy()
    d1 += alpha * p1
    r1 -= alpha * Hp
    p1 *= beta
    p1 += r1
    K.cg_step(d, r, p, Hp, alpha)
    K.cg_direction_update(p, r, beta)
    assert (d.tobytes(), r.tobytes(), p.tobytes()) == (d1.tobytes(), r1.tobytes(), p1.tobytes())
