"""Numba kernels for weighted logistic and least-squares empirical risks.

Notation: X is (N, d), y (N,), sample weights s (N,) (all ones when
unweighted), w (d,), z = X @ w, S = sum(s).

Logistic loss, labels y in {0, 1}:
    value = (1/S) sum_j s_j (log(1 + exp(z_j)) - y_j z_j)
    grad  = (1/S) X^T (s * (sigma(z) - y))
    hess  = (1/S) X^T diag(s sigma(z) (1 - sigma(z))) X
Least squares, y real:
    value = (1/S) sum_j s_j (z_j - y_j)^2 / 2
    grad  = (1/S) X^T (s * (z - y))
    hess  = (1/S) X^T diag(s) X

Stability: with e = exp(-|z|) <= 1 and q = e / (1 + e) = min(sigma, 1 - sigma),
    log(1 + exp(z)) - y z = log1p(e) + ((1 - y) z if z >= 0 else -y z)
    sigma(z) - y          = (1 - y) - q if z >= 0 else q - y
    sigma (1 - sigma)     = q (1 - q)
so nothing overflows and no small quantity is formed by cancellation.

Layouts: every kernel takes X either dense, a float64 array (C-contiguous for
speed), or sparse, a :class:`CSR` (indptr int64 (N+1,), indices int64 sorted
within each row, data float64, ncols = d), e.g. ``CSR.from_dense(X)`` or
``CSR.from_scipy(A)`` for a canonical scipy.sparse CSR matrix ``A``.  One
kernel body serves both: it walks the rows through the jit-only helpers
`_shape`, `_row`, `_dot`, `_axpy`, `_add_outer_upper`, which numba resolves
per layout at compile time and inlines, so the dense path runs as fast as
before CSR existed.  A CSR row costs its nonzeros instead of d (nnz^2/2
instead of d^2/2 for a Hessian), which pays when the density nnz/(N d) is at
most CSR_MAX_DENSITY.  The CSR path only leaves out the terms that are exact
zeros in the dense path, so with finite w (barring overflow) both layouts give
bit-identical results.

All kernels make one sequential pass over the rows in a fixed order (the dense
Gram one per tile of H, each entry still summed in the rows' order; no fastmath, no
parallelism), so results are bit-reproducible.  The `*_rows`
kernels restrict the weighted mean to rows idx (int64, duplicates count
repeatedly, normalised by sum(s[idx])), for minibatch SGD.

Compilation: numba compiles a kernel on its first call in a process that has no
cached copy (``cache=True``: kept on disk in ``__pycache__`` or $NUMBA_CACHE_DIR,
loaded by later processes).  Each compiled function called from another is compiled
on its own and then again as part of its caller, so the stacked kernels' helpers are
inlined (``inline="always"``) into the one entry point the solvers call,
:func:`stacked_evaluate`.  The kernels see one type per argument (float64 arrays,
C-contiguous; int64 indices): two specializations at most, dense and CSR.  A cached
kernel is recompiled only when this file changes, not when a compiled function or a
constant of another file it uses does: so what the kernels use is defined here (the
Newton methods' acceptance test :func:`step_accepted` and :data:`ARMIJO`, which the
Python solvers import through :mod:`constrfl.block`).
"""
import math
import warnings
from typing import NamedTuple

import numba
import numpy as np
from numba.core import types
from numba.core.errors import NumbaIRAssumptionWarning
from numba.extending import overload

#: Armijo's sufficient-decrease constant of the Newton methods' step acceptance
#: (:func:`step_accepted`)
ARMIJO = 1e-4

# Largest fraction of nonzeros at which callers should pass a CSR.  Measured
# on N = 2000 random sparse rows, d = 5..300: at density 0.25 the CSR is
# 1.5-7x faster for value_grad_hess, as fast or faster for value, and within
# +-6% (d <= 30) to 1.7x faster (d = 300) for value_grad; at 0.35
# value_grad is already 13-35% slower via CSR for d = 10..30.  (The UCI adult
# data, density 0.14 at d = 106: value_grad_hess ~14x faster.)
CSR_MAX_DENSITY = 0.25


class CSR(NamedTuple):
    """Compressed sparse rows of an (N, ncols) matrix."""
    indptr: np.ndarray   # int64 (N + 1,): row j is data[indptr[j]:indptr[j + 1]]
    indices: np.ndarray  # int64 (nnz,): column of each entry, ascending in each row
    data: np.ndarray     # float64 (nnz,)
    ncols: int

    @classmethod
    def from_dense(cls, X):
        """The nonzeros of a 2-D array (NaN counts as nonzero)."""
        X = np.asarray(X, dtype=np.float64)
        rows, cols = np.nonzero(X)
        indptr = np.zeros(X.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=X.shape[0]), out=indptr[1:])
        return cls(indptr, cols.astype(np.int64), X[rows, cols], X.shape[1])

    @classmethod
    def from_scipy(cls, A):
        """The arrays of a scipy.sparse CSR matrix in canonical format (sorted indices,
        no duplicates), shared where the dtypes already match."""
        return cls(np.asarray(A.indptr, dtype=np.int64), np.asarray(A.indices, dtype=np.int64),
                   np.ascontiguousarray(A.data, dtype=np.float64), int(A.shape[1]))

    def toarray(self):
        """The dense (N, ncols) array (the inverse of :meth:`from_dense`)."""
        X = np.zeros((self.indptr.size - 1, self.ncols))
        X[np.repeat(np.arange(X.shape[0]), np.diff(self.indptr)), self.indices] = self.data
        return X


# ---- layout-generic helpers ------------------------------------------------
# A dense row is X[j], a 1-D array; a CSR row is (indices, data, lo, hi), its
# entries being k in range(lo, hi): the whole arrays and bounds, since slicing
# them per row costs ~15 ns a row (2x on value_grad at d = 10).
# numba's IR inliner, inlining `_dot` twice into one kernel, leaves the loop's accumulator
# outside the caller's scope, and a pedantic SSA check warns at the first compile ("This
# warning came from an internal pedantic check. Please report ...": numba#9489, #8130).
# The check is bookkeeping; the compiled code is right (tests/test_kernels.py holds the
# kernels to NumPy's results).  Silenced for this helper's variables only, so that a
# user's first run shows no report request that is not theirs to make (tests/conftest.py
# gives pytest the same filter, which its per-test warning capture would drop).
INLINER_WARNING = r"variable '_(dense|csr)_dot_v\d+_"
warnings.filterwarnings("ignore", message=INLINER_WARNING, category=NumbaIRAssumptionWarning)


def _by_layout(dense, csr, on=0):
    """A jit-only helper that runs `dense` if its argument number `on` is an
    array (a dense matrix or row) and `csr` otherwise, chosen at compile time
    and inlined into the caller's numba IR (like njit(inline="always"))."""
    def helper(*args):
        raise TypeError("jit-only helper")

    @overload(helper, inline="always", strict=False)
    def _choose(*args):
        return dense if isinstance(args[on], types.Array) else csr
    return helper


def _dense_shape(X):
    return X.shape


def _csr_shape(X):
    return X.indptr.shape[0] - 1, X.ncols


def _dense_row(X, j):
    return X[j]


def _csr_row(X, j):
    return X.indices, X.data, X.indptr[j], X.indptr[j + 1]


def _dense_dot(x, w):
    acc = 0.0
    for k in range(x.shape[0]):
        acc += x[k] * w[k]
    return acc


def _csr_dot(x, w):
    idx, val, lo, hi = x
    acc = 0.0
    for k in range(lo, hi):
        acc += val[k] * w[idx[k]]
    return acc


def _dense_axpy(a, x, out):
    for k in range(x.shape[0]):
        out[k] += a * x[k]


def _csr_axpy(a, x, out):
    idx, val, lo, hi = x
    for k in range(lo, hi):
        out[idx[k]] += a * val[k]


def _dense_add_outer_upper(c, x, H):
    d = x.shape[0]
    for a in range(d):
        ca = c * x[a]
        Ha, xa = H[a, a:], x[a:]   # 1-D views: the loop vectorizes (3-4x at d >= 100)
        for b in range(d - a):
            Ha[b] += ca * xa[b]


def _csr_add_outer_upper(c, x, H):
    idx, val, lo, hi = x  # idx ascending, so (idx[a], idx[b]) with b >= a is upper
    for a in range(lo, hi):
        ca = c * val[a]
        row = idx[a]
        for b in range(a, hi):
            H[row, idx[b]] += ca * val[b]


#: the dense Gram's tiles of H: GRAM_TILE[0] rows by GRAM_TILE[1] columns (32 KB of H, in
#: the first-level cache, where each row's update once streamed the whole triangle:
#: measured 200 rows, d = 2,000: 161 -> 51 ms; d = 5,000: 1.85 -> 0.34 s; d = 1,000: 2.3x)
GRAM_TILE = (32, 128)


@numba.njit(cache=True, inline="always")
def _gram_tile(H, X, coef, rows, a0, a1, b0, b1):
    """H[a, b] += Σ_j (coef_j x_ja) x_jb for a in [a0, a1), b in [max(a, b0), b1), over
    ``rows`` in order, four rows a pass (each entry's terms still added one by one)."""
    m, k = rows.shape[0], 0
    while k + 4 <= m:
        j0, j1, j2, j3 = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
        x0, x1, x2, x3 = X[j0], X[j1], X[j2], X[j3]
        for a in range(a0, min(a1, b1)):
            lo = max(b0, a)
            Ha = H[a, lo:b1]                     # 1-D views: the loop vectorizes
            y0, y1, y2, y3 = x0[lo:b1], x1[lo:b1], x2[lo:b1], x3[lo:b1]
            c0, c1 = coef[j0] * x0[a], coef[j1] * x1[a]
            c2, c3 = coef[j2] * x2[a], coef[j3] * x3[a]
            for b in range(b1 - lo):
                Ha[b] = (((Ha[b] + c0 * y0[b]) + c1 * y1[b]) + c2 * y2[b]) + c3 * y3[b]
        k += 4
    for j in rows[k:]:
        x = X[j]
        for a in range(a0, min(a1, b1)):
            lo = max(b0, a)
            Ha, y, c = H[a, lo:b1], x[lo:b1], coef[j] * x[a]
            for b in range(b1 - lo):
                Ha[b] += c * y[b]


def _dense_gram(X, coef):
    """The upper triangle of Σ_j coef_j x_j x_jᵀ over the rows with coef_j ≠ 0, tile by
    tile of H (:data:`GRAM_TILE`, :func:`_gram_tile`): each entry still adds its terms
    one by one in the order of the rows, (coef_j x_ja) x_jb, so the sum is the one of a
    row-by-row loop, bit for bit (and the CSR path's)."""
    d = X.shape[1]
    H = np.zeros((d, d))
    rows = np.flatnonzero(coef != 0.0)
    tile_a, tile_b = GRAM_TILE
    for a0 in range(0, d, tile_a):
        for b0 in range(a0, d, tile_b):
            _gram_tile(H, X, coef, rows, a0, min(a0 + tile_a, d), b0, min(b0 + tile_b, d))
    return H


def _csr_gram(X, coef):
    """The upper triangle of Σ_j coef_j x_j x_jᵀ, a CSR row's nonzeros at a time."""
    n, d = _shape(X)
    H = np.zeros((d, d))
    for j in range(n):
        if coef[j] != 0.0:
            _add_outer_upper(coef[j], _row(X, j), H)
    return H


_shape = _by_layout(_dense_shape, _csr_shape)
_row = _by_layout(_dense_row, _csr_row)
_dot = _by_layout(_dense_dot, _csr_dot)
_axpy = _by_layout(_dense_axpy, _csr_axpy, on=1)
_add_outer_upper = _by_layout(_dense_add_outer_upper, _csr_add_outer_upper, on=1)
_gram = _by_layout(_dense_gram, _csr_gram)


# ---- kernels -----------------------------------------------------------------
@numba.njit(cache=True, inline="always")
def _logistic_point(z, y):
    """Per-sample (loss, sigma(z) - y, sigma(z)(1 - sigma(z))), stable."""
    e = math.exp(-abs(z))
    q = e / (1.0 + e)
    if z >= 0.0:
        return math.log1p(e) + (1.0 - y) * z, (1.0 - y) - q, q * (1.0 - q)
    return math.log1p(e) - y * z, q - y, q * (1.0 - q)


@numba.njit(cache=True, inline="always")
def _finish_sym(H, S):
    d = H.shape[0]
    for a in range(d):
        for b in range(a, d):
            H[a, b] /= S
            H[b, a] = H[a, b]
    return H


@numba.njit(cache=True)
def logistic_value(X, y, s, w):
    val = 0.0
    for j in range(_shape(X)[0]):
        val += s[j] * _logistic_point(_dot(_row(X, j), w), y[j])[0]
    return val / np.sum(s)


@numba.njit(cache=True, inline="always")
def _weighted_point(z, y, s, logistic):
    """``(s·ℓ(z; y), ℓ'(z; y))`` of one row: ℓ the logistic loss, else ½(z − y)²."""
    if logistic:
        loss, r, _ = _logistic_point(z, y)
        return s * loss, r
    r = z - y
    return 0.5 * s * r * r, r


@numba.njit(cache=True)
def row_value_grad(X, y, s, w, logistic):
    """(1/S) Σⱼ sⱼ ℓ(xⱼᵀw; yⱼ) and its gradient, S = Σⱼ sⱼ (:func:`_weighted_point`)."""
    n, d = _shape(X)
    val = 0.0
    g = np.zeros(d)
    for j in range(n):
        x = _row(X, j)
        v, r = _weighted_point(_dot(x, w), y[j], s[j], logistic)
        val += v
        _axpy(s[j] * r, x, g)
    S = np.sum(s)
    return val / S, g / S


def logistic_value_grad(X, y, s, w):
    return row_value_grad(X, y, s, w, True)


def lsq_value_grad(X, y, s, w):
    return row_value_grad(X, y, s, w, False)


@numba.njit(cache=True)
def logistic_value_grad_hess(X, y, s, w):
    n, d = _shape(X)
    val = 0.0
    g = np.zeros(d)
    H = np.zeros((d, d))
    for j in range(n):
        x = _row(X, j)
        loss, r, h = _logistic_point(_dot(x, w), y[j])
        val += s[j] * loss
        _axpy(s[j] * r, x, g)
        _add_outer_upper(s[j] * h, x, H)
    S = np.sum(s)
    return val / S, g / S, _finish_sym(H, S)


@numba.njit(cache=True)
def row_grad_rows(X, y, s, w, idx, logistic):
    """The gradient of :func:`row_value_grad` over the rows ``idx`` alone."""
    g = np.zeros(_shape(X)[1])
    S = 0.0
    for j in idx:
        x = _row(X, j)
        _axpy(s[j] * _weighted_point(_dot(x, w), y[j], s[j], logistic)[1], x, g)
        S += s[j]
    return g / S


def logistic_grad_rows(X, y, s, w, idx):
    return row_grad_rows(X, y, s, w, idx, True)


def lsq_grad_rows(X, y, s, w, idx):
    return row_grad_rows(X, y, s, w, idx, False)


@numba.njit(cache=True)
def lsq_hess(X, s):
    n, d = _shape(X)
    H = np.zeros((d, d))
    for j in range(n):
        _add_outer_upper(s[j], _row(X, j), H)
    return _finish_sym(H, np.sum(s))


@numba.njit(cache=True)
def logistic_hessvec(X, y, s, w, v):
    """(1/S) Xᵀ diag(s σ(z)(1 − σ(z))) X v, z = Xw: three passes over the rows, no d×d."""
    z = _matvec(X, w)
    omega = np.empty(z.shape[0])
    for j in range(z.shape[0]):
        omega[j] = s[j] * _logistic_point(z[j], y[j])[2]
    return gram_times(X, omega, v) / np.sum(s)


@numba.njit(cache=True)
def gram_times(X, omega, v):
    """Xᵀ diag(ω) X v: two passes over the rows, no d×d."""
    out = np.zeros(_shape(X)[1])
    for j in range(_shape(X)[0]):
        x = _row(X, j)
        _axpy(omega[j] * _dot(x, v), x, out)
    return out


@numba.njit(cache=True)
def _matvec(X, w):
    n = _shape(X)[0]
    z = np.empty(n)
    for j in range(n):
        z[j] = _dot(_row(X, j), w)
    return z


@numba.njit(cache=True)
def lsq_hessvec(X, s, v):
    """(1/S) Xᵀ diag(s) X v."""
    return gram_times(X, s, v) / np.sum(s)


# ---- stacked row losses (constrfl.stacked) ------------------------------------
@numba.njit(cache=True, inline="always")
def stacked_terms(X, y, s, term, logistic, w, grad):
    """Per term k of stacked row losses: Tₖ = Σ_{j: term[j] = k} s_j ℓ(x_jᵀw; y_j), ℓ the
    logistic loss if ``logistic[k]`` else ½(z − y)² (s already divided by each term's
    S); with ``grad`` also ∇Tₖ (rows of G, else G is (K, 0)); and per row ℓ''(x_jᵀw)."""
    n, d = _shape(X)
    K = logistic.shape[0]
    t = np.zeros(K)
    G = np.zeros((K, d if grad else 0))
    h = np.ones(n)
    for j in range(n):
        x = _row(X, j)
        k = term[j]
        z = _dot(x, w)
        if logistic[k]:
            loss, r, hj = _logistic_point(z, y[j])
            h[j] = hj
        else:
            r = z - y[j]
            loss = 0.5 * r * r
        t[k] += s[j] * loss
        if grad:
            _axpy(s[j] * r, x, G[k])
    return t, G, h


@numba.njit(cache=True, inline="always")
def _linearized_terms(X, y, s, term, logistic, A, x, step):
    """Tₖ(x) + ∇Tₖ(x)ᵀstep for each term k some constraint row of A uses (0 for the
    others): a pass over those terms' rows, two dot products a row."""
    K = logistic.shape[0]
    used = np.zeros(K, dtype=np.bool_)
    for j in range(A.shape[0]):
        for k in range(K):
            used[k] |= A[j, k] != 0.0
    out = np.zeros(K)
    for j in range(_shape(X)[0]):
        k = term[j]
        if not used[k]:
            continue
        x_j = _row(X, j)
        z = _dot(x_j, x)
        if logistic[k]:
            loss, r, _ = _logistic_point(z, y[j])
        else:
            r = z - y[j]
            loss = 0.5 * r * r
        out[k] += s[j] * (loss + r * _dot(x_j, step))
    return out


@numba.njit(cache=True, inline="always")
def stacked_gram(X, s, term, h, b):
    """The upper triangle of Σ_j b[term[j]] s_j h_j x_j x_jᵀ (the lower triangle is
    zero; :func:`_gram`)."""
    n = _shape(X)[0]
    coef = np.empty(n)
    for j in range(n):
        coef[j] = b[term[j]] * s[j] * h[j]
    return _gram(X, coef)


@numba.njit(cache=True, inline="always")
def stacked_penalized(t, A, o, a0, o0, mu, beta):
    """From the term values t: the value a₀ᵀt + o₀ + ‖p‖²/2β, c = At + o, p = [μ + βc]₊
    and the terms' weights b = a₀ + Aᵀp in the gradient and Hessian."""
    m, K = A.shape
    c = o.copy()
    p = np.zeros(m)
    b = a0.copy()
    val = o0
    for k in range(K):
        val += a0[k] * t[k]
    for j in range(m):
        for k in range(K):
            c[j] += A[j, k] * t[k]
        p[j] = max(mu[j] + beta * c[j], 0.0)
        val += p[j] * p[j] / (2.0 * beta)
        for k in range(K):
            b[k] += A[j, k] * p[j]
    return val, c, p, b


@numba.njit(cache=True, inline="always")
def _stacked_gradient(X, y, s, term, logistic, A, o, a0, o0, mu, beta, w, grad):
    """The value of :func:`stacked_augmented` at w, its gradient (if ``grad``, else
    empty), c, and what its Hessian needs (p, b, ∇Tₖ, the rows' ℓ'')."""
    t, G, h = stacked_terms(X, y, s, term, logistic, w, grad)
    K, d = A.shape[1], w.shape[0]
    val, c, p, b = stacked_penalized(t, A, o, a0, o0, mu, beta)
    g = np.zeros(d if grad else 0)
    if grad:
        for k in range(K):
            for a in range(d):
                g[a] += b[k] * G[k, a]
    return val, g, c, p, b, G, h


@numba.njit(cache=True, inline="always")
def _stacked_hessian(X, s, term, A, beta, p, b, G, h):
    """The Hessian of :func:`stacked_augmented` from the pieces of
    :func:`_stacked_gradient`: Σₖ bₖ∇²Tₖ + β Σ_{j: pⱼ > 0} ∇cⱼ∇cⱼᵀ."""
    m, K = A.shape
    H = stacked_gram(X, s, term, h, b)
    gj = np.empty(H.shape[0])
    for j in range(m):
        if p[j] > 0.0:                       # β ∇cⱼ∇cⱼᵀ of an active row
            gj[:] = 0.0
            for k in range(K):
                _axpy(A[j, k], G[k], gj)     # ∇cⱼ = Σₖ A_jk ∇Tₖ
            _add_outer_upper(beta, gj, H)
    return _finish_sym(H, 1.0)


NO_STEP = np.zeros(0)       # stacked_evaluate's ``around``: no step, the AL's own weights p


def stacked_augmented(X, y, s, term, logistic, A, o, a0, o0, mu, beta, w, order):
    """``a₀ᵀT + o₀ + ‖[μ + β(AT + o)]₊‖²/2β`` at w (T of :func:`stacked_terms`), with its
    gradient (order ≥ 1, else empty) and Hessian (order 2, else empty), c = AT + o, and
    whether the value and the sums of gradient and Hessian are finite
    (:func:`stacked_evaluate` at the one row w)."""
    val, g, H, c, finite = stacked_evaluate(X, y, s, term, logistic, A, o, a0, o0, mu,
                                            beta, w[None], order, NO_STEP, 1.0)
    return float(val[0]), g, H, c, finite


def stacked_values(X, y, s, term, logistic, A, o, a0, o0, mu, beta, W):
    """The value of :func:`stacked_augmented` at each row of W, and whether all are
    finite (:func:`stacked_evaluate`, order 0)."""
    out, _, _, _, finite = stacked_evaluate(X, y, s, term, logistic, A, o, a0, o0, mu, beta,
                                            W, 0, NO_STEP, 1.0)
    return out, finite


@numba.njit(cache=True)
def stacked_evaluate(X, y, s, term, logistic, A, o, a0, o0, mu, beta, W, order, around,
                     share):
    """:func:`stacked_augmented`'s value at each row of W and, at its last row, the
    gradient (order ≥ 1), Hessian (order 2) and c; whether the values and the sums of
    gradient and Hessian are finite.  One compiled function serves a point's
    derivatives and the values at the trial points, its helpers inlined: the demo's
    first run compiles it in about half the time stacked_augmented and stacked_values
    took when each was compiled, over compiled helpers of its own.  ``around`` (empty:
    none): the start x of the step to w, the Hessian then weighing the active rows'
    ∇²cⱼ by θyⱼ + (1 − θ)pⱼ, θ = ``share``, yⱼ = [μⱼ + β(cⱼ(x) + ∇cⱼ(x)ᵀ(w − x))]₊ (the
    primal-dual weights of :meth:`~constrfl.augmented.AugmentedTerm.__call__`: one pass
    more over the constraints' rows, :func:`_linearized_terms`)."""
    vals = np.empty(W.shape[0])
    g, c, p, b, h = np.empty(0), np.empty(0), np.empty(0), np.empty(0), np.empty(0)
    G = np.empty((0, 0))
    for i in range(W.shape[0]):
        vals[i], g, c, p, b, G, h = _stacked_gradient(X, y, s, term, logistic, A, o, a0, o0,
                                                      mu, beta, W[i], order >= 1)
    if order < 2:
        return vals, g, np.zeros((0, 0)), c, np.isfinite(np.sum(vals) + np.sum(g))
    if around.size:         # Σₖ bₖ∇²Tₖ, bₖ = a₀ₖ + Σⱼ A_jk (θyⱼ + (1 − θ)pⱼ) (pⱼ > 0)
        linear = _linearized_terms(X, y, s, term, logistic, A, around, W[-1] - around)
        b = a0.copy()
        for j in range(A.shape[0]):
            if p[j] > 0.0:
                cj = o[j]
                for k in range(A.shape[1]):
                    cj += A[j, k] * linear[k]
                weight = share * max(mu[j] + beta * cj, 0.0) + (1.0 - share) * p[j]
                for k in range(A.shape[1]):
                    b[k] += A[j, k] * weight
    H = _stacked_hessian(X, s, term, A, beta, p, b, G, h)
    return vals, g, H, c, np.isfinite(np.sum(vals) + np.sum(g) + np.sum(H))


@numba.njit(cache=True)
def _stacked_gradient_at(X, y, s, term, logistic, A, o, a0, o0, mu, beta, w):
    """:func:`_stacked_gradient` with the gradient, compiled once on its own: the local
    Newton method evaluates it at two places (inlining it twice would type it twice)."""
    return _stacked_gradient(X, y, s, term, logistic, A, o, a0, o0, mu, beta, w, True)


@numba.njit(cache=True)
def _shift(val, g, alpha, center, x):
    """``val + (α/2)‖x − center‖²``; the quadratic's gradient is added to g in place."""
    for a in range(x.shape[0]):
        r = x[a] - center[a]
        val += 0.5 * alpha * r * r
        g[a] += alpha * r
    return val


@numba.njit(cache=True)
def _metric_shift(val, g, J, center, x):
    """``val + ½‖J(x − center)‖²``; its gradient Jᵀ J(x − center) is added to g in place."""
    for j in range(J.shape[0]):
        r = 0.0
        for a in range(x.shape[0]):
            r += J[j, a] * (x[a] - center[a])
        val += 0.5 * r * r
        for a in range(x.shape[0]):
            g[a] += J[j, a] * r
    return val


@numba.njit(cache=True)
def _max_abs(g):
    """np.max(np.abs(g)) for a non-empty g without NaN (the same number), as a loop:
    np.max(np.abs(·)) took 0.5 s of the ADMM's first compilation."""
    out = 0.0
    for a in range(g.shape[0]):
        out = max(out, abs(g[a]))
    return out


@numba.njit(cache=True)
def cg_step(d, r, p, Hp, alpha):
    """One conjugate-gradient update in place: d ← d + αp, r ← r − αHp (each entry's
    product rounded, then the sum: NumPy's ``d += alpha * p`` bit for bit)."""
    _axpy(alpha, p, d)
    _axpy(-alpha, Hp, r)


@numba.njit(cache=True)
def add_rows_times(out, L, s):
    """out ← out + Lᵀs, one row of L at a time (for one row NumPy's ``out + L.T @ s`` bit
    for bit: one product an entry, where NumPy's matmul of a single row takes ten times
    as long at d = 10⁵)."""
    for k in range(L.shape[0]):
        _axpy(s[k], L[k], out)


@numba.njit(cache=True)
def cg_direction_update(p, r, beta):
    """p ← βp + r in place (NumPy's ``p *= beta; p += r`` bit for bit, one pass)."""
    for a in range(p.shape[0]):
        p[a] = p[a] * beta + r[a]


@numba.njit(cache=True)
def metric_times(rho, J, x):
    """(ρI + JᵀJ)x."""
    out = rho * x
    for j in range(J.shape[0]):
        r = _dot(J[j], x)
        for a in range(x.shape[0]):
            out[a] += J[j, a] * r
    return out


@numba.njit(cache=True)
def step_accepted(f_new, f, slope, t, r_new, r):
    """Whether the Newton methods take the step of length t along a direction of slope
    ``slope`` from a point of value f and stationarity residual r (‖∇f‖∞, or the prox
    step's distance) to one of value ``f_new`` and residual ``r_new`` (NaN: not known):
    Armijo's decrease, or (near the solution, where f stalls at rounding level) a halving
    of the residual without an increase of f beyond 10⁻¹²(1 + |f|); never a value that is
    not finite.  The one test of the local Newton method (compiled in
    :func:`stacked_minimize`, run as Python by
    :func:`constrfl.local.accept_step`) and the server's."""
    if not math.isfinite(f_new):
        return False
    if f_new <= f + ARMIJO * t * slope:
        return True
    return r_new <= 0.5 * r and f_new <= f + 1e-12 * (1.0 + abs(f))


@numba.njit(cache=True)
def stacked_minimize(X, y, s, term, logistic, A, o, a0, o0, mu, beta, alpha, center, x0,
                     tol, max_iter, J, metric_center):
    """:func:`constrfl.local.minimize_smooth` (Newton, backtracking, the same
    acceptance test :func:`step_accepted`) on :func:`stacked_augmented` +
    (α/2)‖x − center‖² + ½‖J(x − metric_center)‖² (J may have no rows), compiled;
    a Hessian is formed only where a step is taken, from the pieces of the gradient's
    pass.  Returns ``(x, iterations, ‖∇‖∞, status)``: status 1 converged, 0 not (the
    line search or ``max_iter`` ran out), −1 handed back at x (a Hessian that is not
    positive definite, or a value that is not finite: the generic solver takes over)."""
    x = x0.copy()
    f, g, _, p, b, G, h = _stacked_gradient_at(X, y, s, term, logistic, A, o, a0, o0, mu,
                                               beta, x)
    f = _metric_shift(_shift(f, g, alpha, center, x), g, J, metric_center, x)
    if not np.isfinite(f + np.sum(g)):
        return x, 0, np.inf, -1
    JtJ = J.T @ J if J.shape[0] else np.zeros((0, 0))
    r = _max_abs(g)                           # g is finite here
    for it in range(max_iter):
        if r <= tol:
            return x, it, r, 1
        H = _stacked_hessian(X, s, term, A, beta, p, b, G, h)
        if J.shape[0]:
            H += JtJ
        for a in range(x.shape[0]):
            H[a, a] += alpha
        L, ok = _cholesky(H)
        if not ok:
            return x, it, r, -1
        step = -cholesky_solve(L, g)
        slope = _dot(g, step)
        if not slope < 0.0:
            return x, it, r, -1
        t = 1.0
        while True:
            x_new = x + t * step
            f_new, g_new, _, p, b, G, h = _stacked_gradient_at(X, y, s, term, logistic, A,
                                                               o, a0, o0, mu, beta, x_new)
            f_new = _metric_shift(_shift(f_new, g_new, alpha, center, x_new), g_new, J,
                                  metric_center, x_new)
            if not np.isfinite(f_new + np.sum(g_new)):
                return x, it, r, -1
            r_new = _max_abs(g_new)
            if step_accepted(f_new, f, slope, t, r_new, r):
                break
            t *= 0.5
            if t < 1e-12:
                return x, it, r, 0
        x, f, g, r = x_new, f_new, g_new, r_new
    return x, max_iter, r, 1 if r <= tol else 0


@numba.njit(cache=True)
def stacked_admm_step(X, y, s, term, logistic, A, o, a0, o0, mu, beta, gamma, wk, w, u,
                      lam, rho, rho_next, J, relax, tol, max_iter):
    """The ``admm.step`` handler's arithmetic for a stacked party without equalities, in
    one call: with φ = :func:`stacked_augmented` + (γ/2)‖· − wᵏ‖² and the penalty
    R = ρI + JᵀJ (R' with ρ' = ``rho_next``),

        e = ∇φ(w) + λ − R(w − u)                       (22), the server's R
        κ = Definition 1 at (w, [μ + βc(w)]₊), in the 2-norm squared
        ŵ = relax·w + (1 − relax)·u
        u⁺ = argmin AL + (γ+ρ')/2‖· − m‖² + ½‖J(· − ŵ)‖²,  m = (γwᵏ + ρ'ŵ − λ)/(γ+ρ')
                                                       (19), from u
        λ⁺ = λ + R'(u⁺ − ŵ)                            (20).

    Returns ``(e, κ², u⁺, λ⁺, status)``, status that of :func:`stacked_minimize`, or −2
    when the evaluation at w is not finite (then only status is meaningful)."""
    val, g, c, mu_plus, _, _, _ = _stacked_gradient_at(X, y, s, term, logistic, A, o, a0,
                                                       o0, mu, beta, w)
    d = w.shape[0]
    if not np.isfinite(val + np.sum(g)):
        return g, np.nan, u, lam, -2
    Rd = metric_times(rho, J, w - u)
    e = np.empty(d)
    w_hat = np.empty(d)
    m = np.empty(d)
    alpha = gamma + rho_next
    for a in range(d):
        e[a] = g[a] + gamma * (w[a] - wk[a]) + lam[a] - Rd[a]
        w_hat[a] = relax * w[a] + (1.0 - relax) * u[a]
        m[a] = (gamma * wk[a] + rho_next * w_hat[a] - lam[a]) / alpha
    kappa = definition1_sq(c, np.zeros(0), mu_plus, 0.0)   # μ⁺ = [μ + βc(w)]₊ = p
    x, _, _, status = stacked_minimize(X, y, s, term, logistic, A, o, a0, o0, mu, beta,
                                       alpha, m, u, tol, max_iter, J, w_hat)
    lam_new = lam + metric_times(rho_next, J, x - w_hat)
    return e, kappa, x, lam_new, status


# ---- residuals and distances (constrfl.residuals, the ADMM handler) -------------------
@numba.njit(cache=True)
def max_abs_diff(a, b):
    """‖a − b‖∞ (NaN if an entry is NaN): 10× NumPy's at tens of entries."""
    out = 0.0
    for j in range(a.shape[0]):
        r = abs(a[j] - b[j])
        if math.isnan(r):
            return np.nan
        out = max(out, r)
    return out


@numba.njit(cache=True)
def _definition1_rows(c, h, mu, atol, squared):
    """The rows' residuals rⱼ = |cⱼ| where μⱼ > atol, [cⱼ]₊ where |μⱼ| ≤ atol, and |hⱼ|:
    their max, or with ``squared`` Σ rⱼ²; inf if some μⱼ < −atol, NaN if a value is
    NaN."""
    out = 0.0
    for j in range(c.shape[0]):
        if mu[j] < -atol:
            return np.inf
    for j in range(c.shape[0] + h.shape[0]):
        r = (abs(c[j]) if mu[j] > atol else max(c[j], 0.0)) if j < c.shape[0] \
            else abs(h[j - c.shape[0]])
        if math.isnan(r):
            return np.nan
        out = out + r * r if squared else max(out, r)
    return out


@numba.njit(cache=True)
def definition1(c, h, mu, atol):
    """max over the rows of Definition 1's residuals (:func:`_definition1_rows`)."""
    return _definition1_rows(c, h, mu, atol, False)


@numba.njit(cache=True)
def definition1_sq(c, h, mu, atol):
    """Σ over the rows of Definition 1's residuals squared (its 2-norm, squared)."""
    return _definition1_rows(c, h, mu, atol, True)


# ---- symmetric matrices on the wire (constrfl.messages) --------------
def pack_upper(H):
    """The upper triangle of H, row by row (NumPy's boolean indexing takes the entries in
    that order, as fast as a compiled loop and with nothing to compile)."""
    return H[np.tri(H.shape[0], dtype=bool).T]


@numba.njit(cache=True)
def unpack_upper(tri, d):
    """The symmetric (d, d) matrix with upper triangle ``tri`` (row by row)."""
    H = np.empty((d, d))
    k = 0
    for a in range(d):
        for b in range(a, d):
            H[a, b] = tri[k]
            H[b, a] = tri[k]
            k += 1
    return H


# ---- linear algebra (constrfl.local) ----------------------------------
@numba.njit(cache=True)
def _cholesky(H):
    """``(L, True)`` with L Lᵀ = H, L lower triangular, or ``(·, False)`` when H is not
    (numerically) positive definite (a pivot ≤ 0 or not finite)."""
    d = H.shape[0]
    L = np.zeros((d, d))
    for a in range(d):
        for b in range(a + 1):
            acc = H[a, b]
            for e in range(b):
                acc -= L[a, e] * L[b, e]
            if a == b:
                if not acc > 0.0:
                    return L, False
                L[a, a] = math.sqrt(acc)
            else:
                L[a, b] = acc / L[b, b]
    return L, True


@numba.njit(cache=True)
def cholesky_solve(L, b):
    """x with L Lᵀ x = b, L lower triangular (forward, then back substitution)."""
    d = b.shape[0]
    y = np.empty(d)
    for a in range(d):
        acc = b[a]
        La = L[a]
        for e in range(a):
            acc -= La[e] * y[e]
        y[a] = acc / La[a]
    x = np.empty(d)
    for a in range(d - 1, -1, -1):
        acc = y[a]
        for e in range(a + 1, d):
            acc -= L[e, a] * x[e]
        x[a] = acc / L[a, a]
    return x
