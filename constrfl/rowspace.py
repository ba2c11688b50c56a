"""A party's Hessian in the basis of its own rows (``inner="newton-basis"``,
docs/algorithms.md §5c).

A party whose objective and inequalities are row losses (:mod:`.stacked`) sees w only
through Xw, X its stacked rows (n × d).  With the thin SVD X = Z Bᵀ (B ∈ ℝ^{d×r}
orthonormal, r = rank X, Z = XB) its AL term is ALᵢ(w) = ÃLᵢ(Bᵀw), the same
combination of losses on the rows Z, so

    ∇²ALᵢ(w) = B Cᵢ(w) Bᵀ,   Cᵢ(w) = ∇²ÃLᵢ(Bᵀw) ∈ ℝ^{r×r}                       (B1)

exactly: the Hessian's range lies in the row space (the basis idea of Qian, Islamov,
Safaryan & Richtárik, "Basis matters", AISTATS 2022).  The party sends B once, in
chunks of ``BASIS_COLUMNS`` columns (``newton.basis``), then Cᵢ's upper triangle,
r(r+1)/2 floats, wherever ``inner="newton"`` sends the d(d+1)/2 of ∇²ALᵢ.

B discloses the span of the party's feature vectors, not the vectors; with Cᵢ it gives
the party's Hessian, what ``inner="newton"`` discloses every round.

A party of sparse rows sends its Hessian as its sparse entries instead (a dense B would
cost d·r floats, 4 GB on the server at d = 10⁵ for 5,000 rows):

    ∇²ALᵢ(w) = Σ_j ω_j x_j x_jᵀ + β Σ_{l active} ∇c_l ∇c_lᵀ                         (B4)

with row weights ω_j = b_{term(j)} s_j ℓ''(x_jᵀw) (:mod:`constrfl.stacked`).  The
first sum lives on the pattern of XᵀX, fixed for the solve: the party sends the pattern
once (``newton.basis``), then its upper triangle's values, and the rows √β ∇c_l (a few
dense vectors).  Where the pattern has fewer entries than a basis would (d·rank X/2),
this costs less; it discloses the same Hessian.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps

from . import kernels
from .patterns import gram_pattern, gram_weights

__all__ = ["BASIS_COLUMNS", "row_basis", "basis_core", "constraint_models", "SparseGram",
           "sparse_gram", "gram_values", "hessian_form", "compact_size",
           "COMPACT_FLOATS_PER_DIM"]

#: basis columns a party sends a round: with its gradient, ≤ 50·d floats up a round
BASIS_COLUMNS = 48
#: a compact Hessian (a core, or sparse entries) sends at most this many floats per
#: feature a round (issue 20's budget: O(d·k) floats with k ≤ 50)
COMPACT_FLOATS_PER_DIM = 50


def hessian_form(party):
    """The compact form of the party's Hessian for ``inner="newton-basis"``: its
    :func:`sparse_gram` where :func:`compact_size` says sparse entries, else its
    :func:`row_basis` (either may be None: the party then sends its dense Hessian).
    Either sends at most ``COMPACT_FLOATS_PER_DIM``·d floats a round."""
    size = compact_size(party)
    if size is not None and size[0] == "gram":
        return sparse_gram(party.stacked.X)
    return row_basis(party)


def compact_size(party):
    """``(kind, floats, rows)`` of the party's compact Hessian, a bound computed without
    it: ``"gram"`` and its pattern's entries for sparse rows, ``"basis"`` and d × its
    rows; None when it may have none or may send more than
    ``COMPACT_FLOATS_PER_DIM``·d floats a round (:func:`hessian_form`;
    :func:`~constrfl.settings.choose_inner` picks ``"newton-basis"`` by it)."""
    rows = party.stacked
    if rows is None or party.n_eq:
        return None
    X = rows.X
    if isinstance(X, kernels.CSR):
        k = np.diff(X.indptr)
        n, d = k.size, X.ncols
        pattern = int(np.sum(k * (k + 1) // 2))
        if pattern <= min(d * min(n, d) / 2, COMPACT_FLOATS_PER_DIM * d):
            return "gram", pattern, n
    else:
        n, d = X.shape
    if 2 * n <= d and n * (n + 1) / 2 <= COMPACT_FLOATS_PER_DIM * d:
        return "basis", d * n, n
    return None


def row_basis(party):
    """``(B, Z)`` of (B1) for the party, or None when it has no such basis worth
    sending: functions other than row losses, equality constraints, rank r > d/2 (then
    its dense Hessian costs little more) or a core of more than
    ``COMPACT_FLOATS_PER_DIM``·d floats.  An SVD of the party's rows: the party
    side keeps it on its :class:`~constrfl.parties.PartyContext` for the solve."""
    rows = party.stacked
    if rows is None or party.n_eq:
        return None
    X = rows.X if isinstance(rows.X, np.ndarray) else rows.X.toarray()
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    keep = S > (S[0] if S.size else 0.0) * max(X.shape) * np.finfo(float).eps
    r = int(keep.sum())
    if 2 * r > X.shape[1] or r * (r + 1) / 2 > COMPACT_FLOATS_PER_DIM * X.shape[1]:
        return None
    B = np.ascontiguousarray(Vt[keep].T)
    return B, np.ascontiguousarray(U[:, keep] * S[keep])


def basis_core(party, basis, w, beta, mu, objective=True):
    """Cᵢ(w) of (B1): the stacked kernel on the rows Z at u = Bᵀw, ``basis`` the party's
    :func:`row_basis` (None without a basis, or when a value is not finite)."""
    if basis is None:
        return None
    B, Z = basis
    args = party.stacked.kernel_args(beta, mu, objective)
    _, _, C, _, finite = kernels.stacked_augmented(Z, *args[1:], B.T @ w, 2)
    return C if finite else None


def constraint_models(party, basis, w, beta, mu, objective=True):
    """Second-order models of the party's inequalities in its row basis (B6): the flat
    array [β, then for each cₗ: cₗ(w), μₗ, âₗ (r), the upper triangle of Kₗ], with
    ∇cₗ(w) = B âₗ and ∇²cₗ(w) = B Kₗ Bᵀ; None where the party has no basis or
    inequality, a constraint is not convex (its model would not be), or the models
    would take the party's upload a round past ``COMPACT_FLOATS_PER_DIM``·d floats
    (with its core and gradient)."""
    if basis is None or not party.n_ineq or not party.is_convex:
        return None
    B, Z = basis
    d, r = B.shape
    m, side = party.n_ineq, r * (r + 1) // 2
    if (m + 1) * side + m * (r + 2) + d + 1 > COMPACT_FLOATS_PER_DIM * d:
        return None
    _, y, s, term, logistic, A, o, a0, o0, mu, beta = party.stacked.kernel_args(
        beta, mu, objective)
    t, G, h = kernels.stacked_terms(Z, y, s, term, logistic, B.T @ w, True)
    c = A @ t + o
    grads = A @ G
    blocks = [np.array([beta])]
    for l in range(m):
        blocks += [[c[l], mu[l]], grads[l],
                   kernels.pack_upper(kernels.stacked_gram(Z, s, term, h, A[l]))]
    out = np.concatenate(blocks)
    return out if np.all(np.isfinite(out)) else None


@dataclass(frozen=True)
class SparseGram:
    """The upper triangle's pattern of XᵀX (``indptr``, ``indices``: compressed sparse
    rows of a d×d matrix) and ``weights``, the matrix that maps row weights ω to its
    values (entry e = (a, b) gets Σ_j ω_j x_ja x_jb), for (B4); ``bound`` = maxₑ Σ_j
    |weights_ej|, so that every value is at most bound·max|ω|."""

    indptr: np.ndarray
    indices: np.ndarray
    weights: sps.csr_matrix
    bound: float

    def pattern(self):
        """indptr and indices in one float64 array (the ``newton.basis`` reply)."""
        return np.concatenate([self.indptr, self.indices]).astype(np.float64)


def sparse_gram(X):
    """The :class:`SparseGram` of the rows X (a :class:`~constrfl.kernels.CSR`)
    (:func:`~constrfl.patterns.gram_pattern`, :func:`~constrfl.patterns.gram_weights`)."""
    indptr, indices = gram_pattern(X.indptr, X.indices, X.ncols)
    weights = gram_weights(X.indptr, X.indices, X.data, indptr, indices)
    bound = abs(weights) @ np.ones(weights.shape[1])
    return SparseGram(indptr, indices, weights, float(np.max(bound, initial=0.0)))


def gram_values(party, gram, w, beta, mu, objective=True):
    """``(values, L)`` of (B4) at w: the values of the upper triangle on ``gram``'s
    pattern and the rows √β ∇c_l of the active constraints (None when a value is not
    finite)."""
    weights = party.stacked.hessian_weights(w, beta, mu, objective)
    if weights is None:
        return None
    omega, L = weights
    values = gram.weights @ omega
    # |values| ≤ bound·max|ω|: far from overflowing, they need no pass (1.2 s of 25 at d = 10⁵)
    if not (gram.bound * np.max(np.abs(omega), initial=0.0) < 1e300
            or np.all(np.isfinite(values))):
        return None
    return values, L
