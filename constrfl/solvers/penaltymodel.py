"""The Newton step with the parties' inequalities modelled to second order
(``inner="newton-basis"``, docs/algorithms.md §5, (B6)).

Newton's quadratic model of ALᵢ keeps β∇cₗ∇cₗᵀ + uₗ∇²cₗ, u = [μ + βc]₊: the penalty's
curvature at x.  Where the constraints' level sets curve (saturated logistic losses) the
penalty's valley bends away from that model, and the step has to be halved: steps
alternate full and halved, tens of them (NP, d = 5,000, 20 × 200 rows: 101 rounds).  With
each party's quadratic model of each inequality, qₗ(z) = cₗ + âₗᵀz + ½zᵀKₗz in its basis
coordinates z = Vₗᵀx (:func:`~constrfl.rowspace.constraint_models`), the server minimizes

    m(x) = gᵀx + ½xᵀMx + Σₗ ψₗ(Vₗᵀx),
    ψₗ(z) = φₗ(z) − φₗ(0) − uₗâₗᵀz − ½zᵀ(uₗKₗ + β[uₗ > 0]âₗâₗᵀ)z,
    φₗ(z) = [μₗ + βqₗ(z)]₊² / 2β                                                  (B6)

(M the Newton matrix (B2)/(B3), g the gradient): the Newton model with each penalty's
second-order Taylor term replaced by the penalty of the constraint's quadratic model.
m is convex where every Kₗ ⪰ 0 (the parties send models of convex constraints only) and
its gradient at 0 is g, so m(x) < m(0) = 0 makes x a descent direction (gᵀx ≤ m(x)).

Its minimizer by Newton-type steps H(λ)dx = −∇m(x) (:func:`model_step`), where H(λ) is
∇²m with the Kₗ weighted by multipliers λ carried as unknowns of their own, updated to
the linearized [μ + βqₗ]₊ after each step (a primal-dual Newton method: λ need not follow
x through the penalty's steep walls, which is what makes plain Newton on m slow, ~60
steps against ~10 on the scaled d = 5,000 rows).  H(λ) ≻ 0 for λ ≥ 0, so each step is a
descent direction of m.  H(λ) is the Newton matrix with the cores changed to
Cᵢ − (uK + β[u>0]ââᵀ) + λK + β Σ_{active} bbᵀ, b = â + Kz; the first step, from (0, u),
is the plain Newton step.  All of it is the server's work: no rounds.
"""
from __future__ import annotations

import numpy as np

from ..local import newton_direction

__all__ = ["ConstraintModel", "parse_models", "model_step"]

#: primal-dual steps on the model at most; its stop test ‖∇m‖₂ ≤ MODEL_RTOL·‖g‖₂
MODEL_MAX_STEPS = 50
MODEL_RTOL = 1e-9
#: steps taken whole before steps are backtracked on m
FREE_STEPS = 25
#: floats of the parties' VₙKₗVₙᵀ kept for one step's model (4 GB), else VₙΔₙVₙᵀ each time
CACHE_FLOATS = 5e8


class ConstraintModel:
    """One party's inequalities as quadratics in its basis coordinates z = Vᵀx[:k]
    (V: k × r, k the coordinates its basis reaches: a party's columns of the triangular
    T of (B3) are zero below its own rows): values c, multipliers μ, gradients Â (rows),
    Hessians K (m × r × r), penalty β."""

    def __init__(self, V, beta, c, mu, grads, hessians):
        self.V, self.beta, self.c, self.mu = V, beta, c, mu
        self.A, self.K = grads, hessians
        self.u = np.maximum(mu + beta * c, 0.0)

    def at(self, x):
        """``(z, q, b)``: the basis coordinates of x, the models' values qₗ(z) and
        gradients bₗ = âₗ + Kₗz (rows)."""
        z = self.V.T @ x[:self.V.shape[0]]
        Kz = self.K @ z
        return z, self.c + self.A @ z + 0.5 * Kz @ z, self.A + Kz

    def taylor(self, z):
        """(uK + β[u > 0]ââᵀ)z: the second-order Taylor term of the penalty at 0."""
        on = self.u > 0
        return self.u @ (self.K @ z) + self.beta * (self.A[on] @ z) @ self.A[on]

    def core_change(self, lam, b, active):
        """The party's core at the primal-dual point minus its core at x:
        Σₗ (λₗ − uₗ)Kₗ + β(Σ_{active} bₗbₗᵀ − Σ_{u > 0} âₗâₗᵀ)."""
        on = self.u > 0
        return (np.tensordot(lam - self.u, self.K, 1) + self.beta * (b[active].T @ b[active])
                - self.beta * (self.A[on].T @ self.A[on]))


def parse_models(flat, V):
    """The :class:`ConstraintModel` of a party's ``models`` reply
    (:func:`~constrfl.rowspace.constraint_models`), V its basis map."""
    r = V.shape[1]
    side = r * (r + 1) // 2
    beta, blocks = float(flat[0]), flat[1:].reshape(-1, 2 + r + side)
    upper = np.triu_indices(r)
    K = np.zeros((blocks.shape[0], r, r))
    for l, block in enumerate(blocks):
        K[l][upper] = block[2 + r:]
        K[l] = K[l] + np.triu(K[l], 1).T
    return ConstraintModel(V, beta, blocks[:, 0].copy(), blocks[:, 1].copy(),
                           np.ascontiguousarray(blocks[:, 2:2 + r]), K)


def model_step(M, g, models):
    """The minimizer of m of (B6) by primal-dual Newton steps from (0, u): M the Newton
    matrix, g the gradient, ``models`` maps a party to its :class:`ConstraintModel`.
    Full steps first (backtracking on m costs them their speed: 50 steps against 12 on
    the scaled d = 5,000 rows); where those have not converged after ``FREE_STEPS``,
    steps backtracked on m from the best point so far, with λ = [μ + βq]₊ there.  The
    best point if m is below 0 there (a descent direction), else the plain Newton step
    −M⁻¹g, the first step (a model that is not convex, or not solved)."""
    x = np.zeros_like(g)
    newton = newton_direction(M, g)
    lam = {n: part.u for n, part in models.items()}
    point = _model(M, g, models, x)
    best = x, point
    gnorm = float(np.linalg.norm(g))
    build = _builder(M, models)
    for step in range(MODEL_MAX_STEPS):
        val, grad, pieces = point
        if not np.isfinite(val):
            break
        if np.linalg.norm(grad) <= MODEL_RTOL * gnorm:
            best = x, point
            break
        if step == FREE_STEPS:                          # from here on, backtracking
            x, point = best
            val, grad, pieces = point
            lam = {n: np.maximum(target, 0.0) for n, (target, _, _) in pieces.items()}
        dx = newton if step == 0 else newton_direction(build(lam, pieces), grad)
        slope = float(grad @ dx)
        if not slope < 0:
            break
        t = 1.0
        while True:
            point = _model(M, g, models, x + t * dx)
            if step < FREE_STEPS or point[0] <= val + 1e-4 * t * slope or t < 1e-10:
                break
            t *= 0.5
        for n, (target, active, b) in pieces.items():       # the linearized multipliers
            V, beta = models[n].V, models[n].beta
            linear = np.where(active, target + beta * (b @ (V.T @ dx[:V.shape[0]])), 0.0)
            lam[n] = (1 - t) * lam[n] + t * np.maximum(linear, 0.0)
        x = x + t * dx
        if point[0] < best[1][0]:
            best = x, point
        elif step >= FREE_STEPS:
            break
    x, (val, _, _) = best
    return x if np.isfinite(val) and val < 0 else newton


def _builder(M, models):
    """A function (λ, pieces) ↦ H(λ) = M + Σₙ Vₙ Δₙ Vₙᵀ, Δₙ the party's
    :meth:`ConstraintModel.core_change`.  With the Gₙₗ = VₙKₗVₙᵀ kept (formed at the first
    call, with H₀ = M − Σ uₗGₙₗ − β Σ_{u>0} VₙâₗâₗᵀVₙᵀ, which λ does not change):
    H(λ) = H₀ + Σ λₗGₙₗ + β Σ_active VₙbₗbₗᵀVₙᵀ, O(R²) a constraint and call (VₙΔₙVₙᵀ
    itself costs O(R²·r): 3.3 s against ~0.3 s at R = 4,000); VₙΔₙVₙᵀ each call where the
    Gₙₗ would take more than ``CACHE_FLOATS``."""
    if sum(len(p.c) * p.V.shape[0] ** 2 for p in models.values()) > CACHE_FLOATS:
        def build(lam, pieces):
            H = M.copy()
            for n, part in models.items():
                k, (_, active, b) = part.V.shape[0], pieces[n]
                H[:k, :k] += part.V @ part.core_change(lam[n], b, active) @ part.V.T
            return H
        return build
    grams, base = {}, M.copy()

    def rank_ones(rows):
        """Σₙ β Vₙ rowsₙᵀ rowsₙ Vₙᵀ as one product (rowsₙ: {n: rows in n's basis})."""
        P = np.zeros((M.shape[0], sum(len(r) for r in rows.values())))
        col = 0
        for n, r in rows.items():
            V = models[n].V
            P[:V.shape[0], col:col + len(r)] = np.sqrt(models[n].beta) * (V @ r.T)
            col += len(r)
        return P @ P.T

    def build(lam, pieces):
        if not grams:                                   # H₀, once
            for n, part in models.items():
                k = part.V.shape[0]
                grams[n] = [part.V @ K @ part.V.T for K in part.K]
                for u, G in zip(part.u, grams[n]):
                    if u:
                        base[:k, :k] -= u * G
            base[...] -= rank_ones({n: p.A[p.u > 0] for n, p in models.items()})
        H = base.copy()
        for n, part in models.items():
            k = part.V.shape[0]
            for coef, G in zip(lam[n], grams[n]):
                if coef:
                    H[:k, :k] += coef * G
        return H + rank_ones({n: b[active] for n, (_, active, b) in pieces.items()})
    return build


def _model(M, g, models, x):
    """m(x) of (B6), ∇m(x), and each party's (μ + βq, its active rows, b) at x."""
    val, grad, pieces = 0.5 * float(x @ (M @ x)) + float(g @ x), g + M @ x, {}
    for n, part in models.items():
        z, q, b = part.at(x)
        target = part.mu + part.beta * q
        v = np.maximum(target, 0.0)
        Az, Hz = part.A @ z, part.taylor(z)
        val += float((v @ v - part.u @ part.u) / (2 * part.beta) - part.u @ Az - 0.5 * z @ Hz)
        grad[:part.V.shape[0]] += part.V @ (v @ b - part.u @ part.A - Hz)
        pieces[n] = target, target > 0, b
    return val, grad, pieces
