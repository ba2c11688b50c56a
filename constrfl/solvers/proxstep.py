"""The proximal Newton point, one home for every solver that takes the step:

    z = argmin_z gᵀ(z − x) + ½(z − x)ᵀH(z − x) + P(z)                              (PN)

(the server's step of ``inner="newton"``, ``"newton-basis"`` and cProx-AL,
docs/algorithms.md §8).

* **Separable P** (``Zero``, ``L1``, ``SquaredL2``, ``ElasticNet``, ``Box``,
  ``NonNegative`` and their ``Boxed`` sums): with ``P.pieces(d) = (q, λ, lo, hi)``,
  ``P(z) = Σⱼ ½qⱼzⱼ² + λⱼ|zⱼ| + ι[loⱼ, hiⱼ](zⱼ)``, (PN) is the QP

      min_z Φ(z) = ½zᵀQz + cᵀz + Σⱼ λⱼ|zⱼ|  s.t.  lo ≤ z ≤ hi,   Q = H + diag(q),
      c = g − Hx,                                                                  (PQ)

  solved **exactly** by :func:`separable_qp`: first the minimizer on the pieces of the
  last iterate x (:func:`_on_kinks_of`, a warm start), then in two phases.  Without ℓ1
  terms (λ = 0) it is solved in the step d = z − x, c = g + q∘x, bounds lo − x ≤ d ≤
  hi − x: c = g − Hx cancels |Hx| to the size of g, and with |x| ~ 10⁶ and |H| ~ 10⁵
  (Maros–Meszaros QGROW7) that left every step a residual of 2·10⁻² (its rounding
  level n·u·|H||x|) and the solve a stationarity of 0.2.

  1. a semismooth Newton method on the fixed-point equation z = prox_{h/δ}(z − ∇(½zᵀQz +
     cᵀz)/δ) with h = λ|·| + ι[lo, hi] and the Jacobi step δ = diag(Q) (the
     primal-dual active set method of Hintermüller, Ito & Kunisch 2002, as SSNAL
     uses it for the ℓ1 prox, Li, Sun & Toh 2018): the sets where the prox sits on a
     kink (a bound, or zero where λⱼ > 0) fix those coordinates there, the others solve
     the Newton system Q_FF z_F = −(c + λ∘sign + Q_{F,fixed} z_fixed)_F; when the sets
     repeat, z is the exact solution (its free coordinates have zero slope inside
     their pieces, the fixed ones a slope that keeps them there).  Many sets change per
     step (measured: 4–13 steps on the QE226 subproblems, n = 282, ~110 active bounds);
     it is not monotone and can cycle, so after ``ACTIVE_SET_STEPS`` steps
  2. a projected Newton method (Bertsekas 1982) on the pieces of Φ, monotone and
     finite, goes on from the best point: each coordinate lives on an interval between
     two kinks on which Φ is quadratic; a step solves the Newton system on the
     coordinates free to move and projects the arc onto the pieces.  Once the pieces of
     the solution are found (Bertsekas's Proposition 3), one more full step lands on the
     solution up to rounding.  Alone it fixes about one bound a step (the same QE226
     subproblems: 23–332 steps, some stopped by the step cap short of the solution).
     Before it, the interior point method (:func:`_box_interior_point`) finds the pieces
     of the solution, on (PQ) itself without ℓ1 terms and with them on its dual or on
     (PQ) with each ℓ1 coordinate split in two (:func:`_l1_by_interior_point`), and the
     exact minimizer on them is returned when it solves (PQ).
* **Any other P** (balls, nuclear norm): ADMM on the splitting y = z
  (:func:`_admm_point`), to a model residual ≤ ``tol``.

An indefinite H (nonconvex parties) is replaced by its positive model
(:func:`~constrfl.local.positive_model`), so z − x is a descent step of the
composite function.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.linalg import cho_solve
from scipy.sparse.linalg import splu

from .. import kernels
from ..local import newton_direction, positive_model
from .modelprox import prox_gradient_point

__all__ = ["prox_newton_point", "separable_qp", "ACTIVE_SET_STEPS"]

#: caps of phase 1 of :func:`separable_qp`: its steps, and its steps in a row without a
#: new least Φ
ACTIVE_SET_STEPS, STALLED_STEPS = 25, 8
#: cap on the interior point iterations of :func:`_box_interior_point`
INTERIOR_STEPS = 60
#: the interior point method factors Q + diag(·) sparse from this dimension and density on
SPARSE_MIN_DIM, SPARSE_DENSITY = 200, 0.1


def prox_newton_point(x, g, H, P, tol):
    """The point z of (PN), with ``P.dist(z, g + H(z − x)) ≤ tol`` (or, for a separable
    P and a dense H, the exact point up to rounding).  H is a dense matrix, or the
    operator of the server's model (B5) (:class:`.subspace.ModelHessian`: sparse and
    low-rank parts, d up to 10⁵), solved by :func:`.modelprox.prox_gradient_point`."""
    if not isinstance(H, np.ndarray):
        return prox_gradient_point(H, x, g, P, tol)
    pieces = P.pieces(x.size)
    if pieces is None:
        return _admm_point(x, g, H, P, tol)
    q, lam, lo, hi = pieces
    if np.any(lam):                                  # kinks at 0: in z
        return separable_qp(H, g - H @ x, q, lam, lo, hi, x, tol)
    return _from_step(x, lo, hi, separable_qp(H, g + q * x, q, lam, lo - x, hi - x,
                                              np.zeros_like(x), tol))


def _from_step(x, lo, hi, d):
    """z = x + d, with the coordinates d put on a shifted bound (lo − x or hi − x)
    exactly on the bound (x + (lo − x) can miss lo by a unit in the last place, and off
    the bound the box's normal cone is {0})."""
    return np.where(d == lo - x, lo, np.where(d == hi - x, hi, np.clip(x + d, lo, hi)))


def separable_qp(H, c, q, lam, lo, hi, z0, tol):
    """Solve (PQ) from ``z0`` (clipped into the box): the minimizer on z0's pieces when
    it is the solution, else active-set steps (phase 1), then, if their sets did not
    settle, the interior point method (no ℓ1 terms) or projected Newton steps from the
    best point (phase 2); an indefinite ``H + diag(q)`` is replaced by its positive
    model.  The projected Newton steps stop at a
    residual ``dist∞(0, ∂Φ(z)) ≤ tol``, when the arc search finds no decrease of Φ
    (the solution up to rounding), or after 50 + n steps."""
    Q = H + np.diag(q)
    Qs = _sparse_copy(Q)
    if not _positive_definite(Q, Qs):           # nonconvex parties: the positive model
        lam_h, V = positive_model(H, 1e-14)
        Q = (V * lam_h) @ V.T + np.diag(q)
        Qs = _sparse_copy(Q)
    z0 = np.clip(z0, lo, hi)
    z = _on_kinks_of(Q, c, lam, lo, hi, z0, tol, Qs)
    if z is not None:
        return z
    z, exact = _active_set(Q, c, lam, lo, hi, z0, Qs)
    if exact:
        return z
    if not np.any(lam):
        return _box_interior_point(Q, c, lo, hi, z, tol)
    exact = _l1_by_interior_point(Q, c, lam, lo, hi, z, tol)
    if exact is not None:
        return exact
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


def _l1_by_interior_point(Q, c, lam, lo, hi, z, tol):
    """(PQ) with ℓ1 terms, where the active-set steps do not settle: the interior point
    method (:func:`_box_interior_point`) on a box QP whose solution shows the pieces of
    z, from ``z`` (stage 1's best point); the minimizer on those pieces
    (:func:`_on_pieces`) is returned when it solves (PQ), else None.  Without finite
    bounds the box QP is the dual (:func:`_dual_pieces`, d variables), else the split
    problem (:func:`_split_pieces`, d + |{λⱼ > 0}|).  Measured on the server's steps of
    NP dense d = 600, 100 × 10 rows, ℓ1 1e-3 (Q's condition number 4·10⁵): 0.2–0.6 s a
    call with the active-set steps (the dual; the split 0.4–1.2 s, with and without the
    box [−1, 1]), residuals ~10⁻¹³, where the projected Newton steps took 150–650 steps
    and 0.8–5 s to a residual of 10⁻³ (once only to its cap's 7·10⁻³)."""
    bounded = np.isfinite(lo).any() or np.isfinite(hi).any()
    pieces = (_split_pieces if bounded else _dual_pieces)(Q, c, lam, lo, hi, z)
    if pieces is None:
        return None
    z = _on_pieces(Q, c, lam, *pieces)
    return z if np.all(np.isfinite(z)) and _solves(Q, c, lo, hi, z, tol, lam) else None


def _dual_pieces(Q, c, lam, lo, hi, z):
    """The pieces ``(at_kink, sign, values)`` of (PQ) without finite bounds from its dual
    min_y ½(y + c)ᵀQ⁻¹(y + c) s.t. −λ ≤ y ≤ λ (z = −Q⁻¹(y + c)): zⱼ = 0 where
    |yⱼ| < λⱼ, the sign of yⱼ elsewhere (None when Q does not factor)."""
    try:
        Qi = cho_solve((np.linalg.cholesky(Q), True), np.eye(c.size))
    except np.linalg.LinAlgError:
        return None
    Qi = 0.5 * (Qi + Qi.T)
    y = _box_interior_point(Qi, Qi @ c, -lam, lam, np.clip(-(Q @ z + c), -lam, lam), 0.0)
    zero = np.abs(y) < lam
    return zero, np.where(zero, 0.0, np.sign(y)), 0.0


def _split_pieces(Q, c, lam, lo, hi, z):
    """The pieces ``(at_kink, sign, values)`` of (PQ) from the problem with each
    coordinate λⱼ > 0 split, zⱼ = uⱼ − vⱼ, uⱼ ∈ [loⱼ⁺, hiⱼ⁺], vⱼ ∈ [hiⱼ⁻, loⱼ⁻]
    (a⁺ = max(a, 0), a⁻ = max(−a, 0)), with the term λⱼ(uⱼ + vⱼ), which is λⱼ|zⱼ| where
    not both are positive, as at the solution: z on a bound, at 0 where uⱼ = vⱼ = 0, else
    on the piece of the sign of uⱼ − vⱼ."""
    split = lam > 0
    S = np.flatnonzero(split)
    Q2 = np.block([[Q, -Q[:, S]], [-Q[S], Q[np.ix_(S, S)]]])
    c2 = np.concatenate([c + lam, lam[S] - c[S]])
    lo2 = np.concatenate([np.where(split, np.maximum(lo, 0.0), lo), np.maximum(-hi[S], 0.0)])
    hi2 = np.concatenate([np.where(split, np.maximum(hi, 0.0), hi), np.maximum(-lo[S], 0.0)])
    w0 = np.concatenate([np.where(split, np.maximum(z, 0.0), z), np.maximum(-z[S], 0.0)])
    w = _box_interior_point(Q2, c2, lo2, hi2, np.clip(w0, lo2, hi2), 0.0)
    u, v = w[:c.size], w[c.size:]
    z = u.copy()
    z[S] -= v
    at_kink = (z == lo) | (z == hi)
    at_kink[S] |= (u[S] == 0.0) & (v == 0.0)
    return at_kink, np.where(at_kink, 0.0, np.sign(z)), z


def _on_kinks_of(Q, c, lam, lo, hi, z0, tol, Qs=None):
    """The warm start: the minimizer of Φ on the pieces of ``z0`` (the last Newton
    iterate, itself an exact step, so on the kinks its solution chose): coordinates on a
    kink where the slope of Φ holds them there stay, the others take the Newton system
    of :func:`_on_pieces` on the piece they are on (or move towards).  Returned when it
    is the solution (:func:`_solves`; one factorization), else None."""
    g = Q @ z0 + c
    pg = _descent_slopes(z0, g, lam, lo, hi)[0]
    on_kink = (z0 == lo) | (z0 == hi) | ((lam > 0) & (z0 == 0))
    at_kink = on_kink & (pg == 0)
    sign = np.where(z0 != 0, np.sign(z0), -np.sign(pg))
    z = _on_pieces(Q, c, lam, at_kink, np.where(at_kink, 0.0, sign), z0, Qs)
    if not np.all(np.isfinite(z)) or np.any((z < lo) | (z > hi)):
        return None
    return z if _solves(Q, c, lo, hi, z, tol, lam) else None


def _active_set(Q, c, lam, lo, hi, z, Qs=None):
    """Phase 1 of :func:`separable_qp`: ``(z, True)`` with the exact solution once the
    active sets repeat, else ``(the point of least Φ seen, False)`` after
    ``ACTIVE_SET_STEPS`` steps, ``STALLED_STEPS`` steps in a row without a new least Φ
    (it cycles or diverges: measured on ill-conditioned Q) or a non-finite step."""
    delta = np.maximum(np.diag(Q), np.finfo(float).tiny)
    g = Q @ z + c
    best, best_phi, used, since = z, _phi(z, g, c, lam), None, 0
    for _ in range(ACTIVE_SET_STEPS):
        sets, values = _prox_sets(z - g / delta, lam / delta, lo, hi)
        if _same(sets, used):
            return z, True
        z = _on_pieces(Q, c, lam, *sets, values, Qs)
        if not np.all(np.isfinite(z)):
            break
        used, g = sets, Q @ z + c
        z_box = np.clip(z, lo, hi)
        phi = _phi(z_box, g if np.array_equal(z_box, z) else Q @ z_box + c, c, lam)
        best, best_phi, since = (z_box, phi, 0) if phi < best_phi else (best, best_phi,
                                                                         since + 1)
        if since == STALLED_STEPS:
            break
    return best, False


def _on_pieces(Q, c, lam, at_kink, sign, values, Qs=None):
    """The minimizer of Φ with the coordinates ``at_kink`` fixed at ``values`` and the
    others on the piece of slope ``sign`` of |·|: Q_FF z_F = −(c + λ∘sign + Q_{F,K}
    z_K)_F (factored sparse with ``Qs``, :func:`_sparse_copy` of Q, from
    ``SPARSE_MIN_DIM`` free coordinates on)."""
    z = np.where(at_kink, values, 0.0)
    free = np.flatnonzero(~at_kink)
    if free.size:
        fixed = np.flatnonzero(at_kink)
        rhs = (c + lam * sign)[free] + Q[np.ix_(free, fixed)] @ z[fixed]
        step = None
        if Qs is not None and free.size >= SPARSE_MIN_DIM:
            try:
                step = -_sparse_solve(Qs[free][:, free])(rhs)
            except np.linalg.LinAlgError:
                pass
        if step is None or not np.all(np.isfinite(step)):      # dense, or the model
            step = newton_direction(Q[np.ix_(free, free)], rhs)
        z[free] = step
    return z


def _prox_sets(y, t, lo, hi):
    """Where prox of t|·| + ι[lo, hi] puts each coordinate of ``y``: ``(at_kink, sign)``
    (on a bound, or at zero where the ℓ1 kink catches it; the sign of ``y`` elsewhere)
    and the prox's values (meaningful on the kinks)."""
    values = np.clip(np.sign(y) * np.maximum(np.abs(y) - t, 0.0), lo, hi)
    at_kink = (values == lo) | (values == hi) | ((t > 0) & (np.abs(y) <= t))
    return (at_kink, np.where(at_kink, 0.0, np.sign(y))), values


def _box_interior_point(Q, c, lo, hi, z, tol):
    """(PQ) without ℓ1 terms (λ = 0), for when the active sets do not settle: Mehrotra's
    predictor-corrector interior point method on min ½zᵀQz + cᵀz, lo ≤ z ≤ hi (fixed
    coordinates lo = hi eliminated), each iteration one factorization of
    Q + diag(y/s + w/t) (:func:`_factor`; s, t the slacks of the finite bounds, y, w
    their multipliers).  Every iteration the iterate with its bound guess (multiplier
    above slack) set on the bounds (:func:`_crossover`) is returned when it solves
    (:func:`_solves`); once a guess has held two iterations, the exact minimizer on it
    (:func:`_on_pieces`) is tried too (measured: 17–28 iterations on the QE226
    subproblems where the active-set steps cycle, residuals ~1e-10).  After
    ``INTERIOR_STEPS`` iterations, or when a factorization fails (barrier terms y/s
    beyond what it resolves; Maros–Meszaros QCAPRI, 1 client): the crossover of the
    last iterate, in the box."""
    fixed = lo == hi
    if fixed.any():
        keep, at = np.flatnonzero(~fixed), np.flatnonzero(fixed)
        out = lo.copy()
        out[keep] = _box_interior_point(Q[np.ix_(keep, keep)],
                                        c[keep] + Q[np.ix_(keep, at)] @ lo[at],
                                        lo[keep], hi[keep], z[keep], tol)
        return out
    L, U = np.isfinite(lo), np.isfinite(hi)
    m = int(L.sum() + U.sum())
    if m == 0:
        return _on_pieces(Q, c, 0.0, np.zeros(c.size, bool), 0.0, 0.0)
    low, high = np.where(L, lo, 0.0), np.where(U, hi, 0.0)
    margin = np.minimum(0.1 * np.where(L & U, high - low, np.inf), 1.0)
    z = np.clip(z, np.where(L, low + margin, -np.inf), np.where(U, high - margin, np.inf))
    g = Q @ z + c
    size = 1e-2 * max(1.0, float(np.max(np.abs(g))))
    s, t = np.where(L, z - low, 1.0), np.where(U, high - z, 1.0)
    y = np.where(L, np.maximum(g, 0.0) + size, 0.0)
    w = np.where(U, np.maximum(-g, 0.0) + size, 0.0)
    tried = last = None
    Qs = _sparse_copy(Q)
    for _ in range(INTERIOR_STEPS):
        guess = (L & (y > s), U & (w > t))
        snapped = _crossover(Q, c, lo, hi, np.clip(z, lo, hi), *guess)
        if _solves(Q, c, lo, hi, snapped, tol):
            return snapped
        held, last = _same(guess, last), guess
        if held and not _same(guess, tried):
            tried = guess
            exact = np.clip(_on_pieces(Q, c, 0.0, guess[0] | guess[1], 0.0,
                                       np.where(guess[0], lo, hi)), lo, hi)
            if _solves(Q, c, lo, hi, exact, tol):
                return exact
        try:
            z, s, t, y, w = _mehrotra_step(Q, Qs, c, L, U, z, s, t, y, w, m)
        except np.linalg.LinAlgError:
            break
    return _crossover(Q, c, lo, hi, np.clip(z, lo, hi), L & (y > s), U & (w > t))


def _same(sets, other):
    return other is not None and all(np.array_equal(a, b) for a, b in zip(sets, other))


def _solves(Q, c, lo, hi, z, tol, lam=0.0):
    """Whether z (in the box) solves (PQ): ``dist∞(0, ∂Φ(z)) ≤ tol`` or the rounding
    level of that residual's own evaluation, n·u·max(|Q||z| + |c|)."""
    rounding = c.size * np.finfo(float).eps * float(np.max(np.abs(Q) @ np.abs(z) + np.abs(c)))
    return _residual(Q, c, lam, lo, hi, z) <= max(tol, rounding)


def _crossover(Q, c, lo, hi, z, at_lo, at_hi):
    """The interior point method's last iterate ``z`` (in the box) with the coordinates
    its multipliers put on a bound (``at_lo``, ``at_hi``: multiplier above slack) moved
    onto it, when that lowers the residual: an iterate 1e-21 above a bound whose
    multiplier is 292 has the residual 292 (the normal cone of the box is {0} off the
    bound; Maros–Meszaros QSCTAP1), on the bound ~0."""
    snapped = np.where(at_lo, lo, np.where(at_hi, hi, z))
    return (snapped if _residual(Q, c, 0.0, lo, hi, snapped) <= _residual(Q, c, 0.0, lo, hi, z)
            else z)


def _mehrotra_step(Q, Qs, c, L, U, z, s, t, y, w, m):
    """One predictor-corrector step of :func:`_box_interior_point` (Mehrotra 1992, as
    in Nocedal & Wright's chapter 16 on the bound-constrained QP), 0.99 of the way to the
    boundary (``Qs``: :func:`_sparse_copy` of Q)."""
    r = Q @ z + c - y + w
    mu = (s[L] @ y[L] + t[U] @ w[U]) / m
    solve = _factor(Q, Qs, np.where(L, y / s, 0.0) + np.where(U, w / t, 0.0))

    def direction(rs, rt):
        rhs = r + np.where(L, rs / s, 0.0) - np.where(U, rt / t, 0.0)
        dz = solve(rhs)
        if not np.all(np.isfinite(dz)):
            raise np.linalg.LinAlgError("the interior point system did not factor")
        dz = -dz
        return dz, np.where(L, (-rs - y * dz) / s, 0.0), np.where(U, (-rt + w * dz) / t, 0.0)

    def lengths(dz, dy, dw):
        return (min(_to_boundary(s[L], dz[L]), _to_boundary(t[U], -dz[U])),
                min(_to_boundary(y[L], dy[L]), _to_boundary(w[U], dw[U])))

    dz, dy, dw = direction(np.where(L, s * y, 0.0), np.where(U, t * w, 0.0))
    ap, ad = lengths(dz, dy, dw)
    mu_aff = ((s[L] + ap * dz[L]) @ (y[L] + ad * dy[L])
              + (t[U] - ap * dz[U]) @ (w[U] + ad * dw[U])) / m
    sigma_mu = (mu_aff / mu) ** 3 * mu
    dz, dy, dw = direction(np.where(L, s * y + dz * dy - sigma_mu, 0.0),
                           np.where(U, t * w - dz * dw - sigma_mu, 0.0))
    ap, ad = lengths(dz, dy, dw)
    ap, ad = 0.99 * ap, 0.99 * ad
    return (z + ap * dz, np.where(L, s + ap * dz, 1.0), np.where(U, t - ap * dz, 1.0),
            y + ad * dy, w + ad * dw)


def _sparse_copy(Q):
    """Q in CSC form when a sparse factorization pays, else None: n ≥ ``SPARSE_MIN_DIM``
    and at most ``SPARSE_DENSITY`` of its entries nonzero (the AL Hessian of a sparse
    QP is as sparse as PᵀP + AᵀA; measured on Maros–Meszaros QGROW22, n = 946, 4.5%
    nonzeros: 5.6 ms a sparse factorization against 40 ms dense)."""
    if Q.shape[0] < SPARSE_MIN_DIM or np.count_nonzero(Q) > SPARSE_DENSITY * Q.size:
        return None
    return sp.csc_matrix(Q)


def _factor(Q, Qs, diag):
    """The solve with K = Q + diag(diag) ≻ 0: by a Cholesky factorization, or with
    ``Qs`` a sparse LU factorization without pivoting (symmetric mode, COLAMD
    ordering), as stable as Cholesky on a positive definite K.  A failed one raises
    LinAlgError."""
    if Qs is None:
        factor = np.linalg.cholesky(Q + np.diag(diag))
        return lambda b: kernels.cholesky_solve(factor, b)
    return _sparse_solve(Qs + sp.diags(diag))


def _sparse_solve(K, positive=False):
    """The solve with a sparse symmetric K by its LU factorization without pivoting
    (symmetric mode, COLAMD ordering): as stable as Cholesky on a positive definite K;
    LinAlgError when K is singular, or (``positive``) has a pivot ≤ 0."""
    try:
        lu = splu(sp.csc_matrix(K), permc_spec="COLAMD", diag_pivot_thresh=0.0,
                  options={"SymmetricMode": True})
    except RuntimeError as failed:                    # exactly singular
        raise np.linalg.LinAlgError(str(failed)) from failed
    if positive and not np.all(lu.U.diagonal() > 0):
        raise np.linalg.LinAlgError("not positive definite")
    return lu.solve


def _positive_definite(Q, Qs):
    """Whether Q ≻ 0 (a Cholesky factorization, or with ``Qs`` a sparse LU one whose
    pivots are all positive)."""
    try:
        if Qs is None:
            np.linalg.cholesky(Q)
        else:
            _sparse_solve(Qs, positive=True)
    except np.linalg.LinAlgError:
        return False
    return True


def _to_boundary(v, dv):
    """The largest α ≤ 1 with v + α·dv ≥ 0 (v > 0)."""
    shrinking = dv < 0
    return min(1.0, float(np.min(-v[shrinking] / dv[shrinking]))) if shrinking.any() else 1.0


def _residual(Q, c, lam, lo, hi, z):
    """dist∞(0, ∂Φ(z)) for z in the box."""
    return float(np.max(np.abs(_descent_slopes(z, Q @ z + c, lam, lo, hi)[0]), initial=0.0))


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
