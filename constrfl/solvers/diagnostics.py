"""What the outer loop concludes when it is not converging: infeasibility (with a
certificate), unboundedness, or iterates that run off (no minimizer).

**Infeasibility.**  When the constraint violation stalls: a certificate, or a larger β.

A stalled violation has two causes: an empty feasible set, or a penalty β too small for
the multiplier steps to push the iterates to it.  To tell them apart the server solves
the violation-minimization problem, federatedly (each party evaluates its own term,
message ``feas.eval``),

    V* = inf { V(w) = Σᵢ ‖[cᵢ(w)]₊‖² + ‖hᵢ(w)‖²  :  w ∈ dom P },

by the proximal Newton method from the current iterate, to a best point x.  A small
gradient at x is no proof that V* > 0: V may keep falling far away (a logistic
constraint on separable data: V → 0 as ‖w‖ → ∞ while ∇V(x) ≈ 1e-10).  The verdict
needs a **lower bound** L ≤ V*, from convexity alone (:func:`certified_bound`):

* **infeasible** when the problem is convex and √(L/m) > 10·ε₂ (m constraint rows):
  since V(w) ≤ m·(largest violation at w)², every point of dom P then violates some
  constraint by more than 10·ε₂;
* otherwise the outer loop goes on (a feasible point within 10ε₂ may exist, or there
  is no proof: a nonconvex problem, or no positive bound), with β ← 10β when the iterate
  violates its constraints by more than twice the best point does (β is then what
  holds it back); the history records the evidence, and a solve that ends at
  ``max_outer`` still infeasible repeats it in its message.

The bound is exact for the values and gradients the parties report (the server's own
sums carry allowances for their rounding).  Where V is flat along a direction (its
Hessian singular there, e.g. collinear features), no finite set of gradients proves a
bound unless they vanish exactly along it: such a problem is not called infeasible.
"""
from __future__ import annotations

import numpy as np

from ..errors import PartyError
from ..maxima import largest
from ..messages import MessageType as M
from ..residuals import measured_at
from ..prox import Box, L1Ball, L2Ball, Zero
from .newton import Newton

__all__ = ["stalled", "violation_check", "certified_bound", "cutting_plane_bound",
           "unbounded", "running_off", "STATIONARY"]

WINDOW = 5          # outer iterations between checks, and over which progress is judged
STATIONARY = 1e-9   # the Newton method's stop test on V (the best point's accuracy)
MAX_STEPS = 50      # Newton steps on V per check
#: the probes' distance: for a quadratic V their tangent planes pass at most this
#: fraction of V(x) below V(x) at x
PROBE_DROP = 0.25
#: then, while the probes prove nothing (V far from its quadratic model there), closer
#: ones: n + 1 rounds each
PROBE_SHRINK = (1.0, 0.1, 0.01)
#: probes are placed by V's Hessian at x, and not tried when its condition number is
#: above this (a flat direction, e.g. fewer class-1 rows than features)
MAX_CONDITION = 1e12


def stalled(history, last_check, eps2):
    """The violation stayed above max(10ε₂, 1e-9) and did not halve over the last
    ``WINDOW`` outer iterations, the last check being at least ``WINDOW``·2ʲ ago, j the
    checks in a row that left β as it is now (each would find the same best point:
    the checks thin out instead of repeating every ``WINDOW`` iterations)."""
    k = len(history)
    if k < WINDOW or k - last_check < WINDOW:
        return False
    v = [r["feasibility"] for r in history[-WINDOW:]]
    if not (min(v) > max(10 * eps2, 1e-9) and v[-1] > 0.5 * v[0]):
        return False
    return k - last_check >= WINDOW * 2 ** min(_repeats(history), 20)


def _repeats(history):
    """The latest infeasibility checks, counted back from the newest, made at the
    current β."""
    j = 0
    for r in reversed(history):
        if r["beta"] != history[-1]["beta"]:
            break
        j += "infeasibility_check" in r
    return j


def domain(P, dim):
    """The indicator part of P: a ball itself; for a separable P the box of its
    :meth:`~constrfl.prox.Regularizer.pieces` (a Box, a Boxed sum, the Piecewise P of
    a scaled solve), nothing when that box is all of Rⁿ; nothing for any other P."""
    if isinstance(P, (L1Ball, L2Ball)):
        return P
    pieces = P.pieces(dim)
    if pieces is None or not np.isfinite(pieces[2:]).any():
        return Zero()
    return Box(*pieces[2:])


def violation_check(problem, fed, s, eps, inner="newton"):
    """Solve the violation-minimization problem from ``s.w``; return the verdict text if
    the problem is proven infeasible, else record the evidence in the history, take the
    penalty step (:func:`_penalty_step`) and return None.  By the solve's ``inner``
    Newton variant where dom P is everything (``"newton-cg"``: no Hessians travel;
    ``"newton-basis"``: Hessians in the row bases), else by proximal Newton.
    ``eps = (ε₁, ε₂)``."""
    eps1, eps2 = eps
    dom = domain(problem.regularizer, s.w.size)
    smooth = isinstance(dom, Zero)
    newton = Newton(dom, s.w.size, max_iter=MAX_STEPS, message_type=M.FEAS_EVAL,
                    cg=smooth and inner == "newton-cg",
                    basis=smooth and inner == "newton-basis")
    sums = fed.broadcast(M.FEAS_EVAL, {"w": s.w, **newton.start_message(0, np.inf)[0]},
                         include_server=True)
    sub = newton.begin(sums, s.w, STATIONARY, np.inf)
    w, _ = newton.run(fed, sub, np.inf)
    sums = fed.broadcast(M.FEAS_EVAL, {"w": w, "order": 0, "report": True},
                         include_server=True)
    worst = largest(sums["violation_max"])
    convex = sums["nonconvex"] == 0
    rows = int(sums["rows"])
    needed = rows * (10 * eps2) ** 2            # √(L/m) > 10ε₂  ⟺  L > m(10ε₂)²
    s.last_check = s.k
    best = (f"{sub.f:.3e} (V at the best point found: largest violation {worst:.3e}, "
            f"stationarity {sub.r:.1e}, {sub.iterations} Newton steps)")
    if not convex:
        note = f"≤ {best}; no bound: the constraints are not all convex"
    elif sub.f <= needed:
        note = f"≤ {best}: a point within 10ε₂ of feasibility may exist"
    else:
        bound, how = certified_bound(fed, dom, w, sub.f, sub.g, sub.H,
                                     probe=sub.r <= STATIONARY and sub.H is not None)
        if bound > needed:
            return ("no point satisfies the constraints: min ‖[c]₊‖² + ‖h‖² over dom P = "
                    f"{bound:.3e} (a lower bound by {how}) to {best}, so every point of "
                    f"dom P violates one of its {rows} constraint rows by at least "
                    f"√({bound:.3e}/{rows}) = {np.sqrt(bound / rows):.3e} > 10ε₂")
        proof = (f"lower bound {bound:.3e} by {how}, not above m(10ε₂)² = {needed:.1e}"
                 if bound > 0 else f"no positive lower bound ({how})")
        note = f"≤ {best}; {proof}: not proven infeasible"
    s.history[-1]["infeasibility_check"] = (f"min ‖[c]₊‖² + ‖h‖² over dom P {note}; "
                                            + _penalty_step(s, worst, eps1))
    return None


def _penalty_step(s, worst, eps1):
    """After a check without proof: β ← 10β when the iterate violates its constraints
    by more than twice the best point's largest violation (β is what keeps it from
    there); otherwise β stays (a larger β cannot take the iterates below the minimum
    violation, and would only make the subproblems harder).  Also beyond ``beta_max``
    (a fixed small β, the paper's, whose violation stalls), but not to where the
    subproblems' rounding passes ε₁: the AL Hessian β∇c∇cᵀ times the spacing of the
    floats at w, ~10β·spacing(‖w‖∞) for rows of norm ~1 (Maros–Meszaros QGROW7,
    ‖w‖∞ ≈ 1e6: raised from 1e4 to 1e5 it stalled at a stationarity of 1e-5; at 1e4 it
    is optimal).  The β floor rule of :func:`~.proxal.next_penalties` would lower such a
    β again, but the raise and the way back cost rounds (5 clients: QGROW7 300 against
    269, QGROW22 431 against 310).  Returns the note."""
    violation = s.history[-1]["feasibility"]
    if not violation > 2 * worst:
        return (f"β stays {s.beta:g}: the iterate's violation {violation:.3e} is within "
                "2x of the best point's")
    rounding = 10.0 * s.beta * float(np.spacing(max(float(np.max(np.abs(s.w))), 1.0)))
    if rounding > eps1:
        return (f"β stays {s.beta:g}: at 10β the subproblems' rounding, 10β·spacing(‖w‖∞) "
                f"= {rounding:.1e}, would exceed ε₁")
    s.beta *= 10.0
    s.eta = max(s.eta, s.beta)
    s.inner = None          # the next subproblem restarts with the new β
    return f"β raised to {s.beta:g}"


# -- lower bounds on V* from convexity --------------------------------------------------

def certified_bound(fed, dom, x, V, g, H, probe=True):
    """A lower bound L ≤ V* = inf over dom of the convex V from its value V, gradient g
    and Hessian (or model) H at the best point x, and how it was found.

    First the tangent plane at x, free: V(w) ≥ V + gᵀ(w − x), so
    L = V + inf_{w ∈ dom} gᵀ(w − x) (:func:`tangent_bound`; finite over a ball, or where
    g vanishes along every unbounded direction).  Otherwise, if ``probe`` (x stationary,
    H known) and dom P is everything or a box, the cutting planes at n + 1 probes around
    x (:func:`probe_bound`: n + 1 ``feas.eval`` rounds per probe distance, n the
    coordinates V depends on there)."""
    bound = tangent_bound(dom, V, g, x)
    if bound > 0 or not probe or not isinstance(dom, (Zero, Box)):
        return bound, "the tangent plane of V at the best point (V convex)"
    return probe_bound(fed, dom, x, V, g, H)


def tangent_bound(dom, V, g, x):
    """V + inf_{w ∈ dom} gᵀ(w − x) (−inf when unbounded below): for a box coordinate by
    coordinate, gⱼ(lⱼ − xⱼ) for gⱼ > 0 and gⱼ(uⱼ − xⱼ) for gⱼ < 0; over a ball of radius
    R about 0, −R‖g‖_* − gᵀx (‖·‖_* the dual norm)."""
    if isinstance(dom, L2Ball):
        return V - dom.radius * float(np.linalg.norm(g)) - float(g @ x)
    if isinstance(dom, L1Ball):
        return V - dom.radius * float(np.max(np.abs(g))) - float(g @ x)
    _, _, lo, hi = dom.pieces(x.size)
    end = np.where(g > 0, lo, np.where(g < 0, hi, x))
    if not np.all(np.isfinite(end)):
        return -np.inf
    return V + float(g @ (end - x))


def probe_bound(fed, dom, x, V, g, H):
    """The cutting-plane bound (:func:`cutting_plane_bound`) of Ṽ(w) = V(w) + πᵀ(w − b)
    from gradients at n + 1 probes around x.

    π, b: the box rows x holds at a bound the gradient pushes against (gⱼ < 0 at
    uⱼ < ∞: πⱼ = −gⱼ ≥ 0, bⱼ = uⱼ; gⱼ > 0 at lⱼ > −∞: πⱼ = −gⱼ ≤ 0, bⱼ = lⱼ); then
    πᵀ(w − b) ≤ 0 on the box, so Ṽ ≤ V there and a bound on inf Ṽ over Rⁿ bounds V*.
    Probes: x + δ H_SS⁻¹vₖ on the coordinates S where g or H is nonzero, vₖ the n + 1
    unit vertices of a regular simplex, so that ∇Ṽ at the probes ≈ ∇Ṽ(x) + δvₖ
    surround 0; δ² max vₖᵀH_SS⁻¹vₖ = 2·PROBE_DROP·V, then δ shrunk by PROBE_SHRINK while
    the bound is not positive.  No bound (−inf) when H_SS is
    (nearly) singular, a probe's gradient depends on a coordinate outside S, or a
    party's function fails at a probe."""
    _, _, lo, hi = dom.pieces(x.size)
    held = ((g < 0) & (x >= hi)) | ((g > 0) & (x <= lo))
    pi = np.where(held, -g, 0.0)
    b = np.where(g < 0, hi, lo)
    S = np.flatnonzero((g != 0) | np.any(H != 0, axis=0))
    how = f"cutting planes at {S.size + 1} probes (V convex)"
    if S.size == 0:                 # g = 0, so the tangent bound was V itself
        return -np.inf, f"{how}: nothing to probe"
    probes = _probe_directions(H[np.ix_(S, S)])
    if probes is None:
        return -np.inf, (f"{how} not tried: V is flat along a direction at the best "
                         f"point, its Hessian's condition number > {MAX_CONDITION:.0e}")
    D, q = probes
    bound = -np.inf
    for shrink in PROBE_SHRINK:
        delta = shrink * np.sqrt(2 * PROBE_DROP * V / np.max(q))
        points = np.repeat(x[None], S.size + 1, axis=0)
        points[:, S] += delta * D.T
        try:
            values, grads = _evaluate(fed, points)
        except PartyError as err:
            return -np.inf, f"{how}: a party's function failed at a probe ({err})"
        if np.any(grads[:, np.setdiff1d(np.arange(x.size), S)] != 0):
            return -np.inf, f"{how}: V depends on more coordinates at the probes"
        shifted = values + (points - np.where(held, b, x)) @ pi
        bound = cutting_plane_bound(shifted, grads[:, S] + pi[S], points[:, S], x[S])
        if bound > 0:
            break
    return bound, how


def _probe_directions(M):
    """The columns M⁻¹vₖ, k = 0..n, vₖ the unit vertices of a regular simplex centred
    at 0 in Rⁿ (Σvₖ = 0), and qₖ = vₖᵀM⁻¹vₖ: for F = F₀ + ½yᵀMy the tangent plane at
    y = δM⁻¹vₖ (gradient δvₖ) passes δ²qₖ/2 below F₀ at y = 0.  None when M is not
    positive definite with condition number at most MAX_CONDITION (V flat along a
    direction: gradients near x cannot surround 0 there)."""
    n = M.shape[0]
    E = np.eye(n + 1) - 1.0 / (n + 1)                  # the vertices eₖ, centred
    Q = np.linalg.qr(E[:, :n])[0]                      # a basis of {Σ = 0}
    Vs = Q.T @ E
    Vs /= np.linalg.norm(Vs, axis=0)
    eig, U = np.linalg.eigh(M)
    if not eig[0] > eig[-1] / MAX_CONDITION:
        return None
    D = U @ ((U.T @ Vs) / eig[:, None])
    return D, np.einsum("jk,jk->k", Vs, D)


def _evaluate(fed, points):
    """V and ∇V at each point (one ``feas.eval`` round each)."""
    values, grads = [], []
    for p in points:
        sums = fed.broadcast(M.FEAS_EVAL, {"w": p, "order": 1}, include_server=True)
        values.append(sums["values"][0])
        grads.append(sums["grad"])
    values, grads = np.array(values), np.array(grads)
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(grads))):
        raise PartyError("a probe's value or gradient is not finite")
    return values, grads


def cutting_plane_bound(values, grads, points, center):
    """A lower bound on inf over Rⁿ of a convex F from Fₖ = F(xₖ), gₖ = ∇F(xₖ):
    −inf unless the gₖ surround 0.

    With y = w − c (c = ``center``), aₖ = Fₖ + gₖᵀ(c − xₖ): F(w) ≥ aₖ + gₖᵀy for every k
    (convexity).  Take weights λ > 0, Σλ = 1, with r = Σλₖgₖ ≈ 0 (the barycentric
    coordinates of 0 among the gₖ), A = Σλₖaₖ and σ the n-th singular value of
    G = [gₖ].  Then

    * F(w) ≥ A + rᵀy ≥ A − ‖r‖‖y‖ (the λ-average of the planes), and
    * F(w) ≥ minₖ aₖ + maxₖ zₖ with z = Gᵀy, where maxₖ zₖ ≥ Σλₖ[zₖ]₊ =
      (Σλₖ|zₖ| + rᵀy)/2 ≥ (λ_min‖z‖₂ − ‖r‖‖y‖)/2 ≥ γ‖y‖, γ = (λ_min·σ − ‖r‖)/2;

    so for γ > 0, F ≥ min over ρ ≥ 0 of max(A − ‖r‖ρ, minₖaₖ + γρ), reached where the
    two meet: L = A − ‖r‖(A − minₖaₖ)/(γ + ‖r‖) (A ≥ minₖ aₖ).  The aₖ, A, ‖r‖, σ and γ
    carry allowances for the rounding of the sums that form them (K·eps relative), so
    L is a bound for the given Fₖ and gₖ, not for their own rounding errors."""
    G = np.asarray(grads, dtype=float).T                       # n × K
    n, K = G.shape
    if K < n + 1:
        return -np.inf
    u = K * np.finfo(float).eps               # allowances for the rounding of the sums
    step = np.abs(grads) * np.abs(center - points)
    a = values + np.einsum("kj,kj->k", grads, center - points)
    a -= u * (np.abs(values) + step.sum(axis=1))
    lam = np.linalg.lstsq(np.vstack([G, np.ones(K)]), np.r_[np.zeros(n), 1.0],
                          rcond=None)[0]
    if not np.all(lam > 0):
        return -np.inf
    lam /= lam.sum()
    r = float(np.linalg.norm(G @ lam)) + u * float(np.linalg.norm(np.abs(G) @ lam))
    sv = np.linalg.svd(G, compute_uv=False)
    sigma = sv[-1] - u * sv[0]
    gamma = 0.5 * (lam.min() * sigma - r) * (1 - u)     # Σλ = 1 to rounding
    if not gamma > 0:
        return -np.inf
    A = float(lam @ a) - u * float(lam @ np.abs(a))
    return A - r * max(A - float(a.min()), 0.0) / (gamma + r)


def unbounded(history, eps2):
    """The unboundedness signature, judged on the second half of the outer iterations
    (at least 20): every iterate feasible within ε₂, and the objective still falls as
    fast at the end as at the half-way point (mean decrease over 5 iterations, at least
    90%), by more than 10⁻⁶(1 + |F|) in all, while the stationarity residual has not
    fallen (at least 90%) and ‖w‖∞ grew: steady descent along feasible points that run
    off, with no sign of a minimizer (a signature, not a proof: :func:`ray_probe` must
    confirm it before a claim).  (Without the last two, an objective drifting at
    rounding level near a minimizer — Maros–Meszaros PRIMALC1, 2.8·10⁻⁹ an iteration at
    F = −6155 — was called unbounded.)  (A problem whose infimum is
    not attained — logistic loss on separable data — fails it: its decrease and its
    stationarity fall like 1/k.)  Returns the evidence text, or None."""
    k = len(history)
    if k < 20:
        return None
    half = history[k // 2:]

    def drop(i):
        return (history[i - 5]["objective"] - history[i]["objective"]) / 5

    first, last = drop(k // 2), drop(k - 1)
    fall = half[0]["objective"] - half[-1]["objective"]
    if (first > 0 and last >= 0.9 * first                      # the scan over half last
            and half[-1]["stationarity"] >= 0.9 * half[0]["stationarity"]
            and fall > 1e-6 * (1.0 + abs(half[0]["objective"]))
            and half[-1]["w_norm"] > half[0]["w_norm"]
            and all(r["feasibility"] <= eps2 for r in half)):
        return (f"the objective falls by {last:.3g} per outer iteration (to "
                f"{half[-1]['objective']:.6g}) along feasible iterates, as fast as "
                f"{k - k // 2} iterations before, while the stationarity stays at "
                f"{half[-1]['stationarity']:.2e}: unbounded below")
    return None


#: the probe of :func:`ray_probe` goes this many times ‖wᵏ‖∞ (at least 1) along the step
PROBE_DISTANCE = 1e6


def ray_probe(problem, fed, w_prev, w, objective, eps2):
    """Evidence that F is unbounded below on the feasible set, or None: along the last
    step d = wᵏ⁺¹ − wᵏ, at p₁ = w + T·d and p₂ = w + 2T·d (T·‖d‖∞ = ``PROBE_DISTANCE``
    × max(1, ‖w‖∞)), every constraint holds within ε₂ (two ``kkt.report`` rounds), F
    is finite and falls, and falls linearly: |F(p₂) − 2F(p₁) + F(w)| ≤ 10⁻³(F(w) −
    F(p₁)).  A convex problem with a minimizer nearer than p₁ along the ray curves up
    or leaves the feasible set there (the trajectory alone cannot tell a far-away
    minimizer from none: Maros–Meszaros QBEACONF, scaled, fell steadily by ~20 an outer
    iteration towards its minimizer)."""
    d = w - w_prev
    size = float(np.max(np.abs(d), initial=0.0))
    if not size > 0:
        return None
    T = PROBE_DISTANCE * max(1.0, float(np.max(np.abs(w)))) / size
    values = [objective]
    for t in (T, 2 * T):
        p = w + t * d
        sums = fed.broadcast(M.KKT_REPORT, {"w": p, "penalty_weight": 0.0},
                             include_server=True)
        kkt, F = measured_at(problem, p, sums)
        if not (np.isfinite(F) and kkt.feasibility <= eps2):
            return None
        values.append(F)
    F0, F1, F2 = values
    if not (F2 < F1 < F0 and abs(F2 - 2 * F1 + F0) <= 1e-3 * (F0 - F1)):
        return None
    return (f"; along the last step, at {T * size:.3g} and {2 * T * size:.3g} from the "
            f"iterate every constraint holds within ε₂ and F falls linearly, to {F1:.6g} "
            f"and {F2:.6g}")


def running_off(history):
    """Hints for a solve that ran out of iterations: ‖w‖∞ kept growing through the
    second half (every iteration, by 10% or more in all) — the problem may have no
    minimizer; and, when the last iterate still violates a constraint, the evidence of
    the last infeasibility check (:func:`_last_check_note`)."""
    return _growing(history) + _last_check_note(history)


def _growing(history):
    if len(history) < 10:
        return ""
    norms = [r["w_norm"] for r in history[len(history) // 2:]]
    if all(b > a for a, b in zip(norms, norms[1:])) and norms[-1] >= 1.1 * norms[0]:
        return (f"; ‖w‖∞ kept growing, from {norms[0]:.3g} to {norms[-1]:.3g} over the "
                f"last {len(norms)} outer iterations: the problem may have no minimizer "
                "(e.g. a logistic loss on separable data); add a ridge (prox.SquaredL2) "
                "or bound w")
    return ""


def _last_check_note(history):
    """``"; the last infeasibility check (outer iteration k): …"`` when the last iterate
    violates a constraint and a check ran, else ``""``."""
    if not history or not history[-1]["feasibility"] > 0:
        return ""
    checks = [r for r in history if "infeasibility_check" in r]
    if not checks:
        return ""
    return (f"; the last infeasibility check (outer iteration {checks[-1]['k']}): "
            f"{checks[-1]['infeasibility_check']}")
