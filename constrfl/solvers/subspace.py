"""The server's Newton step from the parties' Hessians in their row bases
(``inner="newton-basis"``, docs/algorithms.md §5).

With the cores Cᵢ of (B1) (:mod:`constrfl.rowspace`), the dense Hessians H_D of the
parties without a basis, and μ = 1/η + λ,

    ∇²ψ = Σᵢ Bᵢ Cᵢ Bᵢᵀ + H_D + μI.                                              (B2)

Without dense parts and with R = Σᵢ rᵢ < d the step works in the union of the bases:
G = [B₁ … B_N] = QT (thin QR, done once a solve; Bᵢ = QTᵢ), and

    d = Q y − (g − QQᵀg)/μ,   (Σᵢ TᵢCᵢTᵢᵀ + μI) y = −Qᵀg,                         (B3)

an R×R system (T is block upper triangular: Tᵢ has as many rows as the bases up to
its own).  Otherwise (or with a weighted ridge, μ a vector) the d×d sum (B2) and its
Cholesky factorization.

Parties of sparse rows send (B4) instead of a core: their sparse entries Sᵢ (kept as
each party's upper triangle on its own pattern) and constraint rows Lᵢ, so that

    ∇²ψ = S + LᵀL + Σᵢ Bᵢ Cᵢ Bᵢᵀ + H_D + μI,   S = Σᵢ Sᵢ,                        (B5)

an operator whose products cost nnz(S) + O(d·(R + rows of L)) flops.  The Newton
direction then comes from conjugate gradients on (B5) with its diagonal as
preconditioner, to a relative residual of ``CG_RTOL``; with a nonsmooth P the proximal
Newton point argmin gᵀ(z − x) + ½(z − x)ᵀ∇²ψ(z − x) + P(z) from
:func:`.proxstep.prox_newton_point` (:func:`.modelprox.prox_gradient_point` for this
operator), stopped at dist∞(0, ∂model(z)) ≤ tol.  All of it is the server's: no rounds.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sps
from scipy.sparse.linalg import LinearOperator, cg

from .local import newton_direction

__all__ = ["BasisModel", "ModelHessian"]

#: relative residual of the conjugate gradients on (B5): the server's own work, so
#: near exact (the step then is the Newton step of the dense Hessian to ~8 digits)
CG_RTOL = 1e-8
#: cap on the products of one conjugate-gradient solve on (B5)
CG_MAX_ITER = 20000


class BasisModel:
    """(B2)–(B3); keeps the QR of the bases between steps (it depends on them only)."""

    def __init__(self):
        self._key, self._qr = None, None
        self._patterns = {}

    def direction(self, bases, cores, dense, mu, g):
        """The Newton direction −(∇²ψ)⁻¹g of (B2): ``bases`` maps a party to Bᵢᵀ
        (rᵢ × d) or its pattern (B4), ``cores`` to Cᵢ or its (B4) values, ``dense`` is
        H_D or None."""
        if any(isinstance(c, dict) for c in cores.values()):
            return self.operator(bases, cores, dense, mu, g.size).solve(-g, CG_RTOL)
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

    def operator(self, bases, cores, dense, mu, d):
        """∇²ψ of (B5) as a :class:`ModelHessian`."""
        grams = sorted(n for n, c in cores.items() if isinstance(c, dict))
        L = np.vstack([np.zeros((0, d))] + [cores[n]["lowrank"].reshape(-1, d)
                                            for n in grams])
        return ModelHessian(np.broadcast_to(np.asarray(mu, dtype=np.float64), (d,)),
                            [self._triangle(n, bases[n], cores[n]["gram"], d) for n in grams],
                            L, [(bases[n], cores[n]) for n in sorted(cores) if n not in grams],
                            dense)

    def _triangle(self, name, pattern, values, d):
        """Party ``name``'s Sᵢ of (B5) as its upper triangle, a CSR matrix on its own
        pattern (the integer pattern kept once a solve).  The parts are not summed: the sum
        on the union of the patterns cost 1.3 s a step at d = 10⁵ (26M entries; as a
        triangle 0.3 s) and a product with it as much as with the parts (measured: NP
        sparse d = 10⁵ with L1, 69 -> 56 s)."""
        if self._patterns.get(name, (None,))[0] is not pattern:
            self._patterns[name] = (pattern, pattern[:d + 1].astype(np.int64),
                                    pattern[d + 1:].astype(np.int64))
        _, indptr, indices = self._patterns[name]
        return sps.csr_matrix((values, indices, indptr), shape=(d, d))


class ModelHessian:
    """μI + S + LᵀL + Σ Bᵢ Cᵢ Bᵢᵀ + H_D of (B5) as an operator (μ a vector, S = Σᵢ Sᵢ
    given by the upper triangles Uᵢ (CSR) of its parts, L k × d, ``cores`` pairs
    (Bᵢᵀ, Cᵢ), H_D dense or None).  Sᵢv = Uᵢv + Uᵢᵀv − diag(Uᵢ)v."""

    def __init__(self, mu, parts, L, cores, dense):
        self.mu, self.parts, self.L, self.cores, self.dense = mu, parts, L, cores, dense
        self._transposed = [U.T for U in parts]   # once: per product, 20 s at d = 10⁵
        self._parts_diagonal = sum(U.diagonal() for U in parts)

    def __call__(self, v):
        out = self.mu * v + self.L.T @ (self.L @ v) - self._parts_diagonal * v
        for U, Ut in zip(self.parts, self._transposed):
            out += U @ v + Ut @ v
        for Bt, C in self.cores:
            out += Bt.T @ (C @ (Bt @ v))
        if self.dense is not None:
            out += self.dense @ v
        return out

    def diagonal(self):
        diag = self.mu + (self.L * self.L).sum(axis=0) + self._parts_diagonal
        for Bt, C in self.cores:
            diag = diag + ((C @ Bt) * Bt).sum(axis=0)
        if self.dense is not None:
            diag = diag + np.diag(self.dense)
        return diag

    def restricted(self, keep):
        """The principal submatrix on the coordinates ``keep`` (a boolean mask), its
        sparse parts summed into one (a working set: one product instead of one a
        party)."""
        if keep.all():
            return self
        parts = [U[keep][:, keep] for U in self.parts]
        return ModelHessian(self.mu[keep], [sum(parts[1:], parts[0]).tocsr()] if parts else [],
                            self.L[:, keep], [(Bt[:, keep], C) for Bt, C in self.cores],
                            None if self.dense is None else self.dense[np.ix_(keep, keep)])

    def without_lowrank(self):
        return ModelHessian(self.mu, self.parts, self.L[:0], self.cores, self.dense)

    def solve(self, b, rtol, maxiter=CG_MAX_ITER, shift=0.0):
        """(H + diag shift)⁻¹b by conjugate gradients, Jacobi preconditioned, to a
        relative residual of ``rtol``."""
        n = b.size
        diag = self.diagonal() + shift
        A = LinearOperator((n, n), matvec=lambda v: self(v) + shift * v, dtype=np.float64)
        M = LinearOperator((n, n), matvec=lambda v: v / diag, dtype=np.float64)
        return cg(A, b, rtol=rtol, atol=0.0, maxiter=maxiter, M=M)[0]
