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
direction then comes from conjugate gradients on (B5), preconditioned by the diagonal
and LᵀL (:meth:`ModelHessian.solve`), to a relative residual of ``CG_RTOL``; with a
nonsmooth P the proximal Newton point argmin gᵀ(z − x) + ½(z − x)ᵀ∇²ψ(z − x) + P(z) from
:func:`.proxstep.prox_newton_point` (:func:`.modelprox.prox_gradient_point` for this
operator), stopped at dist∞(0, ∂model(z)) ≤ tol.  All of it is the server's: no rounds.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sps
from scipy.linalg import cho_factor, cho_solve
from scipy.sparse.linalg import LinearOperator, cg

from ..patterns import principal_triangle
from ..local import newton_direction
from .penaltymodel import model_step, parse_models

__all__ = ["BasisModel", "ModelHessian", "Triangles"]

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

    def direction(self, bases, cores, dense, mu, g, models=None, check=None):
        """The Newton direction −(∇²ψ)⁻¹g of (B2): ``bases`` maps a party to Bᵢᵀ
        (rᵢ × d) or its pattern (B4), ``cores`` to Cᵢ or its (B4) values, ``dense`` is
        H_D or None; with ``models`` (a party's ``models`` reply, (B6)) the minimizer of
        the model with those parties' inequalities to second order
        (:func:`.penaltymodel.model_step`); ``check``: :meth:`operator`'s."""
        if any(isinstance(c, dict) for c in cores.values()):
            return self.operator(bases, cores, dense, mu, g.size,
                                 check).solve(-g, CG_RTOL)
        names = sorted(cores)
        R, d = sum(cores[n].shape[0] for n in names), g.size
        if dense is not None or R >= d or np.ndim(mu):
            H = np.zeros((d, d)) if dense is None else dense.copy()
            for n in names:
                H += bases[n].T @ (cores[n] @ bases[n])
            H.flat[::d + 1] += mu
            return _step(H, g, {n: bases[n].T for n in names}, models)
        Q, T, ends = self._union(names, bases)
        M = np.zeros((R, R))
        start, maps = 0, {}
        for n, end in zip(names, ends):
            maps[n] = Ti = T[:end, start:end]
            M[:end, :end] += Ti @ cores[n] @ Ti.T
            start = end
        M.flat[::R + 1] += mu
        Qg = Q.T @ g
        return Q @ _step(M, Qg, maps, models) - (g - Q @ Qg) / mu

    def _union(self, names, bases):
        key = tuple((n, bases[n].shape) for n in names)
        if key != self._key:
            Q, T = np.linalg.qr(np.vstack([bases[n] for n in names]).T)
            self._key = key
            self._qr = Q, T, np.cumsum([bases[n].shape[0] for n in names])
        return self._qr

    def operator(self, bases, cores, dense, mu, d, check=None):
        """∇²ψ of (B5) as a :class:`ModelHessian` (``check``: its)."""
        grams = sorted(n for n, c in cores.items() if isinstance(c, dict))
        L = np.vstack([np.zeros((0, d))] + [cores[n]["lowrank"].reshape(-1, d)
                                            for n in grams])
        parts, diagonal = [], np.zeros(d)
        for n in grams:
            U, on_diagonal, diagonal_rows = self._triangle(n, bases[n], cores[n]["gram"], d)
            parts.append(U)
            diagonal[diagonal_rows] += U.data[on_diagonal]
        return ModelHessian(np.broadcast_to(np.asarray(mu, dtype=np.float64), (d,)),
                            Triangles(parts, diagonal) if parts else None, L,
                            [(bases[n], cores[n]) for n in sorted(cores) if n not in grams],
                            dense, check)

    def _triangle(self, name, pattern, values, d):
        """``(Uᵢ, positions, rows)``: party ``name``'s Sᵢ of (B5) as its upper triangle, a
        CSR matrix on its own pattern, and where its diagonal entries are.  The integer
        pattern is kept once a solve (int32 where it fits, as scipy would make it: so that
        no step converts or scans it again).  The parts are not summed: the sum on the
        union of the patterns cost 1.3 s a step at d = 10⁵ (26M entries; as a triangle
        0.3 s) and a product with it as much as with the parts (measured: NP sparse
        d = 10⁵ with L1, 69 -> 56 s)."""
        if self._patterns.get(name, (None,))[0] is not pattern:
            index = np.int32 if pattern.size < np.iinfo(np.int32).max else np.int64
            indptr, indices = pattern[:d + 1].astype(index), pattern[d + 1:].astype(index)
            rows = np.repeat(np.arange(d, dtype=index), np.diff(indptr))
            on_diagonal = np.flatnonzero(indices == rows)
            self._patterns[name] = pattern, indptr, indices, on_diagonal, rows[on_diagonal]
        _, indptr, indices, on_diagonal, diagonal_rows = self._patterns[name]
        return (sps.csr_matrix((values, indices, indptr), shape=(d, d)), on_diagonal,
                diagonal_rows)


def _step(M, g, maps, models):
    """−M⁻¹g, or with ``models`` the minimizer of (B6), party n's basis coordinates being
    ``maps[n]ᵀ`` times the first rows of x."""
    if models:
        return model_step(M, g, {n: parse_models(models[n], maps[n])
                                 for n in sorted(models) if n in maps})
    return newton_direction(M, g)


class ModelHessian:
    """μI + S + LᵀL + Σ Bᵢ Cᵢ Bᵢᵀ + H_D of (B5) as an operator (μ a vector, S the
    :class:`Triangles` of the sparse parts or None, L k × d, ``cores`` pairs (Bᵢᵀ, Cᵢ),
    H_D dense or None).  ``check()`` (the solve's
    :meth:`~constrfl.control.SolveControl.check`, or None) is called at every product,
    so that max_time and Ctrl-C end the server's iterative solves with the model (its
    proximal Newton point may take 20,000 iterations between two rounds: NP sparse
    5,000 × 5,000, ℓ1, ``private=False``, ``max_time=120`` returned after 231 s)."""

    def __init__(self, mu, S, L, cores, dense, check=None):
        self.mu, self.S, self.L, self.cores, self.dense = mu, S, L, cores, dense
        self.check = check

    @classmethod
    def of_matrix(cls, H, check=None):
        """A dense d×d matrix H as the operator (its H_D alone)."""
        d = H.shape[0]
        return cls(np.zeros(d), None, np.zeros((0, d)), [], H, check)

    def __call__(self, v):
        if self.check is not None:
            self.check()
        out = self.mu * v + self.L.T @ (self.L @ v)
        if self.S is not None:
            out += self.S @ v
        for Bt, C in self.cores:
            out += Bt.T @ (C @ (Bt @ v))
        if self.dense is not None:
            out += self.dense @ v
        return out

    def diagonal(self, lowrank=True):
        """H's diagonal (without LᵀL's where ``lowrank`` is False)."""
        diag = self.mu if self.S is None else self.mu + self.S.diagonal
        if lowrank:
            diag = diag + (self.L * self.L).sum(axis=0)
        for Bt, C in self.cores:
            diag = diag + ((C @ Bt) * Bt).sum(axis=0)
        if self.dense is not None:
            diag = diag + np.diag(self.dense)
        return diag

    def restricted(self, keep):
        """The principal submatrix on the coordinates ``keep`` (a boolean mask)."""
        if keep.all():
            return self
        return ModelHessian(self.mu[keep], None if self.S is None else self.S.restricted(keep),
                            self.L[:, keep], [(Bt[:, keep], C) for Bt, C in self.cores],
                            None if self.dense is None else self.dense[np.ix_(keep, keep)],
                            self.check)

    def without_lowrank(self):
        return ModelHessian(self.mu, self.S, self.L[:0], self.cores, self.dense, self.check)

    def solve(self, b, rtol, maxiter=CG_MAX_ITER, shift=0.0):
        """(H + diag shift)⁻¹b by conjugate gradients to a relative residual of ``rtol``,
        preconditioned by :meth:`preconditioner` (measured, NP sparse d = 10⁵ with L1:
        208 -> 11 products a solve against the diagonal of H alone)."""
        n = b.size
        A = LinearOperator((n, n), matvec=lambda v: self(v) + shift * v, dtype=np.float64)
        M = LinearOperator((n, n), matvec=self.preconditioner(shift), dtype=np.float64)
        return cg(A, b, rtol=rtol, atol=0.0, maxiter=maxiter, M=M)[0]

    def preconditioner(self, shift=0.0):
        """v ↦ M⁻¹v for M = D + LᵀL, D the diagonal of the rest (plus ``shift``), by the
        Sherman–Morrison–Woodbury formula M⁻¹v = D⁻¹v − D⁻¹Lᵀ(I + LD⁻¹Lᵀ)⁻¹LD⁻¹v: the
        constraint rows (β∇c∇cᵀ, a few eigenvalues β times the rest's) exactly, the rest
        by its diagonal."""
        diag = self.diagonal(lowrank=False) + shift
        LD = self.L / diag
        factor = cho_factor(np.eye(self.L.shape[0]) + LD @ self.L.T)
        return lambda v: v / diag - LD.T @ cho_solve(factor, LD @ v)


class Triangles:
    """S = Σᵢ Sᵢ of (B5), or a principal submatrix of it, from upper triangles Uᵢ (CSR):
    Sᵢv = Uᵢv + Uᵢᵀv − diag(Uᵢ)v.  ``diagonal`` is S's diagonal; ``embed`` (or None)
    the coordinates of the Uᵢ that S keeps, its products then taken with the whole
    Uᵢ.  A principal submatrix on at most half the coordinates is formed at once (one
    triangle, :func:`~constrfl.patterns.principal_triangle`: it costs about a product
    with the whole); on more, it is a view until its ``FORM_AFTER``-th product (forming
    costs a few products with the whole, and many solves take few: ski rental, never
    much more than the better choice; measured, NP sparse d = 10⁵ with L1, whose first
    working sets hold 87–99% of the coordinates: forming each at once cost 0.4–0.8 s)."""

    #: products with the whole triangles before a principal submatrix is formed
    FORM_AFTER = 4

    def __init__(self, parts, diagonal, embed=None):
        self.parts, self.diagonal, self.embed = parts, diagonal, embed
        self._transposed = [U.T for U in parts]   # once: per product, 20 s at d = 10⁵
        self._products = 0

    def __matmul__(self, v):
        if self.embed is not None:
            self._products += 1
            if self._products > self.FORM_AFTER:
                self._form()
        if self.embed is None:
            return self._sum(v) - self.diagonal * v
        whole = np.zeros(self.parts[0].shape[0])
        whole[self.embed] = v
        return self._sum(whole)[self.embed] - self.diagonal * v

    def _sum(self, v):
        """Σᵢ (Uᵢ + Uᵢᵀ)v."""
        out = np.zeros_like(v)
        for U, Ut in zip(self.parts, self._transposed):
            out += U @ v
            out += Ut @ v
        return out

    def restricted(self, keep):
        """The principal submatrix on ``keep`` (a boolean mask): a view where it keeps
        more than half of the whole's coordinates, else formed at once."""
        out = Triangles(self.parts, self.diagonal[keep],
                        np.flatnonzero(keep) if self.embed is None else self.embed[keep])
        if 2 * out.embed.size <= self.parts[0].shape[0]:
            out._form()
        return out

    def _form(self):
        keep = np.zeros(self.parts[0].shape[0], dtype=bool)
        keep[self.embed] = True
        self.parts = [principal_triangle(self.parts, keep)]
        self._transposed = [self.parts[0].T]
        self.embed = None
