"""KKT residuals of docs/algorithms.md §2 (optimality conditions (8), Definition 1).

Each party evaluates its own share (:func:`party_share`: its Lagrangian gradient,
objective gradient and value, and the sums of squares of its residual rows); only their
exact sums (:mod:`constrfl.exactsum`) are combined (:func:`combine`), so this runs on
federated data as well, and the server never needs a single party's share.  Without
multipliers, :func:`kkt` estimates them (:func:`estimate_multipliers`); that needs each
party's constraint Jacobian (mᵢ × d) as well.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np
from scipy.optimize import linprog, lsq_linear

from . import kernels
from .exactsum import decode, encode, exact_sum
from .maxima import largest, least_largest, sketch
from .result import KKT, Multipliers

__all__ = ["kkt", "as_multipliers", "estimate_multipliers", "EstimatedKKT", "party_share",
           "combine", "measured_at", "share_sums", "definition1", "definition1_sq"]

# HiGHS tolerances for the multiplier LPs (its defaults, 1e-7, would show in the
# residuals; the residuals themselves are recomputed exactly at the LP's answer).
_LP_OPTIONS = dict(primal_feasibility_tolerance=1e-10, dual_feasibility_tolerance=1e-10)


@dataclass(eq=False)
class EstimatedKKT(KKT):
    """:class:`~constrfl.result.KKT` residuals at multipliers that :func:`kkt` estimated
    (none were given): ``multipliers`` ({party: Multipliers}) are those multipliers,
    ``estimate`` says how they were found (``"lp"``: stationarity minimized exactly;
    ``"least-squares"``: the fallback for a non-separable P; ``"none"``: no constraints,
    or w outside dom P).  ``multipliers_estimated`` is True."""

    multipliers: dict = field(default_factory=dict)
    estimate: str = "lp"
    multipliers_estimated = True

    def __eq__(self, other):
        """Equal to any KKT with the same residuals."""
        if not isinstance(other, KKT):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(KKT))


def as_multipliers(problem, multipliers=None):
    """Normalize ``multipliers`` to ``{party: Multipliers}`` with checked shapes.

    Accepts ``None`` (all zero), or a dict keyed by party name whose values are
    :class:`Multipliers`, ``(ineq, eq)`` pairs or ``{"ineq": ..., "eq": ...}`` dicts;
    parties left out get zeros.
    """
    given = {} if multipliers is None else dict(multipliers)
    names = {p.name for p in problem.parties}
    unknown = set(given) - names
    if unknown:
        raise ValueError(f"multipliers for unknown parties {sorted(unknown)}; "
                         f"parties are {sorted(names)}")
    out = {}
    for p in problem.parties:
        m = given.get(p.name)
        if m is None:
            ineq, eq = np.zeros(p.n_ineq), np.zeros(p.n_eq)
        elif isinstance(m, Multipliers):
            ineq, eq = m.ineq, m.eq
        elif isinstance(m, dict):
            ineq, eq = m.get("ineq", np.zeros(p.n_ineq)), m.get("eq", np.zeros(p.n_eq))
        else:
            ineq, eq = m
        ineq = np.asarray(ineq, dtype=np.float64).reshape(-1)
        eq = np.asarray(eq, dtype=np.float64).reshape(-1)
        for label, arr, n in (("ineq", ineq, p.n_ineq), ("eq", eq, p.n_eq)):
            if arr.shape != (n,):
                raise ValueError(f"multipliers[{p.name!r}].{label} has {arr.size} entries, "
                                 f"expected {n}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"multipliers[{p.name!r}].{label} contains NaN or inf")
        out[p.name] = Multipliers(ineq, eq)
    return out


def party_share(party, w, mult, atol=0.0):
    """One party's share of the KKT residuals at ``(w, μ, ν)`` (what it sends in a KKT
    round), all of them summed over the parties: its Lagrangian gradient ``∇fᵢ + ∇cᵢμᵢ +
    ∇hᵢνᵢ`` and objective gradient ``∇fᵢ``, its objective value fᵢ(w), and the
    :func:`~constrfl.maxima.sketch` of the largest feasibility, complementarity and
    Definition-1 residual of its constraint rows and of the two terms of the scale S₂
    (:class:`~constrfl.records.KKT`)."""
    f, f_grad = party.f_value_grad(w)
    (c, Jc), h = party.c_value_jac(w), party.h_value(w)
    Jh = party.h_jac(w) if h.size else np.zeros((0, w.size))
    mu, nu = mult.ineq, mult.eq
    linear = np.concatenate([Jc @ w, Jh @ w])
    offset = np.concatenate([c, h]) - linear
    return {"lagrangian_grad": f_grad + Jc.T @ mu + Jh.T @ nu,
            "objective_grad": f_grad,
            "objective": float(f),
            "feasibility_max": sketch(max(_inf_norm(np.maximum(c, 0.0)), _inf_norm(h))),
            "complementarity_max": sketch(_inf_norm(np.minimum(mu, -c))),
            "definition1_max": sketch(definition1(c, h, mu, atol)),
            "linear_max": sketch(_inf_norm(linear)), "offset_max": sketch(_inf_norm(offset))}


def combine(sums, regularizer, w, atol=0.0, parties=1):
    """``(KKT, F(w))`` from the sums of the parties' shares (:func:`party_share`) of
    ``parties`` parties: stationarity dist∞(0, Σᵢ(∇fᵢ + ∇cᵢμᵢ + ∇hᵢνᵢ) + ∂P(w)); the
    other residuals upper bounds of the largest over every constraint row of every party
    (:func:`~constrfl.maxima.largest`: exact when one party holds the largest in its
    bin of eight octaves), so a residual within tol certifies the ∞-norm; the scales
    S₁ = max(‖Σ∇fᵢ‖∞, ‖Σ(∇cᵢμᵢ + ∇hᵢνᵢ)‖∞) and S₂ ≥ a lower bound of the largest
    |∇gⱼᵀw|, |gⱼ − ∇gⱼᵀw| (:func:`~constrfl.maxima.least_largest`: a relative tolerance
    never looser than with the exact S₂); and F(w) = Σᵢ fᵢ(w) + P(w)."""
    g, fg = sums["lagrangian_grad"], sums["objective_grad"]
    kkt = KKT(float(regularizer.dist(w, g, atol)),
              exact_stationarity=regularizer.exact_dist,
              feasibility=largest(sums["feasibility_max"]),
              complementarity=largest(sums["complementarity_max"]),
              definition1=largest(sums["definition1_max"]),
              stationarity_scale=max(_inf_norm(fg), _inf_norm(g - fg)),
              feasibility_scale=max(least_largest(sums["linear_max"], parties),
                                    least_largest(sums["offset_max"], parties)))
    return kkt, sums["objective"] + regularizer.value(w)


def measured_at(problem, w, sums):
    """``(KKT, F)`` at the server's point ``w`` from a round's :class:`~constrfl.federation.Sums`
    of the parties' shares (:func:`combine`), in the user's units
    (``problem.user_regularizer`` at ``problem.user_point(w)``: a scaled solve's view maps
    its x back)."""
    return combine(sums, problem.user_regularizer, problem.user_point(w),
                   parties=sums.parties)


def _inf_norm(v):
    return float(np.max(np.abs(v), initial=0.0))


def definition1(c, h, mu, atol=0.0):
    """Definition 1's residual of one party, the largest of its rows: |cⱼ| where
    μⱼ > 0, [cⱼ]₊ where μⱼ = 0 (inf where μⱼ < 0), and |hⱼ|."""
    return float(kernels.definition1(c, h, mu, float(atol)))


def definition1_sq(c, h, mu, atol=0.0):
    """The same rows squared and summed (the ADMM's early stop: their 2-norm over the
    blocks bounds the largest from above)."""
    return float(kernels.definition1_sq(c, h, mu, float(atol)))


def share_sums(shares):
    """The exact sums (:mod:`constrfl.exactsum`) of a list of shares, as a
    :class:`~constrfl.federation.Sums` would hold them."""
    return {k: decode(exact_sum(encode(s[k]) for s in shares)) for k in shares[0]}


def kkt(problem, w, multipliers=None, atol=0.0):
    """Residuals of §2 at ``(w, μ, ν)``; see :class:`~constrfl.result.KKT`.

    ``multipliers=None``: the multipliers are *estimated* as those that minimize the
    stationarity residual ``dist∞(0, ∇f + ∇c·μ + ∇h·ν + ∂P(w))`` over μ ≥ 0, ν free
    (:func:`estimate_multipliers`), and an :class:`EstimatedKKT` (a KKT that also
    carries them) is returned; w is then a KKT point iff all its residuals vanish.

    ``atol`` treats ``|w_j − kink| ≤ atol`` as at the kink of P and ``μ_j ≤ atol`` as
    zero in Definition 1 (use a small positive value for interior-point solutions).
    """
    w = _point(problem, w)
    if multipliers is None:
        mults, how = estimate_multipliers(problem, w, atol)
        return EstimatedKKT(**asdict(kkt(problem, w, mults, atol)), multipliers=mults,
                            estimate=how)
    mults = as_multipliers(problem, multipliers)
    # the parties a federation sums: the clients, and the server where it has functions
    parties = [p for p in problem.parties if p is not problem.server or not p.is_empty]
    shares = [party_share(p, w, mults[p.name], atol) for p in parties]
    return combine(share_sums(shares), problem.regularizer, w, atol, len(shares))[0]


def _point(problem, w):
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (problem.dim,):
        raise ValueError(f"w has shape {w.shape}, expected ({problem.dim},)")
    if not np.all(np.isfinite(w)):
        raise ValueError("w contains NaN or inf")
    return w


def estimate_multipliers(problem, w, atol=0.0):
    """Multipliers ``λ = (μ ≥ 0, ν)`` minimizing the stationarity residual at ``w``:
    ``({party: Multipliers}, how)``.

    With ``g₀ = Σ ∇fᵢ(w)`` and ``A = [∇c(w)ᵀ ∇h(w)ᵀ]`` (d × m), the residual is
    ``min_{z ∈ ∂P(w)} ‖g₀ + Aλ + z‖∞``.

    * separable P (``how = "lp"``, exact): ``∂P(w) = Π_j [lo_j, hi_j]``; eliminating the
      subgradient variable z_j leaves the LP ``min t`` s.t.
      ``g₀_j + A_jλ + lo_j ≤ t`` and ``−g₀_j − A_jλ − hi_j ≤ t`` (rows with an infinite
      end dropped), μ ≥ 0, t ≥ 0 (for L1 at w_j = 0 this is ``[|g_j + A_jλ| − lam]₊``).
      A second LP breaks ties toward complementarity: among λ whose residual is within
      ``1e-9·(1 + ‖g₀‖∞)`` (the LP's precision) of the minimum it minimizes
      ``Σ_j μ_j·[−c_j(w)]₊``, so inactive constraints get μ_j = 0 where they can.
      Both are solved by HiGHS (dual simplex).
    * any other P (``how = "least-squares"``, a documented fallback): λ minimizes the
      Euclidean norm ``‖g₀ + Aλ‖₂`` over μ ≥ 0 (bounded least squares), ignoring ∂P;
      the residual reported with it is exact for that λ, an upper bound of the minimum.

    ``how = "none"`` when there are no constraints (nothing to estimate) or w lies
    outside dom P (the residual is inf for every λ); the multipliers are then 0.
    """
    w = _point(problem, w)
    g0 = np.zeros(problem.dim)
    cols, slack, sizes = [], [], []
    for p in problem.parties:
        g0 += p.f_value_grad(w)[1]
        c, Jc = p.c_value_jac(w)
        cols += [Jc.T, p.h_jac(w).T]
        slack += [np.maximum(-c, 0.0), np.zeros(p.n_eq)]
        sizes += [p.n_ineq, p.n_eq]
    A = np.hstack(cols)
    free = np.concatenate([np.full(n, k % 2 == 1) for k, n in enumerate(sizes)])
    weights = np.concatenate(slack)
    P = problem.regularizer
    lam, how = np.zeros(A.shape[1]), "none"
    if A.shape[1] and P.separable:
        lo, hi = P.subgradients(w, atol)
        if np.all(lo <= hi):
            lam, how = _lp_multipliers(g0, A, free, weights, lo, hi), "lp"
    elif A.shape[1]:
        lower = np.where(free, -np.inf, 0.0)
        lam = lsq_linear(A, -g0, bounds=(lower, np.inf), method="bvls").x
        how = "least-squares"
    lam = np.where(free, lam, np.maximum(lam, 0.0))
    out, start = {}, 0
    for p in problem.parties:
        mu = lam[start:start + p.n_ineq]
        nu = lam[start + p.n_ineq:start + p.n_ineq + p.n_eq]
        start += p.n_ineq + p.n_eq
        out[p.name] = Multipliers(mu.copy(), nu.copy())
    return out, how


def _lp_multipliers(g0, A, free, weights, lo, hi):
    """The two LPs of :func:`estimate_multipliers` over x = (λ, t)."""
    m = A.shape[1]
    up, down = np.isfinite(lo), np.isfinite(hi)
    # g0 + Aλ + lo ≤ t  and  −g0 − Aλ − hi ≤ t, as rows [±A_j, −1]·x ≤ rhs
    A_ub = np.vstack([np.hstack([A[up], -np.ones((up.sum(), 1))]),
                      np.hstack([-A[down], -np.ones((down.sum(), 1))])])
    b_ub = np.concatenate([-(g0 + lo)[up], (g0 + hi)[down]])
    bounds = [(None, None) if f else (0.0, None) for f in free] + [(0.0, None)]
    cost = np.r_[np.zeros(m), 1.0]
    first = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs-ds",
                    options=_LP_OPTIONS)
    if first.status != 0:
        raise RuntimeError(f"kkt: the multiplier LP failed: {first.message}")
    if not np.any(weights > 0):
        return first.x[:m]
    t_max = first.x[m] + 1e-9 * (1.0 + float(np.max(np.abs(g0), initial=0.0)))
    bounds[-1] = (0.0, t_max)
    second = linprog(np.r_[weights, 0.0], A_ub=A_ub, b_ub=b_ub, bounds=bounds,
                     method="highs-ds", options=_LP_OPTIONS)
    return (second if second.status == 0 else first).x[:m]
