"""KKT residuals of ALGORITHMS.md §2 (optimality conditions (8), Definition 1).

Each owner evaluates its own part (its share of the Lagrangian gradient and its
constraint values); only those are combined, so this runs on federated data as well.
"""
from __future__ import annotations

import numpy as np

from .result import KKT, Multipliers

__all__ = ["kkt", "as_multipliers"]


def as_multipliers(problem, multipliers=None):
    """Normalize ``multipliers`` to ``{owner: Multipliers}`` with checked shapes.

    Accepts ``None`` (all zero), or a dict keyed by owner name whose values are
    :class:`Multipliers`, ``(ineq, eq)`` pairs or ``{"ineq": ..., "eq": ...}`` dicts;
    owners left out get zeros.
    """
    given = {} if multipliers is None else dict(multipliers)
    names = {p.name for p in problem.parties}
    unknown = set(given) - names
    if unknown:
        raise ValueError(f"multipliers for unknown owners {sorted(unknown)}; "
                         f"owners are {sorted(names)}")
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


def party_residuals(party, w, mult, atol=0.0):
    """One owner's message: its Lagrangian gradient share ``∇fᵢ + ∇cᵢμᵢ + ∇hᵢνᵢ`` and
    the max of its feasibility, complementarity and Definition-1 residuals."""
    g = party.f_value_grad(w)[1]
    (c, Jc), h = party.c_value_jac(w), party.h_value(w)
    mu, nu = mult.ineq, mult.eq
    if c.size:
        g = g + Jc.T @ mu
    if h.size:
        g = g + party.h_jac(w).T @ nu
    hinf = float(np.max(np.abs(h), initial=0.0))
    feas = max(float(np.max(c, initial=0.0)), hinf)
    compl = float(np.max(np.abs(np.minimum(mu, -c)), initial=0.0))
    cone = np.where(mu > atol, np.abs(c), np.maximum(c, 0.0))
    cone = np.where(mu < -atol, np.inf, cone)
    def1 = max(float(np.max(cone, initial=0.0)), hinf)
    return g, feas, compl, def1


def kkt(problem, w, multipliers=None, atol=0.0):
    """Residuals of §2 at ``(w, μ, ν)``; see :class:`~constrfl.result.KKT`.

    ``atol`` treats ``|w_j − kink| ≤ atol`` as at the kink of P and ``μ_j ≤ atol`` as
    zero in Definition 1 (use a small positive value for interior-point solutions).
    """
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (problem.dim,):
        raise ValueError(f"w has shape {w.shape}, expected ({problem.dim},)")
    if not np.all(np.isfinite(w)):
        raise ValueError("w contains NaN or inf")
    mults = as_multipliers(problem, multipliers)
    g = np.zeros(problem.dim)
    feas = compl = def1 = 0.0
    for p in problem.parties:
        gp, fp, cp_, dp = party_residuals(p, w, mults[p.name], atol)
        g += gp
        feas, compl, def1 = max(feas, fp), max(compl, cp_), max(def1, dp)
    stat = problem.regularizer.dist(w, g, atol)
    return KKT(float(stat), feas, compl, def1, problem.regularizer.exact_dist)
