"""Prox-friendly regularizers P (docs/algorithms.md §1–2).

Each :class:`Regularizer` gives

* ``value(w)`` (``inf`` outside the domain of an indicator);
* ``prox(v, t) = argmin_x t·P(x) + ½‖x − v‖²``, exactly;
* ``dist(w, g, atol=0)``: the stationarity residual ``dist∞(0, g + ∂P(w))`` of §2, exact.
  A coordinate (or a ball constraint) counts as *at* its kink or bound when it is within
  ``atol`` of it; the solvers' iterates come out of ``prox`` and sit exactly there, while
  interior-point reference solutions (cvxpy) need a small ``atol``;
* ``cvxpy(w)``: ``(expression, constraints)`` for a cvxpy variable ``w``;
* for a separable P (``separable = True``), ``subgradients(w, atol=0)``: arrays
  ``(lo, hi)`` with ``∂P(w) = Π_j [lo_j, hi_j]`` (``lo_j = +inf, hi_j = −inf``, an empty
  interval, outside dom P).  Its ``dist`` is ``max_j dist(0, g_j + [lo_j, hi_j])`` and
  :func:`constrfl.residuals` uses the intervals to estimate multipliers by a linear program.

A separable ``L1``, ``SquaredL2`` or ``ElasticNet`` plus a ``Box`` (or ``NonNegative``)
is again prox-friendly: ``prox.L1(0.1) + prox.NonNegative()`` is a :class:`Boxed`.
Any other sum raises TypeError.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Regularizer", "Zero", "L1", "SquaredL2", "ElasticNet", "Box", "NonNegative",
           "Boxed", "Piecewise", "Ridged", "Leading", "L2Ball", "L1Ball", "Nuclear"]


def _real_array(x, name, where, what="a real number or an array of real numbers"):
    """``x`` as a float64 array: TypeError unless it holds real numbers (booleans,
    strings and None are not numbers)."""
    a = np.asarray(x)
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{where}: {name} must be {what}, got {x!r} ({type(x).__name__})")
    return a.astype(np.float64)


def _positive(x, name, where, allow_zero=True):
    """A finite real ``x ≥ 0`` (``> 0`` unless ``allow_zero``): TypeError when ``x`` is
    not a real number, ValueError when out of range; both name ``where`` and ``name``."""
    a = _real_array(x, name, where, "a real number")
    if a.ndim:
        raise TypeError(f"{where}: {name} must be a real number, got an array of shape "
                        f"{a.shape}")
    x = float(a)
    if not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise ValueError(f"{where}: {name} must be a finite {'non-negative' if allow_zero else 'positive'} "
                         f"number, got {x}")
    return x


def _pieces(dim, q=0.0, lam=0.0, lo=-np.inf, hi=np.inf):
    """The arrays of :meth:`Regularizer.pieces`, broadcast to ``dim``."""
    return tuple(np.broadcast_to(np.asarray(v, dtype=np.float64), (dim,)).copy()
                 for v in (q, lam, lo, hi))


def rescaled_pieces(pieces, D, c=1.0):
    """The pieces of ``x ↦ c·P(Dx)`` (D > 0 per coordinate) from P's (q, λ, lo, hi):
    ``(c·q·D², c·λ·D, lo/D, hi/D)``."""
    q, lam, lo, hi = pieces
    return c * q * D * D, c * lam * D, lo / D, hi / D


def _soft(v, k):
    return np.sign(v) * np.maximum(np.abs(v) - k, 0.0)


def _l1_interval(w, lam, atol):
    """``lam·∂|·|(w)`` per coordinate: ``lam·sign(w_j)``, or ``[−lam, lam]`` at 0."""
    at_zero = np.abs(w) <= atol
    s = lam * np.sign(w)
    return np.where(at_zero, -lam, s), np.where(at_zero, lam, s)


def interval_dist(g, lo, hi):
    """Per coordinate ``dist(0, g_j + [lo_j, hi_j]) = max(0, g_j + lo_j, −g_j − hi_j)``
    (``inf`` for an empty interval, ``lo_j > hi_j``)."""
    return np.maximum(np.maximum(g + lo, -g - hi), 0.0)


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

    def subgradients(self, w, atol=0.0):
        """Separable P only: ``(lo, hi)`` with ``∂P(w) = Π_j [lo_j, hi_j]``."""
        raise NotImplementedError(f"{type(self).__name__} is not separable")

    def ridge_weights(self, dim):
        """``q`` when ``P(w) = ½ Σⱼ qⱼwⱼ²`` (smooth: none, a ridge, a weighted ridge, an
        estimator's penalty on its coefficients), else None: the Newton solvers fold
        such a P into the smooth part ψ."""
        pieces = self.pieces(dim)
        if pieces is None:
            return None
        q, lam, lo, hi = pieces
        if lam.any() or np.isfinite(lo).any() or np.isfinite(hi).any():
            return None
        return q

    def dist(self, w, g, atol=0.0):
        """``dist∞(0, g + ∂P(w))``; for a separable P from its subgradient intervals."""
        w = np.asarray(w, dtype=np.float64)
        return float(np.max(interval_dist(g, *self.subgradients(w, atol)), initial=0.0))

    def cvxpy(self, w):
        raise NotImplementedError

    def pieces(self, dim):
        """``(q, λ, lo, hi)``, arrays of length ``dim``, when
        ``P(w) = Σⱼ ½qⱼwⱼ² + λⱼ|wⱼ| + ι[loⱼ, hiⱼ](wⱼ)`` (piecewise quadratic and
        separable: the proximal Newton step solves it exactly, :mod:`constrfl.solvers.proxstep`);
        None for any other P."""
        return None

    def __add__(self, other):
        return Boxed.combine(self, other)

    def __radd__(self, other):
        return Boxed.combine(other, self)

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

    def subgradients(self, w, atol=0.0):
        z = np.zeros(np.shape(w))
        return z, z

    def pieces(self, dim):
        return _pieces(dim)

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

    def subgradients(self, w, atol=0.0):
        return _l1_interval(w, self.lam, atol)

    def pieces(self, dim):
        return _pieces(dim, lam=self.lam)

    def cvxpy(self, w):
        import cvxpy as cp
        return self.lam * cp.norm1(w), []


class SquaredL2(Regularizer):
    """``P(w) = (lam/2)‖w‖²`` (smooth; prox ``v/(1 + t·lam)``).  ``lam`` may also be a
    1-D array of per-coordinate weights: ``P(w) = ½ Σⱼ lamⱼ wⱼ²`` (a weighted ridge)."""

    separable = True

    def __init__(self, lam):
        a = _real_array(lam, "lam", "SquaredL2", "a real number or a 1-D array of real "
                                                 "numbers")
        if a.ndim == 0:
            self.lam = _positive(lam, "lam", "SquaredL2")
        elif a.ndim > 1 or not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"SquaredL2: lam must be a finite non-negative number or 1-D "
                             f"array of them, got shape {a.shape}")
        else:
            self.lam = a

    def check_dim(self, dim):
        if np.ndim(self.lam) and np.shape(self.lam) != (dim,):
            raise ValueError(f"SquaredL2: lam has shape {np.shape(self.lam)}, expected "
                             f"({dim},)")

    def value(self, w):
        if np.ndim(self.lam):
            return 0.5 * float(np.sum(self.lam * w * w))
        return 0.5 * self.lam * float(w @ w)

    def prox(self, v, t):
        return np.asarray(v, dtype=np.float64) / (1.0 + t * self.lam)

    def subgradients(self, w, atol=0.0):
        s = self.lam * np.asarray(w, dtype=np.float64)
        return s, s

    def pieces(self, dim):
        return _pieces(dim, q=self.lam)

    def cvxpy(self, w):
        import cvxpy as cp
        if np.ndim(self.lam):
            return 0.5 * cp.sum_squares(cp.multiply(np.sqrt(self.lam), w)), []
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

    def subgradients(self, w, atol=0.0):
        lo, hi = _l1_interval(w, self.l1, atol)
        s = self.l2 * np.asarray(w, dtype=np.float64)
        return s + lo, s + hi

    def pieces(self, dim):
        return _pieces(dim, q=self.l2, lam=self.l1)

    def cvxpy(self, w):
        import cvxpy as cp
        return self.l1 * cp.norm1(w) + 0.5 * self.l2 * cp.sum_squares(w), []


class Box(Regularizer):
    """Indicator of ``{w : lower ≤ w ≤ upper}`` (scalars or arrays; ±inf allowed)."""

    separable = True

    def __init__(self, lower=-np.inf, upper=np.inf):
        self.lower = _real_array(lower, "lower", "Box")
        self.upper = _real_array(upper, "upper", "Box")
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

    def subgradients(self, w, atol=0.0):
        """The normal cone of the box: ``(−∞, 0]`` at a lower bound, ``[0, ∞)`` at an
        upper one, all of R at both, ``{0}`` inside; empty outside (beyond ``atol``)."""
        at_lo, at_up = w <= self.lower + atol, w >= self.upper - atol
        lo = np.where(at_lo, -np.inf, 0.0)
        hi = np.where(at_up, np.inf, 0.0)
        outside = (w < self.lower - atol) | (w > self.upper + atol)
        return np.where(outside, np.inf, lo), np.where(outside, -np.inf, hi)

    def pieces(self, dim):
        return _pieces(dim, lo=self.lower, hi=self.upper)

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


class Boxed(Regularizer):
    """``P(w) = p(w) + ι_B(w)``: a separable ``p`` (:class:`L1`, :class:`SquaredL2` or
    :class:`ElasticNet`) restricted to the box ``B`` of a :class:`Box` (or
    :class:`NonNegative`); built by ``p + box`` in either order.

    **prox is the clipped prox**, ``prox_{t(p+ι_B)}(v) = clip(prox_{tp}(v), lower, upper)``,
    coordinate by coordinate.  Proof: both terms are separable, so the prox splits into
    1-D problems ``min_{l ≤ x ≤ u} φ(x)``, ``φ(x) = t·p_j(x) + ½(x − v_j)²``.  φ is strongly
    convex with unconstrained minimizer ``x* = prox_{tp_j}(v_j)``, hence non-increasing on
    ``(−∞, x*]`` and non-decreasing on ``[x*, ∞)``; its minimizer over ``[l, u]`` is the
    point of the interval nearest to x*, ``clip(x*, l, u)``.  (The order matters:
    ``prox_p(clip(v))`` is wrong in general.  Composition rules of this kind are studied
    in Y. Yu, "On decomposing the proximal map", NeurIPS 2013.)

    ``∂P(w) = ∂p(w) + N_B(w)`` (sum rule: p is finite everywhere), interval by interval,
    so ``dist`` is exact.
    """

    separable = True
    INNER = ()            # filled in below the classes: (L1, SquaredL2, ElasticNet)

    def __init__(self, inner, box):
        if not isinstance(inner, self.INNER) or not isinstance(box, Box):
            raise TypeError(f"Boxed: need one of {[c.__name__ for c in self.INNER]} and a "
                            f"Box, got {inner!r} and {box!r}")
        self.inner, self.box = inner, box

    @classmethod
    def combine(cls, a, b):
        """``a + b`` for regularizers: a :class:`Boxed` when one is a Box and the other
        an L1, SquaredL2 or ElasticNet; TypeError naming the pair otherwise."""
        for inner, box in ((a, b), (b, a)):
            if isinstance(inner, cls.INNER) and isinstance(box, Box):
                return cls(inner, box)
        raise TypeError(f"cannot add {a!r} and {b!r}: a closed-form prox of a sum is "
                        f"known here only for one of {[c.__name__ for c in cls.INNER]} "
                        "plus a Box or NonNegative (the clipped prox); other sums need "
                        "their own Regularizer")

    def check_dim(self, dim):
        self.box.check_dim(dim)
        self.inner.check_dim(dim)

    def value(self, w):
        return self.inner.value(w) + self.box.value(w)

    def prox(self, v, t):
        return np.clip(self.inner.prox(v, t), self.box.lower, self.box.upper)

    def subgradients(self, w, atol=0.0):
        lo_p, hi_p = self.inner.subgradients(w, atol)
        lo_b, hi_b = self.box.subgradients(w, atol)
        return lo_p + lo_b, hi_p + hi_b            # p finite: no inf − inf

    def pieces(self, dim):
        q, lam, _, _ = self.inner.pieces(dim)
        return _pieces(dim, q, lam, self.box.lower, self.box.upper)

    def cvxpy(self, w):
        expr, cons = self.inner.cvxpy(w)
        return expr, cons + self.box.cvxpy(w)[1]

    def __repr__(self):
        return f"{self.inner!r} + {self.box!r}"


class Piecewise(Regularizer):
    """``P(w) = Σⱼ ½qⱼwⱼ² + λⱼ|wⱼ| + ι[loⱼ, hiⱼ](wⱼ)`` from the arrays of
    :meth:`Regularizer.pieces` (q, λ ≥ 0): every separable P in one form, e.g. one
    rescaled by :mod:`constrfl.scaling`.  prox (t a scalar or per coordinate):
    ``clip(soft(v, tλ)/(1 + tq), lo, hi)`` (the clipped prox of :class:`Boxed`);
    ``∂P(w) = qw + λ∂|w| + N[lo, hi](w)``."""

    separable = True

    def __init__(self, q, lam, lo, hi):
        self.q, self.lam = (np.array(a, dtype=np.float64) for a in (q, lam))
        self.box = Box(lo, hi)

    def check_dim(self, dim):
        if self.q.shape != (dim,):
            raise ValueError(f"Piecewise: {self.q.size} coordinates, expected {dim}")

    def value(self, w):
        return float(0.5 * self.q @ (w * w) + self.lam @ np.abs(w)) + self.box.value(w)

    def prox(self, v, t):
        return np.clip(_soft(v, t * self.lam) / (1.0 + t * self.q), self.box.lower,
                       self.box.upper)

    def subgradients(self, w, atol=0.0):
        lo_1, hi_1 = _l1_interval(w, self.lam, atol)
        lo_b, hi_b = self.box.subgradients(w, atol)
        return self.q * w + lo_1 + lo_b, self.q * w + hi_1 + hi_b

    def pieces(self, dim):
        return _pieces(dim, self.q, self.lam, self.box.lower, self.box.upper)

    def cvxpy(self, w):
        import cvxpy as cp
        expr = 0.5 * cp.sum(cp.multiply(self.q, cp.square(w))) + self.lam @ cp.abs(w)
        return expr, self.box.cvxpy(w)[1]

    def __repr__(self):
        return f"Piecewise(d={self.q.size})"


class Ridged(Regularizer):
    """``P(w) = R(w) + (lam/2)‖w‖²``: any regularizer R plus a ridge (``lam ≥ 0``, a
    number), e.g. ``Ridged(L2Ball(1.0), 0.1)``.

    prox: ``prox_{tP}(v) = prox_{(t/s)R}(v/s)`` with ``s = 1 + t·lam`` (complete the
    square: ``(t·lam/2)‖x‖² + ½‖x − v‖² = (s/2)‖x − v/s‖² + const``), exact for any
    convex R; a per-coordinate t needs a separable R.  ``∂P(w) = ∂R(w) + lam·w`` (R's
    subgradient intervals shifted by lam·w), so ``dist`` is R's at ``g + lam·w`` (exact
    when R's is) and the pieces are R's with ``q + lam``.
    """

    def __init__(self, inner, lam):
        if not isinstance(inner, Regularizer):
            raise TypeError(f"Ridged: inner must be a Regularizer, got {inner!r}")
        self.inner, self.lam = inner, _positive(lam, "lam", "Ridged")
        self.separable, self.exact_dist = inner.separable, inner.exact_dist

    def check_dim(self, dim):
        self.inner.check_dim(dim)

    def value(self, w):
        return 0.5 * self.lam * float(w @ w) + self.inner.value(w)

    def prox(self, v, t):
        s = 1.0 + t * self.lam
        return self.inner.prox(np.asarray(v, dtype=np.float64) / s, t / s)

    def subgradients(self, w, atol=0.0):
        lo, hi = self.inner.subgradients(w, atol)
        s = self.lam * np.asarray(w, dtype=np.float64)
        return s + lo, s + hi

    def dist(self, w, g, atol=0.0):
        if self.separable:
            return super().dist(w, g, atol)
        w = np.asarray(w, dtype=np.float64)
        return self.inner.dist(w, g + self.lam * w, atol)

    def pieces(self, dim):
        pieces = self.inner.pieces(dim)
        if pieces is None:
            return None
        q, lam, lo, hi = pieces
        return self.lam + q, lam, lo, hi

    def cvxpy(self, w):
        import cvxpy as cp
        expr, cons = self.inner.cvxpy(w)
        return 0.5 * self.lam * cp.sum_squares(w) + expr, cons

    def __repr__(self):
        return f"Ridged({self.inner!r}, lam={self.lam!r})"


class Leading(Regularizer):
    """``P(w) = R(w[:k]/scale)``: a regularizer R of k coordinates acting on the first k
    coordinates of w in the variable ``u = w[:k]/scale`` (``scale``: None, or k numbers
    > 0), the coordinates after them free (an intercept, say).  A model's penalty on its
    coefficients, in units where the coefficients are ``scale·u``, is ``Leading(R, k,
    scale)``.

    prox: ``prox_{tP}(v) = (scale·prox_{t'R}(v[:k]/scale), v[k:])`` with
    ``t' = t/scale²`` (substitute ``x = scale·u`` in ``t·R(u) + ½‖x − v‖²`` and divide
    coordinate j by scale_j²: exact coordinate by coordinate, so a scale needs a separable
    R; a scale of ones is none).  Subgradients ``∂R(u)/scale``, ``{0}`` on the free
    coordinates; pieces R's rescaled by 1/scale (:func:`rescaled_pieces`), zero on the free
    coordinates.  Rounding: a point the prox puts on a bound of R, ``scale·lo``, may read
    back as ``u`` an ulp outside it (``3·(−0.2)/3 ≠ −0.2``), so that ``value`` is inf and
    ``dist`` needs an ``atol``; with scales that are powers of two ``w/scale`` is exact.
    """

    def __init__(self, inner, k, scale=None):
        if not isinstance(inner, Regularizer):
            raise TypeError(f"Leading: inner must be a Regularizer, got {inner!r}")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"Leading: k must be an integer >= 0, got {k!r}")
        self.inner, self.k = inner, int(k)
        if scale is not None:
            scale = _real_array(scale, "scale", "Leading", "None or an array of k positive "
                                                          "numbers")
            if scale.shape != (self.k,) or not np.all(np.isfinite(scale)) \
                    or np.any(scale <= 0):
                raise ValueError(f"Leading: scale must hold k = {self.k} finite positive "
                                 f"numbers, got shape {scale.shape}")
            if np.all(scale == 1.0):
                scale = None
        if scale is not None and not inner.separable:
            raise ValueError(f"Leading: a scale needs a separable regularizer (its prox is "
                             f"exact coordinate by coordinate), got {inner!r}")
        self.scale = scale
        self.separable, self.exact_dist = inner.separable, inner.exact_dist

    def check_dim(self, dim):
        if dim < self.k:
            raise ValueError(f"Leading: a regularizer of the first {self.k} coordinates, "
                             f"but dim = {dim}")
        self.inner.check_dim(self.k)

    def _u(self, w):
        u = np.asarray(w[:self.k], dtype=np.float64)
        return u if self.scale is None else u / self.scale

    def value(self, w):
        return self.inner.value(self._u(w))

    def prox(self, v, t):
        out = np.array(v, dtype=np.float64)
        t = np.asarray(t, dtype=np.float64)
        t = t if t.ndim == 0 else t[:self.k]
        u = self.inner.prox(self._u(out), t if self.scale is None else t / self.scale ** 2)
        out[:self.k] = u if self.scale is None else self.scale * u
        return out

    def subgradients(self, w, atol=0.0):
        lo, hi = np.zeros(np.shape(w)), np.zeros(np.shape(w))
        lo[:self.k], hi[:self.k] = self.inner.subgradients(self._u(w), atol)
        if self.scale is not None:
            lo[:self.k] /= self.scale
            hi[:self.k] /= self.scale
        return lo, hi

    def dist(self, w, g, atol=0.0):
        if self.separable:
            return super().dist(w, g, atol)
        free = float(np.max(np.abs(g[self.k:]), initial=0.0))   # scale is None here
        return max(self.inner.dist(self._u(w), g[:self.k], atol), free)

    def pieces(self, dim):
        pieces = self.inner.pieces(self.k)
        if pieces is None:
            return None
        if self.scale is not None:
            pieces = rescaled_pieces(pieces, 1.0 / self.scale)
        return tuple(np.concatenate([a, b]) for a, b in zip(pieces, _pieces(dim - self.k)))

    def cvxpy(self, w):
        import cvxpy as cp
        return self.inner.cvxpy(w[:self.k] if self.scale is None
                                else cp.multiply(1.0 / self.scale, w[:self.k]))

    def __repr__(self):
        scale = ("" if self.scale is None else
                 f", scale=<{self.k} values in [{self.scale.min():.3g}, "
                 f"{self.scale.max():.3g}]>")
        return f"Leading({self.inner!r}, k={self.k}{scale})"


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

    ``dist`` is **not** the exact ``dist∞(0, g + ∂P(w))`` of docs/algorithms.md §2: the
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




Boxed.INNER = (L1, SquaredL2, ElasticNet)
