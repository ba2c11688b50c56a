"""The exact reparametrization the estimators' solver works in (column centring and
scaling, see :mod:`constrfl.estimators`) and the penalty on coef in it."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..prox import Leading, Ridged, SquaredL2


def _coef_penalty(alpha, regularizer, k, scale=None):
    """The estimator's penalty in the solver's coordinates ``w = (c̃, b̃)``, where
    ``c̃ = σ·coef`` (σ > 0 the column scales of :class:`_Coordinates`; None: 1):
    ``P(w) = (α/2)‖u‖² + R(u)`` at ``u = c̃/σ = coef``, none on the intercept.  In the
    package's regularizers: ``prox.Leading(prox.Ridged(R, α), k, σ)`` (``SquaredL2(α)``
    in place of the Ridged without R, R itself when α = 0), whose prox is exact for any
    convex R when σ ≡ 1 and for a separable R otherwise (Leading refuses a scale with a
    non-separable R).  Its pieces give the Newton solvers the ridge weights ``α/σ²`` (0
    on the intercept) when R is None or a ridge."""
    if regularizer is None:
        inner = SquaredL2(alpha)
    elif alpha == 0:
        inner = regularizer
    else:
        inner = Ridged(regularizer, alpha)
    return Leading(inner, k, scale)


# -- the solver's coordinates ---------------------------------------------------------------

def _ridge_weight(regularizer, k):
    """coef's ridge weights in the regularizer (its ``½·qⱼ·coefⱼ²`` part): the q of its
    pieces, e.g. the lam of a SquaredL2, the l2 of an ElasticNet, also inside a Boxed;
    0 without a regularizer or pieces."""
    if regularizer is None:
        return 0.0
    regularizer.check_dim(k)                 # its own message for a wrong-sized array
    pieces = regularizer.pieces(k)
    return 0.0 if pieces is None else pieces[0]


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
