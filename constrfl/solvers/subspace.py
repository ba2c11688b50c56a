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

Parties of sparse rows send (B4) instead of a core: their sparse entries Sᵢ (summed on
the union of the patterns) and constraint rows Lᵢ, so that

    ∇²ψ = S + LᵀL + Σᵢ Bᵢ Cᵢ Bᵢᵀ + H_D + μI,   S = Σᵢ Sᵢ,                        (B5)

an operator whose products cost nnz(S) + O(d·(R + rows of L)) flops.  The Newton
direction then comes from conjugate gradients on (B5) with its diagonal as
preconditioner, to a relative residual of ``CG_RTOL``; with a nonsmooth P the proximal
Newton point argmin gᵀ(z − x) + ½(z − x)ᵀ∇²ψ(z − x) + P(z) from an active-set Newton
method on that model (:func:`prox_gradient_point`), stopped at dist∞(0, ∂model(z)) ≤
tol, exactly as :func:`.proxstep.prox_newton_point` is.  All of it is the server's: no rounds.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sps
from scipy.sparse.linalg import LinearOperator, cg

from .local import newton_direction

__all__ = ["BasisModel", "prox_gradient_point"]

#: relative residual of the conjugate gradients on (B5): the server's own work, so
#: near exact (the step then is the Newton step of the dense Hessian to ~8 digits)
CG_RTOL = 1e-8
#: cap on the products of one server-side solve on (B5)
MODEL_MAX_ITER = 20000
#: iterations of the accelerated proximal gradient method between Newton tries
NEWTON_EVERY = 5
#: relative residual and cap of the conjugate gradients of a Newton try (a candidate
#: step, kept only where it lowers the model: inexact is enough)
NEWTON_RTOL, NEWTON_MAX_CG = 1e-2, 500


class BasisModel:
    """(B2)–(B3); keeps the QR of the bases between steps (it depends on them only)."""

    def __init__(self):
        self._key, self._qr = None, None
        self._pattern_key, self._pattern = None, None

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
                            self._gram_sum(grams, bases, cores, d) if grams else None, L,
                            [(bases[n], cores[n]) for n in sorted(cores) if n not in grams],
                            dense)

    def prox_point(self, bases, cores, dense, mu, x, g, P, tol):
        """The proximal Newton point of the model (B5) at x (see the module docstring)."""
        return prox_gradient_point(self.operator(bases, cores, dense, mu, x.size), x, g, P,
                                   tol)

    def _gram_sum(self, names, bases, cores, d):
        """S = Σᵢ Sᵢ of (B5) as a symmetric CSR matrix on the union of the patterns (the
        union and where each party's entries land in it: once a solve)."""
        key = tuple((n, bases[n].size) for n in names)
        if key != self._pattern_key:
            rows, cols = [], []
            for n in names:
                indptr = bases[n][:d + 1].astype(np.int64)
                rows.append(np.repeat(np.arange(d), np.diff(indptr)))
                cols.append(bases[n][d + 1:].astype(np.int64))
            r, c = np.concatenate(rows), np.concatenate(cols)
            off = r != c
            keys, where = np.unique(np.concatenate([r * d + c, c[off] * d + r[off]]),
                                    return_inverse=True)
            indptr = np.zeros(d + 1, dtype=np.int64)
            np.cumsum(np.bincount(keys // d, minlength=d), out=indptr[1:])
            self._pattern_key = key
            self._pattern = indptr, keys % d, where.ravel(), off, r.size
        indptr, indices, where, off, m = self._pattern
        values = np.concatenate([cores[n]["gram"] for n in names])
        data = np.bincount(where, np.concatenate([values, values[off]]),
                           minlength=indices.size)
        return sps.csr_matrix((data, indices, indptr), shape=(d, d))


class ModelHessian:
    """μI + S + LᵀL + Σ Bᵢ Cᵢ Bᵢᵀ + H_D of (B5) as an operator (μ a vector, S sparse or
    None, L k × d, ``cores`` pairs (Bᵢᵀ, Cᵢ), H_D dense or None)."""

    def __init__(self, mu, S, L, cores, dense):
        self.mu, self.S, self.L, self.cores, self.dense = mu, S, L, cores, dense

    def __call__(self, v):
        out = self.mu * v + self.L.T @ (self.L @ v)
        if self.S is not None:
            out += self.S @ v
        for Bt, C in self.cores:
            out += Bt.T @ (C @ (Bt @ v))
        if self.dense is not None:
            out += self.dense @ v
        return out

    def diagonal(self):
        diag = self.mu + (self.L * self.L).sum(axis=0)
        if self.S is not None:
            diag = diag + self.S.diagonal()
        for Bt, C in self.cores:
            diag = diag + ((C @ Bt) * Bt).sum(axis=0)
        if self.dense is not None:
            diag = diag + np.diag(self.dense)
        return diag

    def restricted(self, keep):
        """The principal submatrix on the coordinates ``keep`` (a boolean mask)."""
        return ModelHessian(self.mu[keep], None if self.S is None else self.S[keep][:, keep],
                            self.L[:, keep], [(Bt[:, keep], C) for Bt, C in self.cores],
                            None if self.dense is None else self.dense[np.ix_(keep, keep)])

    def without_lowrank(self):
        return ModelHessian(self.mu, self.S, self.L[:0], self.cores, self.dense)

    def solve(self, b, rtol, maxiter=MODEL_MAX_ITER, shift=0.0):
        """(H + diag shift)⁻¹b by conjugate gradients, Jacobi preconditioned, to a
        relative residual of ``rtol``."""
        n = b.size
        diag = self.diagonal() + shift
        A = LinearOperator((n, n), matvec=lambda v: self(v) + shift * v, dtype=np.float64)
        M = LinearOperator((n, n), matvec=lambda v: v / diag, dtype=np.float64)
        return cg(A, b, rtol=rtol, atol=0.0, maxiter=maxiter, M=M)[0]


def prox_gradient_point(H, x, g, P, tol, max_iter=MODEL_MAX_ITER):
    """argmin_z m(z) = gᵀ(z − x) + ½(z − x)ᵀH(z − x) + P(z) for a positive definite
    :class:`ModelHessian` H, stopped once dist∞(0, ∂m(z)) ≤ tol (``P.dist``, exact).
    Its few rows L (H = rest + LᵀL) carry most of its curvature (β∇c∇cᵀ of the active
    constraints).

    The accelerated proximal gradient method (Beck & Teboulle 2009) with adaptive
    restart (O'Donoghue & Candès 2015) in the metric M = cI + LᵀL ⪰ H (c ≥ the largest
    eigenvalue of ``rest``: ten power iterations, doubled where a step shows more
    curvature), so that LᵀL costs it nothing (:func:`_metric_prox`).  For a piecewise
    quadratic P (:meth:`~constrfl.prox.Regularizer.pieces`) every ``NEWTON_EVERY``-th
    iteration also tries a Newton step on the pieces its proximal gradient point z̄ is
    on (the semismooth Newton method on the proximal gradient map, Patrinos & Bemporad
    2013; Li, Sun & Toh 2018): the coordinates z̄ puts on a kink or bound go there, the
    others solve (H + diag q)_FF δ_F = −(∇m on z̄'s pieces)_F by conjugate gradients
    (Jacobi preconditioned); the step, kept on z̄'s pieces, replaces the iterate (and
    restarts the momentum) where it lowers m more."""
    pieces = P.pieces(x.size)
    L = H.L if pieces is not None else H.L[:0]
    c = _largest_eigenvalue(H.without_lowrank() if pieces is not None else H, x.size)
    z, Hz = x.copy(), np.zeros_like(x)                      # Hz = H(z − x)
    y, Hy, t = z, Hz, 1.0
    nu = np.zeros(L.shape[0])                               # the metric prox's dual
    for it in range(max_iter):
        G = g + Hy
        bar, nu = _metric_prox(P, pieces, y, G, c, L, nu)
        H_bar = H(bar - x)
        step, H_step = bar - y, H_bar - Hy
        Ls = L @ step
        if float(step @ H_step) > (c * float(step @ step) + float(Ls @ Ls)) * (1 + 1e-12):
            c *= 2.0                                        # more curvature: shorter steps
            continue
        if P.dist(bar, g + H_bar) <= tol:
            return bar
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        restart = float((y - bar) @ (bar - z)) > 0
        if pieces is not None and it % NEWTON_EVERY == 0:
            newton = _newton_on_pieces(H, pieces, P, x, g, y, G, bar,
                                       _model_value(g, bar - x, H_bar, P, bar))
            if newton is not None:
                (bar, H_bar), restart = newton, True
                if P.dist(bar, g + H_bar) <= tol:
                    return bar
        if restart:
            y, Hy, t_next = bar, H_bar, 1.0
        else:
            theta = (t - 1.0) / t_next
            y, Hy = bar + theta * (bar - z), H_bar + theta * (H_bar - Hz)
        z, Hz, t = bar, H_bar, t_next
    return z


def _metric_prox(P, pieces, y, G, c, L, nu):
    """``(z, ν)``: argmin_z P(z) + Gᵀ(z − y) + ½(z − y)ᵀ(cI + LᵀL)(z − y), L (k × d)
    small, by its dual in ν ∈ ℝᵏ: z(ν) = prox_{P/c}(y − (G + Lᵀν)/c) and ν = L(z(ν) −
    y), the gradient of the strongly convex Φ(ν) = ½‖ν‖² − min_z [P(z) + Gᵀ(z − y) +
    c/2‖z − y‖² + νᵀL(z − y)] set to zero by Newton's method from ``nu`` (its Jacobian
    I + L J Lᵀ/c, J the derivative of the separable prox: 1/(1 + q/c) off the kinks and
    bounds, else 0), a step kept where it lowers Φ (Armijo) or halves ‖∇Φ‖; it stops
    at ‖∇Φ‖ ≤ 10⁻¹²(1 + ‖ν‖) or when no step helps."""
    base = y - G / c
    if not L.shape[0]:
        return P.prox(base, 1.0 / c), nu
    q, lam, lo, hi = pieces

    def primal(nu):
        z = P.prox(base - (L.T @ nu) / c, 1.0 / c)
        dz = z - y
        Ld = L @ dz
        phi = 0.5 * float(nu @ nu) - (P.value(z) + float(G @ dz) + 0.5 * c * float(dz @ dz)
                                      + float(nu @ Ld))
        return z, nu - Ld, phi
    z, F, phi = primal(nu)
    for _ in range(50):
        size = float(np.linalg.norm(F))
        if size <= 1e-12 * (1.0 + float(np.linalg.norm(nu))):
            break
        J = np.where(((lam == 0) | (z != 0)) & (z > lo) & (z < hi), 1.0 / (1.0 + q / c), 0.0)
        step = -np.linalg.solve(np.eye(L.shape[0]) + (L * J) @ L.T / c, F)
        t = 1.0
        for _ in range(30):
            z_t, F_t, phi_t = primal(nu + t * step)
            if (phi_t <= phi + 1e-4 * t * float(F @ step)
                    or np.linalg.norm(F_t) <= 0.5 * size):
                break
            t *= 0.5
        else:
            break
        nu, z, F, phi = nu + t * step, z_t, F_t, phi_t
    return z, nu


def _model_value(g, dz, Hdz, P, z):
    return float(g @ dz) + 0.5 * float(dz @ Hdz) + P.value(z)


def _largest_eigenvalue(H, n):
    """1.1 × ten power iterations' estimate of H's largest eigenvalue."""
    v = np.random.default_rng(0).standard_normal(n)
    for _ in range(10):
        v = H(v / np.linalg.norm(v))
    return 1.1 * float(np.linalg.norm(v))


def _newton_on_pieces(H, pieces, P, x, g, z, G, bar, m_bar):
    """The Newton step of :func:`prox_gradient_point` from z on the pieces of z̄:
    ``(z⁺, H(z⁺ − x))`` when it lowers m below m(z̄), else None."""
    q, lam, lo, hi = pieces
    side = np.sign(bar)
    free = ((lam == 0) | (side != 0)) & (bar > lo) & (bar < hi)
    if not free.any():
        return None
    delta = np.where(free, 0.0, bar - z)                    # pinned: onto their kinks
    rhs = -(G + q * z + lam * side + H(delta))[free]
    delta[free] = H.restricted(free).solve(rhs, NEWTON_RTOL, NEWTON_MAX_CG, shift=q[free])
    t = 1.0
    for _ in range(20):
        trial = np.where(free, z + t * delta, bar)          # pinned: on their kinks at any t
        trial = np.clip(np.where((lam > 0) & (np.sign(trial) != side), 0.0, trial), lo, hi)
        dz = trial - x
        Hdz = H(dz)
        if _model_value(g, dz, Hdz, P, trial) < m_bar:
            return trial, Hdz
        t *= 0.5
    return None
