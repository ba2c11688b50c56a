"""The server's Newton step from the parties' Hessians in their row bases
(``inner="newton-basis"``, docs/algorithms.md §5c).

With the cores Cᵢ of (B1) (:mod:`constrfl.rowspace`), the dense Hessians H_D of the
parties without a basis, and μ = 1/β + λ,

    ∇²ψ = Σᵢ Bᵢ Cᵢ Bᵢᵀ + H_D + μI.                                              (B2)

Without dense parts and with R = Σᵢ rᵢ < d the step works in the union of the bases:
G = [B₁ … B_N] = QT (thin QR, done once a solve; Bᵢ = QTᵢ), and

    d = Q y − (g − QQᵀg)/μ,   (Σᵢ TᵢCᵢTᵢᵀ + μI) y = −Qᵀg,                         (B3)

an R×R system (T is block upper triangular: Tᵢ has as many rows as the bases up to
its own).  Otherwise (or with a weighted ridge, μ a vector) the d×d sum (B2) and its
Cholesky factorization.
"""
from __future__ import annotations

import numpy as np

from .local import newton_direction

__all__ = ["BasisModel"]


class BasisModel:
    """(B2)–(B3); keeps the QR of the bases between steps (it depends on them only)."""

    def __init__(self):
        self._key, self._qr = None, None

    def direction(self, bases, cores, dense, mu, g):
        """The Newton direction −(∇²ψ)⁻¹g of (B2): ``bases`` maps a party to Bᵢᵀ
        (rᵢ × d), ``cores`` to Cᵢ, ``dense`` is H_D or None."""
        names = sorted(cores)
        R, d = sum(cores[n].shape[0] for n in names), g.size
        if dense is not None or R >= d or np.ndim(mu):
            H = np.zeros((d, d)) if dense is None else dense.copy()
            for n in names:
                H += bases[n].T @ (cores[n] @ bases[n])
            H.flat[::d + 1] += mu
            return newton_direction(H, g)
        Q, T, ends = self._union(names, bases)
        M = np.zeros((R, R))
        start = 0
        for n, end in zip(names, ends):
            Ti = T[:end, start:end]
            M[:end, :end] += Ti @ cores[n] @ Ti.T
            start = end
        M.flat[::R + 1] += mu
        Qg = Q.T @ g
        return Q @ newton_direction(M, Qg) - (g - Q @ Qg) / mu

    def _union(self, names, bases):
        key = tuple((n, bases[n].shape) for n in names)
        if key != self._key:
            Q, T = np.linalg.qr(np.vstack([bases[n] for n in names]).T)
            self._key = key
            self._qr = Q, T, np.cumsum([bases[n].shape[0] for n in names])
        return self._qr
