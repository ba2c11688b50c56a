"""The proximal Newton point, one home for every solver that takes the step:

    z = argmin_z gᵀ(z − x) + ½(z − x)ᵀH(z − x) + P(z)                              (PN)

(the server's step of ``inner="newton"`` and cProx-AL, docs/algorithms.md §8).

* **Separable P** (``Zero``, ``L1``, ``SquaredL2``, ``ElasticNet``, ``Box``,
  ``NonNegative`` and their ``Boxed`` sums): with ``P.pieces(d) = (q, λ, lo, hi)``,
  ``P(z) = Σⱼ ½qⱼzⱼ² + λⱼ|zⱼ| + ι[loⱼ, hiⱼ](zⱼ)``, (PN) is the QP

      min_z Φ(z) = ½zᵀQz + cᵀz + Σⱼ λⱼ|zⱼ|  s.t.  lo ≤ z ≤ hi,   Q = H + diag(q),
      c = g − Hx,                                                                  (PQ)

  solved **exactly** by :func:`separable_qp`, a projected Newton method (Bertsekas 1982)
  on the pieces of Φ: each coordinate lives on an interval between two kinks (its bounds
  and, with λⱼ > 0, zero) on which Φ is quadratic; a step solves the Newton system on
  the coordinates free to move and projects the arc onto the pieces.  Once the pieces of
  the solution are found (finitely many steps; the active-set identification of
  Bertsekas's Proposition 3), one more full step lands on the solution up to rounding.
* **Any other P** (balls, nuclear norm): ADMM on the splitting y = z
  (:func:`_admm_point`), to a model residual ≤ ``tol``.

An indefinite H (nonconvex parties) is replaced by its positive model
(:func:`~constrfl.solvers.local.positive_model`), so z − x is a descent step of the
composite function.
"""
from __future__ import annotations

import numpy as np

from .local import newton_direction, positive_model

__all__ = ["prox_newton_point", "separable_qp"]


def prox_newton_point(x, g, H, P, tol):
    """The point z of (PN), with ``P.dist(z, g + H(z − x)) ≤ tol`` (or, for a separable
    P, the exact point up to rounding)."""
    pieces = P.pieces(x.size)
    if pieces is None:
        return _admm_point(x, g, H, P, tol)
    return separable_qp(H, g - H @ x, *pieces, x, tol)


def separable_qp(H, c, q, lam, lo, hi, z0, tol):
    """Solve (PQ) from ``z0`` (clipped into the box) by projected Newton steps; an
    indefinite ``H + diag(q)`` is replaced by its positive model.  Stops at a residual
    ``dist∞(0, ∂Φ(z)) ≤ tol``, when the arc search finds no decrease of Φ (the
    solution up to rounding), or after 50 + n steps."""
    Q = H + np.diag(q)
    try:
        np.linalg.cholesky(Q)
    except np.linalg.LinAlgError:               # nonconvex parties: the positive model
        lam_h, V = positive_model(H, 1e-14)
        Q = (V * lam_h) @ V.T + np.diag(q)
    z = np.clip(z0, lo, hi)
    g = Q @ z + c
    zero_kink = (lam > 0) & (lo < 0) & (hi > 0)
    for _ in range(50 + z.size):
        pg, right = _descent_slopes(z, g, lam, lo, hi)
        r = float(np.max(np.abs(pg), initial=0.0))
        if r <= tol:
            break
        a, b, s = _piece(z, right, zero_kink, lo, hi)
        gp = g + lam * s                         # ∇Φ on the pieces the step moves in
        step = _arc_search(Q, c, lam, z, g, _direction(Q, z, pg, gp, a, b, r), gp, a, b)
        if step is None:
            break
        z, g = step
    return z


def _descent_slopes(z, g, lam, lo, hi):
    """The minimal-norm element ``pg`` of ∂Φ(z) per coordinate (z in the box): the slope
    of Φ along the coordinate's descent direction (right when ``pg < 0``, left when
    ``pg > 0``), 0 where neither direction descends; and the mask of ``pg < 0``."""
    up = g + lam * np.where(z >= 0, 1.0, -1.0)          # slope moving right
    down = g + lam * np.where(z > 0, 1.0, -1.0)         # slope moving left (up ≥ down)
    right = (z < hi) & (up < 0)
    left = (z > lo) & (down > 0)
    return np.where(right, up, np.where(left, down, 0.0)), right


def _piece(z, right, zero_kink, lo, hi):
    """The interval ``[a, b]`` between two kinks that each coordinate moves in (to the
    right of z where ``right``, else to its left or around it) and the slope ``s`` of
    ``|zⱼ|`` on it."""
    pos, neg = z > 0, z < 0
    a = np.where(zero_kink & np.where(right, ~neg, pos), 0.0, lo)
    b = np.where(zero_kink & np.where(right, neg, ~pos), 0.0, hi)
    s = np.where(right, np.where(neg, -1.0, 1.0), np.where(pos, 1.0, -1.0))
    return a, b, s


def _direction(Q, z, pg, gp, a, b, r):
    """Bertsekas's scaled direction: coordinates that do not move (``pg = 0`` at a
    kink) stay; those within ε = min(10⁻³, r)·(1 + |zⱼ|) of the kink they move towards
    take a diagonal step −pgⱼ/Qⱼⱼ; the free rest the Newton step Q_FF d_F = −∇Φ_F.  (A
    free coordinate the Newton step pushes back over the kink it sits on stops there at
    α = 0 of the arc search, which only makes its slope steeper: ∇Φⱼdⱼ > 0 for it.)"""
    eps = min(1e-3, r) * (1.0 + np.abs(z))
    at_kink = (z == a) | (z == b)
    near = np.where(pg < 0, b - z, np.where(pg > 0, z - a, np.inf)) <= eps
    d = np.where(near, -pg / np.maximum(np.diag(Q), 1e-300), 0.0)
    F = np.flatnonzero(~near & ~(at_kink & (pg == 0)))
    if F.size:
        d[F] = newton_direction(Q[np.ix_(F, F)], gp[F])
    return d


def _arc_search(Q, c, lam, z, g, d, gp, a, b):
    """The first local minimizer of Φ along the projected arc z(α) = clip(z + αd, a, b),
    α ≥ 0 (the projected search of Moré & Toraldo 1991): between two breakpoints, where
    one more coordinate reaches the end of its piece, Φ(z(α)) is a quadratic in α whose
    slope and curvature are updated coordinate by coordinate (O(n) a breakpoint).
    Returns ``(z(α), Qz(α) + c)``, or None when that minimizer does not lower Φ (the
    solution, up to rounding).  ``g = Qz + c``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(d > 0, (b - z) / d, np.where(d < 0, (a - z) / d, np.inf))
    p, Qp = d.copy(), Q @ d
    slope, curv, t0 = float(gp @ d), float(d @ Qp), 0.0
    u = np.zeros_like(z)                          # Q(z(t0) − z)
    alpha = np.inf
    for j in np.argsort(t, kind="stable"):
        tj = max(float(t[j]), t0)
        if slope >= 0:
            alpha = t0
            break
        if curv > 0 and t0 - slope / curv <= tj:
            alpha = t0 - slope / curv
            break
        if not np.isfinite(tj):
            break
        slope += curv * (tj - t0)                  # at tj, then coordinate j stops
        u += (tj - t0) * Qp
        dj = p[j]
        slope -= dj * (gp[j] + u[j])
        curv += dj * (dj * Q[j, j] - 2.0 * Qp[j])
        Qp -= dj * Q[:, j]
        p[j], t0 = 0.0, tj
    if not np.isfinite(alpha):
        alpha = t0 - slope / curv if curv > 0 and slope < 0 else t0
    za = np.clip(z + alpha * d, a, b)
    ga = Q @ za + c
    return (za, ga) if _phi(za, ga, c, lam) < _phi(z, g, c, lam) else None


def _phi(z, g, c, lam):
    """Φ(z) from g = Qz + c: ½zᵀQz + cᵀz = ½zᵀ(g + c)."""
    return 0.5 * float(z @ (g + c)) + float(lam @ np.abs(z))


def _admm_point(x, g, H, P, tol, max_iter=20000):
    """(PN) for a non-separable P by ADMM on the splitting y = z: the y-step solves
    (H + σI)y = Hx − g + σ(z − q) (eigendecomposition of H, done once), the z-step is
    ``prox_{P/σ}``; σ = √(λmin λmax) balances the model's conditioning.  Returns z (it
    carries P's exact structure) once its model residual is ≤ tol."""
    lam, V = positive_model(H, 1e-14)

    def model(v):                      # the model Hessian V diag(λ) Vᵀ times v
        return V @ (lam * (V.T @ v))
    sigma = float(np.sqrt(lam.min() * lam.max()))
    base = model(x) - g
    z, q = x.copy(), np.zeros_like(x)
    for it in range(max_iter):
        y = V @ ((V.T @ (base + sigma * (z - q))) / (lam + sigma))
        z = P.prox(y + q, 1.0 / sigma)
        q += y - z
        if it % 10 == 9 and P.dist(z, g + model(z - x)) <= tol:
            break
    return z
