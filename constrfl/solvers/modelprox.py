"""The proximal Newton point of the server's model (B5) for a nonsmooth P
(``inner="newton-basis"``, docs/algorithms.md §5): argmin_z gᵀ(z − x) + ½(z − x)ᵀH(z − x)
+ P(z) with H a :class:`~.subspace.ModelHessian`, by the accelerated proximal gradient
method in the metric cI + LᵀL with semismooth Newton steps on its active pieces."""
from __future__ import annotations

import numpy as np

from ..prox import Piecewise, interval_dist

__all__ = ["prox_gradient_point"]

#: cap on the iterations of one solve
MODEL_MAX_ITER = 20000
#: iterations of the accelerated proximal gradient method between Newton tries
NEWTON_EVERY = 5
#: relative residual and cap of the conjugate gradients of a Newton try (a candidate
#: step, kept only where it lowers the model: inexact is enough)
NEWTON_RTOL, NEWTON_MAX_CG = 1e-2, 500
#: power iterations of the metric's first c: an estimate (low is safe: the iterations
#: double c where a step shows more curvature); 10 cost NP sparse d = 10⁵ with L1 a
#: quarter of its time (39 -> 29 s with 3, 43 rounds either way)
POWER_ITERATIONS = 3


def prox_gradient_point(H, x, g, P, tol, max_iter=MODEL_MAX_ITER):
    """argmin_z m(z) = gᵀ(z − x) + ½(z − x)ᵀH(z − x) + P(z) for a positive definite
    :class:`~.subspace.ModelHessian` H, stopped once dist∞(0, ∂m(z)) ≤ tol (``P.dist``,
    exact), by :func:`_model_point`.  With ℓ1 terms, on a working set (Johnson &
    Guestrin's Blitz, 2015; Massias et al.'s Celer, 2018): the coordinates off zero, and
    those whose subgradient interval misses the gradient by more than tol; the model
    restricted to them (the others stay at zero) is solved, then the gradient of the
    whole model (one product with H) checked on the others, and those that miss join,
    until none does: the stop test is the whole model's."""
    pieces = P.pieces(x.size)
    if pieces is None or not np.any(pieces[1] > 0):
        return _model_point(H, x, g, P, tol, max_iter)
    q, lam, lo, hi = pieces
    work = (lam == 0) | (x != 0) | (interval_dist(g, *P.subgradients(x)) > tol)
    while True:
        z = x.copy()
        z[work] = _model_point(H.restricted(work), x[work], g[work],
                               Piecewise(q[work], lam[work], lo[work], hi[work]), tol,
                               max_iter)
        missing = ~work & (interval_dist(g + H(z - x), *P.subgradients(z)) > tol)
        if not missing.any():
            return z
        work |= missing


def _model_point(H, x, g, P, tol, max_iter):
    """:func:`prox_gradient_point` on all coordinates.  H's few rows L (H = rest + LᵀL)
    carry most of its curvature (β∇c∇cᵀ of the active constraints).

    The accelerated proximal gradient method (Beck & Teboulle 2009) with adaptive
    restart (O'Donoghue & Candès 2015) in the metric M = cI + LᵀL ⪰ H (c ≥ the largest
    eigenvalue of ``rest``: estimated by ``POWER_ITERATIONS`` power iterations,
    doubled where a step shows more curvature), so that LᵀL costs it nothing
    (:func:`_metric_prox`).  For a piecewise quadratic P (:meth:`~constrfl.prox.Regularizer.pieces`) every ``NEWTON_EVERY``-th
    iteration also tries a Newton step on the pieces its proximal gradient point z̄ is
    on (the semismooth Newton method on the proximal gradient map, Patrinos & Bemporad
    2013; Li, Sun & Toh 2018): the coordinates z̄ puts on a kink or bound go there, the
    others solve (H + diag q)_FF δ_F = −(∇m on z̄'s pieces)_F by conjugate gradients
    (:meth:`~.subspace.ModelHessian.solve`); the step, kept on z̄'s pieces, replaces
    the iterate (and restarts the momentum) where it lowers m more."""
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
        J = np.where(_on_kink(z, lam, lo, hi), 0.0, 1.0 / (1.0 + q / c))
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


def _on_kink(z, lam, lo, hi):
    """The coordinates of z on a kink of a piecewise quadratic P: a bound, or zero where
    λⱼ > 0 (there its prox is flat, off them it has slope 1/(1 + q/c))."""
    return (z <= lo) | (z >= hi) | ((lam > 0) & (z == 0))


def _model_value(g, dz, Hdz, P, z):
    return float(g @ dz) + 0.5 * float(dz @ Hdz) + P.value(z)


def _largest_eigenvalue(H, n):
    """1.1 × ``POWER_ITERATIONS`` power iterations' estimate of H's largest eigenvalue."""
    v = np.random.default_rng(0).standard_normal(n)
    for _ in range(POWER_ITERATIONS):
        v = H(v / np.linalg.norm(v))
    return 1.1 * float(np.linalg.norm(v))


def _newton_on_pieces(H, pieces, P, x, g, z, G, bar, m_bar):
    """The Newton step of :func:`prox_gradient_point` from z on the pieces of z̄:
    ``(z⁺, H(z⁺ − x))`` when it lowers m below m(z̄), else None."""
    q, lam, lo, hi = pieces
    side = np.sign(bar)
    free = ~_on_kink(bar, lam, lo, hi)
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
