"""The exact reparametrization the estimators' solver works in (column centring and
scaling, see :mod:`constrfl.estimators`) and the penalty on coef in it."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..prox import Boxed, ElasticNet, Regularizer, SquaredL2, Zero, rescaled_pieces


class _CoefPenalty(Regularizer):
    """The estimator's penalty in the solver's coordinates ``w = (c̃, b̃)``, where
    ``c̃ = σ·coef`` (σ > 0 the column scales of :class:`_Coordinates`; 1 without
    scaling): ``P(w) = (α/2)‖u‖² + R(u)`` with ``u = c̃/σ = coef``, none on the intercept.

    prox, per coordinate of coef: ``prox_{tP}(v) = σ·prox_{t'(R + (α/2)·²)}(v/σ)`` with
    ``t' = t/σ²`` (substitute c̃ = σu in ``tP + ½‖c̃ − v‖²`` and divide by σ²), and
    ``prox_{t'(R + (α/2)‖·‖²)}(x) = prox_{t'R/(1+t'α)}(x/(1+t'α))``: exact for any convex
    R when σ ≡ 1, for a separable R (coordinate-wise t') otherwise.  Subgradients:
    ``∂P(w)_j = (α u_j + ∂R(u)_j)/σ_j``.
    """

    def __init__(self, alpha, inner, k, scale=None):
        self.alpha, self.inner, self.k = float(alpha), inner, int(k)
        self.scale = np.ones(self.k) if scale is None else np.asarray(scale, dtype=np.float64)
        self.separable = inner is None or inner.separable
        self.exact_dist = inner is None or inner.exact_dist
        if not self.separable and np.any(self.scale != 1.0):
            raise ValueError("scaled coordinates need a separable regularizer")

    def _split(self, t):
        t = np.asarray(t, dtype=np.float64)
        return t if t.ndim == 0 else t[:self.k]

    def value(self, w):
        u = w[:self.k] / self.scale
        return 0.5 * self.alpha * float(u @ u) + (0.0 if self.inner is None
                                                  else self.inner.value(u))

    def prox(self, v, t):
        out = np.array(v, dtype=np.float64)
        tk = self._split(t) / self.scale ** 2
        s = 1.0 + tk * self.alpha
        u = out[:self.k] / self.scale / s
        if self.inner is not None:
            u = self.inner.prox(u, tk / s)
        out[:self.k] = self.scale * u
        return out

    def subgradients(self, w, atol=0.0):
        """Separable ``inner`` only: ``(α·u + ∂R(u))/σ`` on coef, ``{0}`` on the rest."""
        u = np.asarray(w[:self.k], dtype=np.float64) / self.scale
        lo = np.zeros(np.shape(w))
        hi = np.zeros(np.shape(w))
        lo[:self.k] = hi[:self.k] = self.alpha * u
        if self.inner is not None:
            ilo, ihi = self.inner.subgradients(u, atol)
            lo[:self.k] += ilo
            hi[:self.k] += ihi
        lo[:self.k] /= self.scale
        hi[:self.k] /= self.scale
        return lo, hi

    def dist(self, w, g, atol=0.0):
        if self.separable:
            return super().dist(w, g, atol)
        c, gc = w[:self.k], g[:self.k] + self.alpha * w[:self.k]      # σ ≡ 1 here
        return max(self.inner.dist(c, gc, atol), float(np.max(np.abs(g[self.k:]), initial=0.0)))

    def pieces(self, dim):
        """With R's pieces (q, λ, lo, hi) in u = c̃/σ: ``((α + q)/σ², λ/σ, σ·lo, σ·hi)``
        on coef, nothing on the intercept (None when R is not piecewise quadratic)."""
        inner = (Zero() if self.inner is None else self.inner).pieces(self.k)
        if inner is None:
            return None
        coef = rescaled_pieces((self.alpha + inner[0], *inner[1:]), 1.0 / self.scale)
        return tuple(np.concatenate([a, b]) for a, b in zip(coef, Zero().pieces(dim - self.k)))

    def cvxpy(self, w):
        import cvxpy as cp
        u = cp.multiply(1.0 / self.scale, w[:self.k])
        expr, cons = (0.0, []) if self.inner is None else self.inner.cvxpy(u)
        return 0.5 * self.alpha * cp.sum_squares(u) + expr, cons

    def __repr__(self):
        inner = "" if self.inner is None else f" + {self.inner!r}"
        return f"the estimator's penalty (½·{self.alpha:g}·‖coef‖²{inner})"

    def check_dim(self, dim):
        if not self.k <= dim <= self.k + 1:
            raise ValueError(f"penalty on {self.k} coefficients, problem dimension {dim}")
        if self.inner is not None:
            self.inner.check_dim(self.k)


# -- the solver's coordinates ---------------------------------------------------------------

def _ridge_weight(regularizer):
    """The l2 weight of a separable regularizer (``½·l2·coef²`` per coordinate): its
    lam for SquaredL2, l2 for ElasticNet (also inside a Boxed); 0 otherwise."""
    inner = regularizer.inner if isinstance(regularizer, Boxed) else regularizer
    if isinstance(inner, SquaredL2):
        return inner.lam
    if isinstance(inner, ElasticNet):
        return inner.l2
    return 0.0


def _column_std(F):
    """Population standard deviation of each column of a dense or sparse F."""
    if sp.issparse(F):
        F = sp.csr_array(F)
        mean = np.asarray(F.mean(axis=0)).ravel()
        sq = np.asarray(F.multiply(F).mean(axis=0)).ravel()
        return np.sqrt(np.maximum(sq - mean ** 2, 0.0))
    return np.asarray(F, dtype=np.float64).std(axis=0)


def _ends_with_ones(X):
    """True when the last column of X (dense or sparse) is all ones."""
    if X.shape[1] == 0:
        return False
    last = X[:, [X.shape[1] - 1]]
    if sp.issparse(last):
        return last.nnz == X.shape[0] and bool(np.all(last.data == 1.0))
    return bool(np.all(last == 1.0))


class _Coordinates:
    """The exact reparametrization the solver works in (see :mod:`constrfl.estimators`).

    The first ``k`` columns of X are the features ``F`` (all columns, or all but the
    last when ``fit_intercept`` and X already ends with a column of ones: that column
    *is* the intercept, no second one is added).  The solver's design is
    ``[(F − m)/σ, 1]`` (``[(F − m)/σ]`` without an intercept), with ``m`` the column
    means of a dense F when there is an intercept (0 for a sparse F: centring would
    densify it) and ``σ`` the column scales (set by the estimator, see
    ``_column_scales``; 1 by default).  A solver point ``(c̃, b̃)`` is the
    model ``coef = c̃/σ``, ``intercept = b̃ − m·coef``; the ones column's coef is 0.
    """

    def __init__(self, X, fit_intercept, scale=None):
        self.n_features = X.shape[1]
        self.fit_intercept = bool(fit_intercept)
        self.ones = self.fit_intercept and _ends_with_ones(X)
        self.k = self.n_features - 1 if self.ones else self.n_features
        F = X[:, :self.k]
        self.sparse = sp.issparse(X)
        self.mean = (np.asarray(F.mean(axis=0), dtype=np.float64).ravel()
                     if self.fit_intercept and not self.sparse else np.zeros(self.k))
        self.scale = np.ones(self.k) if scale is None else scale

    def design(self, X):
        """The solver's rows for rows ``X`` (a client's or the server's)."""
        F = X[:, :self.k]
        if sp.issparse(F) and not np.any(self.mean):        # sparse stays sparse
            Z = sp.csr_array(F, dtype=np.float64) @ sp.diags_array(1.0 / self.scale)
            if not self.fit_intercept:
                return sp.csr_array(Z)
            return sp.hstack([Z, np.ones((X.shape[0], 1))], format="csr")
        if sp.issparse(F):              # sparse server rows, dense centred clients
            F = F.toarray()
        Z = (np.asarray(F, dtype=np.float64) - self.mean) / self.scale
        if not self.fit_intercept:
            return np.ascontiguousarray(Z)
        return np.hstack([Z, np.ones((X.shape[0], 1))])

    def model(self, w):
        """``(coef (n_features,), intercept)`` of a solver point ``w``."""
        coef = np.zeros(self.n_features)
        coef[:self.k] = np.asarray(w[:self.k], dtype=np.float64) / self.scale
        intercept = float(w[self.k] - coef[:self.k] @ self.mean) if self.fit_intercept else 0.0
        return coef, intercept
