"""Numba kernels for weighted logistic and least-squares empirical risks.

Notation: X is (N, d) C-contiguous float64, y (N,), sample weights s (N,)
(all ones when unweighted), w (d,), z = X @ w, S = sum(s).

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

All kernels make one sequential pass over the rows in a fixed order (no
fastmath, no parallelism), so results are bit-reproducible.  The `*_rows`
kernels restrict the weighted mean to rows idx (int64, duplicates count
repeatedly, normalised by sum(s[idx])), for minibatch SGD.
"""
import math

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _dot(x, w):
    acc = 0.0
    for k in range(x.shape[0]):
        acc += x[k] * w[k]
    return acc


@numba.njit(cache=True, inline="always")
def _logistic_point(z, y):
    """Per-sample (loss, sigma(z) - y, sigma(z)(1 - sigma(z))), stable."""
    e = math.exp(-abs(z))
    q = e / (1.0 + e)
    if z >= 0.0:
        return math.log1p(e) + (1.0 - y) * z, (1.0 - y) - q, q * (1.0 - q)
    return math.log1p(e) - y * z, q - y, q * (1.0 - q)


@numba.njit(cache=True, inline="always")
def _axpy(a, x, out):
    for k in range(x.shape[0]):
        out[k] += a * x[k]


@numba.njit(cache=True, inline="always")
def _add_outer_upper(c, x, H):
    d = x.shape[0]
    for a in range(d):
        ca = c * x[a]
        for b in range(a, d):
            H[a, b] += ca * x[b]


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
    for j in range(X.shape[0]):
        val += s[j] * _logistic_point(_dot(X[j], w), y[j])[0]
    return val / np.sum(s)


@numba.njit(cache=True)
def logistic_value_grad(X, y, s, w):
    val = 0.0
    g = np.zeros(X.shape[1])
    for j in range(X.shape[0]):
        loss, r, _ = _logistic_point(_dot(X[j], w), y[j])
        val += s[j] * loss
        _axpy(s[j] * r, X[j], g)
    S = np.sum(s)
    return val / S, g / S


@numba.njit(cache=True)
def logistic_value_grad_hess(X, y, s, w):
    d = X.shape[1]
    val = 0.0
    g = np.zeros(d)
    H = np.zeros((d, d))
    for j in range(X.shape[0]):
        loss, r, h = _logistic_point(_dot(X[j], w), y[j])
        val += s[j] * loss
        _axpy(s[j] * r, X[j], g)
        _add_outer_upper(s[j] * h, X[j], H)
    S = np.sum(s)
    return val / S, g / S, _finish_sym(H, S)


@numba.njit(cache=True)
def logistic_hessvec(X, s, w, v):
    out = np.zeros(X.shape[1])
    for j in range(X.shape[0]):
        h = _logistic_point(_dot(X[j], w), 0.0)[2]
        _axpy(s[j] * h * _dot(X[j], v), X[j], out)
    return out / np.sum(s)


@numba.njit(cache=True)
def logistic_grad_rows(X, y, s, w, idx):
    g = np.zeros(X.shape[1])
    S = 0.0
    for j in idx:
        _axpy(s[j] * _logistic_point(_dot(X[j], w), y[j])[1], X[j], g)
        S += s[j]
    return g / S


@numba.njit(cache=True)
def lsq_value_grad(X, y, s, w):
    val = 0.0
    g = np.zeros(X.shape[1])
    for j in range(X.shape[0]):
        r = _dot(X[j], w) - y[j]
        val += 0.5 * s[j] * r * r
        _axpy(s[j] * r, X[j], g)
    S = np.sum(s)
    return val / S, g / S


@numba.njit(cache=True)
def lsq_hess(X, s):
    d = X.shape[1]
    H = np.zeros((d, d))
    for j in range(X.shape[0]):
        _add_outer_upper(s[j], X[j], H)
    return _finish_sym(H, np.sum(s))


@numba.njit(cache=True)
def lsq_grad_rows(X, y, s, w, idx):
    g = np.zeros(X.shape[1])
    S = 0.0
    for j in idx:
        _axpy(s[j] * (_dot(X[j], w) - y[j]), X[j], g)
        S += s[j]
    return g / S
