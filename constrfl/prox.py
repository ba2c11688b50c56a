"""Prox-friendly regularizers P (ALGORITHMS.md §1–2).

Each :class:`Regularizer` gives

* ``value(w)`` (``inf`` outside the domain of an indicator);
* ``prox(v, t) = argmin_x t·P(x) + ½‖x − v‖²``, exactly;
* ``dist(w, g, atol=0)``: the stationarity residual ``dist∞(0, g + ∂P(w))`` of §2, exact.
  A coordinate (or a ball constraint) counts as *at* its kink or bound when it is within
  ``atol`` of it; the solvers' iterates come out of ``prox`` and sit exactly there, while
  interior-point reference solutions (cvxpy) need a small ``atol``;
* ``cvxpy(w)``: ``(expression, constraints)`` for a cvxpy variable ``w``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Regularizer", "Zero", "L1", "SquaredL2", "ElasticNet", "Box", "NonNegative",
           "L2Ball", "L1Ball", "Nuclear"]


def _positive(x, name, owner, allow_zero=True):
    x = float(x)
    if not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise ValueError(f"{owner}: {name} must be a finite {'non-negative' if allow_zero else 'positive'} "
                         f"number, got {x}")
    return x


def _soft(v, k):
    return np.sign(v) * np.maximum(np.abs(v) - k, 0.0)


def _l1_dist(w, g, lam, atol):
    """Per-coordinate ``dist(0, g + lam·∂|·|(w))`` for the L1 term, as a vector."""
    at_zero = np.abs(w) <= atol
    return np.where(at_zero, np.maximum(np.abs(g) - lam, 0.0), np.abs(g + lam * np.sign(w)))


def _min_upper_envelope(a, b):
    """``min_{s ≥ 0} max_k (a_k + b_k s)``.

    The envelope is the max of U (increasing lines), D (decreasing) and a constant; it is
    minimized where U meets D, found by bisection on the monotone U − D.
    """
    inc, dec, flat = b > 0, b < 0, b == 0
    const = a[flat].max() if flat.any() else -np.inf
    if not dec.any():
        return max(float(np.max(a)), const)
    if not inc.any():
        return const                                # D falls without bound
    U = lambda s: np.max(a[inc] + b[inc] * s)      # noqa: E731
    D = lambda s: np.max(a[dec] + b[dec] * s)      # noqa: E731
    if U(0.0) >= D(0.0):
        return max(U(0.0), const)
    lo, hi = 0.0, 1.0
    while U(hi) < D(hi):
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if U(mid) < D(mid) else (lo, mid)
    return max(min(max(U(lo), D(lo)), max(U(hi), D(hi))), const)


class Regularizer:
    """Base class of the regularizers P."""

    separable = False     # P(w) = Σⱼ pⱼ(wⱼ): its prox acts coordinate by coordinate
    exact_dist = True     # dist is the exact dist∞(0, g + ∂P(w)); False: a stand-in

    def value(self, w):
        raise NotImplementedError

    def prox(self, v, t):
        raise NotImplementedError

    def dist(self, w, g, atol=0.0):
        raise NotImplementedError

    def cvxpy(self, w):
        raise NotImplementedError

    def check_dim(self, dim):
        """Raise ValueError if the regularizer's data do not fit dimension ``dim``."""

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Zero(Regularizer):
    """``P = 0``."""

    separable = True

    def value(self, w):
        return 0.0

    def prox(self, v, t):
        return np.array(v, dtype=np.float64)

    def dist(self, w, g, atol=0.0):
        return float(np.max(np.abs(g), initial=0.0))

    def cvxpy(self, w):
        return 0.0, []


class L1(Regularizer):
    """``P(w) = lam‖w‖₁``; prox is soft thresholding."""

    separable = True

    def __init__(self, lam):
        self.lam = _positive(lam, "lam", "L1")

    def value(self, w):
        return self.lam * float(np.abs(w).sum())

    def prox(self, v, t):
        return _soft(v, self.lam * t)

    def dist(self, w, g, atol=0.0):
        return float(np.max(_l1_dist(w, g, self.lam, atol), initial=0.0))

    def cvxpy(self, w):
        import cvxpy as cp
        return self.lam * cp.norm1(w), []


class SquaredL2(Regularizer):
    """``P(w) = (lam/2)‖w‖²`` (smooth; prox ``v/(1 + t·lam)``)."""

    separable = True

    def __init__(self, lam):
        self.lam = _positive(lam, "lam", "SquaredL2")

    def value(self, w):
        return 0.5 * self.lam * float(w @ w)

    def prox(self, v, t):
        return np.asarray(v, dtype=np.float64) / (1.0 + t * self.lam)

    def dist(self, w, g, atol=0.0):
        return float(np.max(np.abs(g + self.lam * w), initial=0.0))

    def cvxpy(self, w):
        import cvxpy as cp
        return 0.5 * self.lam * cp.sum_squares(w), []


class ElasticNet(Regularizer):
    """``P(w) = l1‖w‖₁ + (l2/2)‖w‖²``; prox ``soft(v, t·l1)/(1 + t·l2)``."""

    separable = True

    def __init__(self, l1, l2):
        self.l1 = _positive(l1, "l1", "ElasticNet")
        self.l2 = _positive(l2, "l2", "ElasticNet")

    def value(self, w):
        return self.l1 * float(np.abs(w).sum()) + 0.5 * self.l2 * float(w @ w)

    def prox(self, v, t):
        return _soft(v, self.l1 * t) / (1.0 + t * self.l2)

    def dist(self, w, g, atol=0.0):
        return float(np.max(_l1_dist(w, g + self.l2 * w, self.l1, atol), initial=0.0))

    def cvxpy(self, w):
        import cvxpy as cp
        return self.l1 * cp.norm1(w) + 0.5 * self.l2 * cp.sum_squares(w), []


class Box(Regularizer):
    """Indicator of ``{w : lower ≤ w ≤ upper}`` (scalars or arrays; ±inf allowed)."""

    separable = True

    def __init__(self, lower=-np.inf, upper=np.inf):
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        for name, a in (("lower", self.lower), ("upper", self.upper)):
            if a.ndim > 1 or np.any(np.isnan(a)):
                raise ValueError(f"Box: {name} must be a scalar or 1-D array without NaN")
        if np.any(self.lower > self.upper) or np.any(self.lower == np.inf) \
                or np.any(self.upper == -np.inf):
            raise ValueError("Box: need lower <= upper with finite points in between")

    def check_dim(self, dim):
        for name, a in (("lower", self.lower), ("upper", self.upper)):
            if a.ndim == 1 and a.shape != (dim,):
                raise ValueError(f"Box: {name} has shape {a.shape}, expected ({dim},)")

    def value(self, w):
        return 0.0 if np.all((w >= self.lower) & (w <= self.upper)) else np.inf

    def prox(self, v, t):
        return np.clip(v, self.lower, self.upper)

    def dist(self, w, g, atol=0.0):
        lo, up = w <= self.lower + atol, w >= self.upper - atol
        r = np.where(lo & up, 0.0, np.where(lo, np.maximum(-g, 0.0),
                                            np.where(up, np.maximum(g, 0.0), np.abs(g))))
        outside = (w < self.lower - atol) | (w > self.upper + atol)
        return float(np.inf if outside.any() else np.max(r, initial=0.0))

    def cvxpy(self, w):
        cons = []
        if np.any(np.isfinite(self.lower)):
            idx = np.flatnonzero(np.isfinite(np.broadcast_to(self.lower, w.shape)))
            cons.append(w[idx] >= np.broadcast_to(self.lower, w.shape)[idx])
        if np.any(np.isfinite(self.upper)):
            idx = np.flatnonzero(np.isfinite(np.broadcast_to(self.upper, w.shape)))
            cons.append(w[idx] <= np.broadcast_to(self.upper, w.shape)[idx])
        return 0.0, cons


class NonNegative(Box):
    """Indicator of ``{w ≥ 0}``."""

    def __init__(self):
        super().__init__(0.0, np.inf)

    def __repr__(self):
        return "NonNegative()"


class _Ball(Regularizer):
    """Indicator of a norm ball ``{‖w‖ ≤ radius}``; subclasses give the norm."""

    def __init__(self, radius):
        self.radius = _positive(radius, "radius", type(self).__name__, allow_zero=False)

    def value(self, w):
        return 0.0 if self._norm(w) <= self.radius * (1 + 1e-12) else np.inf

    def dist(self, w, g, atol=0.0):
        """On the sphere when within ``atol`` plus a relative 1e-12 (rounding of the
        projection) of it; ``inf`` outside."""
        n, slack = self._norm(w), atol + 1e-12 * self.radius
        if n > self.radius + slack:
            return np.inf
        if n < self.radius - slack:
            return float(np.max(np.abs(g), initial=0.0))
        return self._boundary_dist(w, g, atol)


class L2Ball(_Ball):
    """Indicator of ``{‖w‖₂ ≤ radius}``; on the sphere ``∂P(w) = {s·w : s ≥ 0}``."""

    def _norm(self, w):
        return float(np.linalg.norm(w))

    def prox(self, v, t):
        n = np.linalg.norm(v)
        return np.array(v, dtype=np.float64) * (self.radius / n if n > self.radius else 1.0)

    def _boundary_dist(self, w, g, atol):
        # min_{s≥0} max_j |g_j + s w_j|: lines ±(g_j + s w_j)
        return _min_upper_envelope(np.concatenate([g, -g]), np.concatenate([w, -w]))

    def cvxpy(self, w):
        import cvxpy as cp
        return 0.0, [cp.norm(w, 2) <= self.radius]


class L1Ball(_Ball):
    """Indicator of ``{‖w‖₁ ≤ radius}``; on the boundary ``∂P(w) = {s·v : s ≥ 0, v ∈ ∂‖w‖₁}``."""

    def _norm(self, w):
        return float(np.abs(w).sum())

    def prox(self, v, t):
        v = np.asarray(v, dtype=np.float64)
        a = np.abs(v)
        if a.sum() <= self.radius:
            return v.copy()
        u = np.sort(a)[::-1]                    # Duchi et al. (2008): sort-based projection
        css = np.cumsum(u) - self.radius
        k = np.flatnonzero(u * np.arange(1, u.size + 1) > css)[-1]
        return np.sign(v) * np.maximum(a - css[k] / (k + 1), 0.0)

    def _boundary_dist(self, w, g, atol):
        nz = np.abs(w) > atol
        sg = np.sign(w[nz])
        a = np.concatenate([g[nz], -g[nz], np.abs(g[~nz]), [0.0]])
        b = np.concatenate([sg, -sg, -np.ones((~nz).sum()), [0.0]])
        return _min_upper_envelope(a, b)

    def cvxpy(self, w):
        import cvxpy as cp
        return 0.0, [cp.norm1(w) <= self.radius]


class Nuclear(Regularizer):
    """``P(w) = lam‖W‖_*`` (sum of singular values) for a matrix-shaped ``w``:
    ``W = w.reshape(shape)`` in numpy's row-major (C) order, ``shape = (p, q)``.

    prox: soft thresholding of the singular values, ``U·max(s − t·lam, 0)·Vᵀ``.

    ``dist`` is **not** the exact ``dist∞(0, g + ∂P(w))`` of ALGORITHMS.md §2: the
    subdifferential ``{lam(UVᵀ + M) : UᵀM = 0, MV = 0, ‖M‖₂ ≤ 1}`` has no cheap exact
    ∞-norm distance, so it is the §2 fallback, the prox-gradient residual
    ``‖w − prox_P(w − g)‖∞`` (zero exactly at stationary points, continuous in ``w``,
    and ≤ the Euclidean distance to ``−∂P(w)``; ``atol`` is not needed and ignored).
    ``exact_dist = False`` marks this.
    """

    exact_dist = False

    def __init__(self, lam, shape):
        self.lam = _positive(lam, "lam", "Nuclear")
        try:
            p, q = (int(k) for k in shape)
        except (TypeError, ValueError):
            raise ValueError(f"Nuclear: shape must be a pair (p, q), got {shape!r}") from None
        if p < 1 or q < 1 or (p, q) != tuple(shape):
            raise ValueError(f"Nuclear: shape must be two positive integers, got {shape!r}")
        self.shape = (p, q)

    def check_dim(self, dim):
        if self.shape[0] * self.shape[1] != dim:
            raise ValueError(f"Nuclear: shape {self.shape} has {self.shape[0] * self.shape[1]} "
                             f"entries, expected dim = {dim}")

    def value(self, w):
        s = np.linalg.svd(np.reshape(w, self.shape), compute_uv=False)
        return self.lam * float(s.sum())

    def prox(self, v, t):
        U, s, Vt = np.linalg.svd(np.reshape(np.asarray(v, dtype=np.float64), self.shape),
                                 full_matrices=False)
        return ((U * np.maximum(s - self.lam * t, 0.0)) @ Vt).ravel()

    def dist(self, w, g, atol=0.0):
        w = np.asarray(w, dtype=np.float64)
        return float(np.max(np.abs(w - self.prox(w - g, 1.0)), initial=0.0))

    def cvxpy(self, w):
        import cvxpy as cp
        return self.lam * cp.normNuc(cp.reshape(w, self.shape, order="C")), []


