"""A party's objective and inequality constraints as combinations of row losses, evaluated
in one pass over its rows.

When the objective and every inequality of a party are weighted sums of the row losses
:class:`~constrfl.functions.LogisticLoss` and :class:`~constrfl.functions.LeastSquares`
plus constants (Neyman-Pearson (30), fairness (32), the estimators), with Tₖ the
distinct losses,

    fᵢ = a₀ᵀT(w) + o₀,   cᵢ = A T(w) + o,

and the AL term of :mod:`constrfl.augmented` needs, with p = [μ + βcᵢ]₊ and
b = a₀ + Aᵀp,

    ∇(fᵢ + ‖p‖²/2β) = Σₖ bₖ ∇Tₖ,
    ∇²(…) = Σₖ bₖ ∇²Tₖ + β ∇c_Aᵀ∇c_A    (A: the rows with p > 0).

:func:`~constrfl.kernels.stacked_terms` gives every Tₖ and ∇Tₖ in one pass over the
stacked rows, :func:`~constrfl.kernels.stacked_gram` the Σₖ bₖ∇²Tₖ in one more: the
same function as the term-by-term evaluation (to rounding), without its per-function
overhead, which dominates at tens of rows.
"""
from __future__ import annotations

import numpy as np

from . import kernels
from .functions import Cached, LeastSquares, LogisticLoss, Sum

__all__ = ["StackedRows"]

#: up to this dimension a party's local Newton runs compiled (kernels.stacked_minimize,
#: with its own Cholesky); above it the Python loop with LAPACK's.  Measured per ADMM
#: round: no slower at d = 106 (adult: 5,413 rounds in 120 s against 4,785), 7x slower
#: at d = 300 (200 x 50: 3 rounds in 120 s against 20)
COMPILED_NEWTON_MAX_DIM = 128


def _combination(f):
    """``f`` as ``({row loss: coefficient}, offset)``, or None if it is not a scalar
    weighted sum of row losses plus a constant."""
    if isinstance(f, Cached):
        return _combination(f.f)
    if isinstance(f, (LogisticLoss, LeastSquares)):
        return {f: 1.0}, 0.0
    if not isinstance(f, Sum) or f.size is not None or np.ndim(f.offset):
        return None
    coef, offset = {}, float(f.offset)
    for term, a in zip(f.terms, f.weights):
        sub = _combination(term)
        if sub is None:
            return None
        for loss, c in sub[0].items():
            coef[loss] = coef.get(loss, 0.0) + a * c
        offset += a * sub[1]
    return coef, offset


def stacked_matrix(blocks):
    """The row blocks of the kernels' layouts (a dense array or a :class:`kernels.CSR`
    each, as a row loss holds its X in ``_Xk``) one above the other: a dense array when
    every block is dense, else one CSR, a dense block entering by its nonzeros.

    The layout is chosen from the blocks the kernels are given, never from the user's
    X: a dense X sparse enough to be held as CSR is a CSR block.  The kernels give the
    same results on a matrix in either layout."""
    if all(isinstance(b, np.ndarray) for b in blocks):
        return np.ascontiguousarray(np.vstack(blocks))
    return _vstack_csr([kernels.CSR.from_dense(b) if isinstance(b, np.ndarray) else b
                        for b in blocks])


def _vstack_csr(blocks):
    """CSR blocks with the same columns one above the other: each block's entries
    ``[indptr[0], indptr[-1])`` concatenated, its row pointers shifted to where its
    entries start in the result."""
    span = [slice(b.indptr[0], b.indptr[-1]) for b in blocks]
    start = np.cumsum([0] + [s.stop - s.start for s in span[:-1]])
    indptr = np.concatenate([[0]] + [b.indptr[1:] - b.indptr[0] + s0
                                     for b, s0 in zip(blocks, start)])
    return kernels.CSR(indptr.astype(np.int64),
                       np.concatenate([b.indices[s] for b, s in zip(blocks, span)]
                                      ).astype(np.int64),
                       np.concatenate([b.data[s] for b, s in zip(blocks, span)]
                                      ).astype(np.float64),
                       blocks[0].ncols)


class StackedRows:
    """The rows of a party's distinct row losses, stacked (see the module docstring)."""

    def __init__(self, losses, objective, constraints):
        index = {id(f): k for k, f in enumerate(losses)}
        self.logistic = np.array([isinstance(f, LogisticLoss) for f in losses])
        self.a0 = np.zeros(len(losses))
        self.o0 = 0.0
        self.zero = np.zeros(len(losses))
        if objective is not None:
            for f, c in objective[0].items():
                self.a0[index[id(f)]] += c
            self.o0 = objective[1]
        self.A = np.zeros((len(constraints), len(losses)))
        for j, (coef, _) in enumerate(constraints):
            for f, c in coef.items():
                self.A[j, index[id(f)]] += c
        self.o = np.array([off for _, off in constraints])
        self.term = np.concatenate([np.full(f.n_samples, k, dtype=np.int64)
                                    for k, f in enumerate(losses)])
        self.y = np.concatenate([f.y for f in losses])
        self.s = np.concatenate([f.s / f.s.sum() for f in losses])
        self.compiled_newton = losses[0].dim <= COMPILED_NEWTON_MAX_DIM
        self.X = stacked_matrix([f._Xk for f in losses])

    @classmethod
    def of(cls, party):
        """The party's stacked rows, or None when its objective or an inequality is not
        a combination of row losses (those parties are evaluated function by function)."""
        obj = None if party.objective is None else _combination(party.objective)
        cons = [_combination(c) for c in party.constraints]
        if (party.objective is not None and obj is None) or any(c is None for c in cons):
            return None
        losses = {}
        for coef, _ in ([obj] if obj else []) + cons:
            for f in coef:
                losses.setdefault(id(f), f)
        return cls(list(losses.values()), obj, cons) if losses else None

    def kernel_args(self, beta, mu, objective):
        a0, o0 = (self.a0, self.o0) if objective else (self.zero, 0.0)
        return (self.X, self.y, self.s, self.term, self.logistic, self.A, self.o, a0, o0,
                mu, float(beta))

    def values(self, W, beta, mu, objective=True):
        """The value of :meth:`augmented` at each row of W (None if one is not finite)."""
        out, _, _, _, finite = kernels.stacked_evaluate(*self.kernel_args(beta, mu, objective),
                                                        W, 0, kernels.NO_STEP, 1.0)
        return out if finite else None

    def augmented(self, w, order, beta, mu, objective=True, around=None, share=1.0):
        """``(value, gradient, Hessian, c)`` of fᵢ (if ``objective``) + ‖[μ + βcᵢ]₊‖²/2β
        at w, the gradient and Hessian as ``order`` asks (else None); None when a value
        is not finite (the function-by-function evaluation then names the culprit).
        ``around``: the start x of the step to w, the Hessian then weighing the active
        rows' ∇²cⱼ by ``share``·yⱼ + (1 − ``share``)·pⱼ, y the multipliers linearized
        from x (:func:`~constrfl.kernels.stacked_evaluate`)."""
        val, g, H, c, finite = kernels.stacked_evaluate(
            *self.kernel_args(beta, mu, objective), w[None], order,
            kernels.NO_STEP if around is None else around, float(share))
        if not finite:
            return None
        return float(val[0]), (g if order >= 1 else None), (H if order >= 2 else None), c

    def hessian_weights(self, w, beta, mu, objective=True):
        """``(ω, L)`` with ∇²(fᵢ + ‖[μ + βcᵢ]₊‖²/2β)(w) = Xᵀdiag(ω)X + LᵀL (B4): the row
        weights ω_j = b_{term(j)} s_j ℓ''(x_jᵀw) and the rows √β∇cₗ(w) of the active
        constraints; None when one is not finite."""
        X, y, s, term, logistic, A, o, a0, o0, mu, beta = self.kernel_args(beta, mu,
                                                                           objective)
        t, G, h = kernels.stacked_terms(X, y, s, term, logistic, w, True)
        _, _, p, b = kernels.stacked_penalized(t, A, o, a0, o0, mu, beta)
        omega = b[term] * s * h
        L = np.sqrt(beta) * (A[p > 0] @ G)
        if not (np.all(np.isfinite(omega)) and np.all(np.isfinite(L))):
            return None
        return omega, L

    def hessian_times(self, omega, L, v):
        """(Xᵀdiag(ω)X + LᵀL)v: two passes over the rows (:meth:`hessian_weights`), then
        Lᵀ(Lv) a row of L at a time (:func:`~constrfl.kernels.add_rows_times`)."""
        out = kernels.gram_times(self.X, omega, v)
        kernels.add_rows_times(out, L, L @ v)
        return out

    def admm_step(self, beta, mu, gamma, wk, w, u, lam, rho, rho_next, J, relax, tol,
                  max_iter):
        """:func:`~constrfl.kernels.stacked_admm_step`: ``(e, κ², u⁺, λ⁺)``, or None
        when it did not finish (a value not finite, a Hessian not positive definite)."""
        e, kappa, u, lam, status = kernels.stacked_admm_step(
            *self.kernel_args(beta, mu, True), gamma, wk, w, u, lam, rho, rho_next, J, relax, tol,
            max_iter)
        if status < 0:
            return None
        return e, kappa, u, lam
