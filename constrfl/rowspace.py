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
"""
from __future__ import annotations

import numpy as np

from . import kernels

__all__ = ["BASIS_COLUMNS", "row_basis", "basis_core"]

#: basis columns a party sends a round: with its gradient, ≤ 50·d floats up a round
BASIS_COLUMNS = 48


def row_basis(party):
    """``(B, Z)`` of (B1) for the party, or None when it has no such basis worth
    sending: functions other than row losses, equality constraints, or rank r > d/2
    (then its dense Hessian costs little more).  An SVD of the party's rows: the party
    side keeps it on its :class:`~constrfl.parties.PartyContext` for the solve."""
    rows = party.stacked
    if rows is None or party.n_eq:
        return None
    X = rows.X if isinstance(rows.X, np.ndarray) else rows.X.toarray()
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    keep = S > (S[0] if S.size else 0.0) * max(X.shape) * np.finfo(float).eps
    if 2 * int(keep.sum()) > X.shape[1]:
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
