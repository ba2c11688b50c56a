"""The federated Newton inner solver (docs/algorithms.md §5), a party's side:
``newton.eval`` (values, gradient, Hessian, or its compact form: the core in the row
basis or the sparse entries, :mod:`constrfl.rowspace`),
``newton.hvp``, ``newton.basis``, and ``feas.eval`` (the same for the violation term of
the infeasibility check, §3)."""
from __future__ import annotations

import numpy as np

from ..maxima import sketch
from ..messages import NEXT, MessageType as M, pack_upper, trial_steps
from ..rowspace import SparseGram, basis_core, constraint_models, gram_values, hessian_form
from ..augmented import AugmentedTerm
from .al import kkt_share, take_ahead, term as al_term
from .registry import handles

__all__ = ["newton_eval", "newton_hvp", "newton_basis", "feas_eval"]


def _basis(ctx):
    """The compact form of the party's Hessian (:func:`~constrfl.rowspace.hessian_form`:
    a row basis (B1), a sparse pattern (B4), or None): computed once a solve, kept on its
    context."""
    return ctx.memo("basis", None, lambda: hessian_form(ctx.party))


def _evaluate(term, msg, ctx):
    """A ``newton.eval``-shaped reply: the term's values at the trial points, gradient
    and Hessian (upper triangle, and ``no_hessian``: 1 for a party that has none) at
    the first one, as ``msg["order"]`` asks (with the primal-dual weights (N3) about
    the step's start ``x`` on a line-search round), and with ``v`` (Newton-CG's
    recycled directions, a block) the Hessian's products with them there (``hv``); with
    ``basis`` the Hessian in its compact form where the party has one: its core in the
    row basis (B1), or its sparse entries and constraint rows (B4)."""
    order, w = msg["order"], msg["w"]
    compact = None
    if order >= 2 and msg.get("basis"):
        form = _basis(ctx)
        args = term.party, form, w, term.beta, term.mu, term.objective
        if isinstance(form, SparseGram):
            gram = gram_values(*args)
            compact = None if gram is None else {"gram": gram[0], "lowrank": gram[1].ravel()}
        else:
            core = basis_core(*args)
            compact = None if core is None else {"core": pack_upper(core)}
            models = constraint_models(*args) if compact and msg.get("models") else None
            if models is not None:
                compact["models"] = models
    val, g, H = term(w, 1 if compact is not None else order,
                     around=msg.get("x"))
    reply = {"values": np.append(val, term.values(trial_steps(msg)))}
    if order >= 1:
        reply["grad"] = g
    if "v" in msg:                  # the recycled directions' products at w (R1)
        reply["hv"] = _products(term, w, msg["v"])
    if compact is not None:
        reply.update(compact)
    elif order >= 2:
        # every party sends the same fields (one layout: what a secure sum needs); a
        # party without a Hessian sends zeros and says so, and the server goes
        # quasi-Newton
        reply["hess"] = (pack_upper(H) if H is not None
                         else np.zeros(w.size * (w.size + 1) // 2))
        reply["no_hessian"] = int(H is None)
    return reply


@handles(M.NEWTON_EVAL)
def newton_eval(msg, state, ctx):
    """:func:`_evaluate` of the party's AL term; with ``kkt`` also its KKT share at
    (w, μ⁺, ν⁺), the multipliers step 3 would give at the first point w (what an
    ``al.update`` there would report, :func:`~.al.kkt_share`), so that the server can
    end the solve at a KKT point without that round; the party records those as its
    reported multipliers, its multipliers of the subproblem unchanged.  With
    ``next_beta`` (and ``kkt``) also the next subproblem's first evaluation at w, of the
    term with (μ⁺, ν⁺) and penalty ``next_beta``, as ``al.update`` and the start there
    would give it (``next_*``: :func:`_evaluate` at w alone, to the message's
    ``order``); the step is recorded, not taken, until the server's next message
    says whether the subproblem ended there (:func:`~.al.take_ahead`,
    :func:`~.al.settle`)."""
    term = al_term(state, ctx.party)
    reply = _evaluate(term, msg, ctx)
    if "next_beta" in msg and not msg.get("kkt"):
        raise ValueError("newton.eval: next_beta needs kkt")
    if msg.get("kkt"):
        w = msg["w"]
        # ahead, step 3 as al.update takes it (a term of its own: cᵢ(w) evaluated anew,
        # not taken from the pass above), so that what follows is its bits
        mu, nu = (al_term(state, ctx.party) if "next_beta" in msg else term).new_multipliers(w)
        share, reported = kkt_share(ctx.party, state, w, mu, nu, "ride")
        reply.update(share)
        state = dict(state, **reported)
        if "next_beta" in msg:
            first = _evaluate(AugmentedTerm(ctx.party, msg["next_beta"], mu, nu),
                              {k: msg[k] for k in ("w", "order", "v") if k in msg}, ctx)
            reply.update({NEXT + k: v for k, v in first.items()})
            state = take_ahead(state, w, mu, nu, msg["next_beta"], msg["subproblem"])
    return reply, state


@handles(M.NEWTON_HVP)
def newton_hvp(msg, state, ctx):
    """The party's Hessian (of its AL term, or with ``violation`` of its violation term)
    at w times v, or times each row of a block v (:func:`_products`)."""
    term = (_violation_term(ctx.party) if msg.get("violation")
            else al_term(state, ctx.party))
    return {"hv": _products(term, msg["w"], msg["v"])}, state


def _products(term, w, v):
    """∇²term(w) times v, or times each row of a block ``v`` (m·d floats, one vector a
    row), flat; by finite differences of the term's gradients where it has no Hessian."""
    if v.size == w.size:
        Hv = term.hessvec(w, v)
        return _difference(term, w, v) if Hv is None else Hv
    V = v.reshape(-1, w.size)
    HV = term.hessvecs(w, V)
    if HV is None:
        HV = np.array([_difference(term, w, u) for u in V])
    return HV.ravel()


def _difference(term, w, v):
    """∇²term(w)v by a finite difference of the term's gradients."""
    eps = 1e-7 * (1.0 + float(np.max(np.abs(w)))) / max(float(np.max(np.abs(v))), 1e-300)
    return (term(w + eps * v, 1)[1] - term(w, 1)[1]) / eps


@handles(M.NEWTON_BASIS)
def newton_basis(msg, state, ctx):
    """Columns ``start`` to ``start + count`` of the party's row basis B (B1), as rows
    (none without a basis or past its rank); a party of sparse rows sends its pattern
    (B4) instead, whole, at ``start`` 0."""
    basis = _basis(ctx)
    if isinstance(basis, SparseGram):
        return {"basis": np.zeros(0), "pattern": basis.pattern() if msg["start"] == 0
                else np.zeros(0)}, state
    B = np.zeros((0, 0)) if basis is None else basis[0]
    return {"basis": np.ascontiguousarray(B.T[msg["start"]:msg["start"] + msg["count"]])
            .ravel()}, state


def _violation_term(party):
    """‖[cᵢ]₊‖² + ‖hᵢ‖²: the AL term without objective, at zero multipliers, β = 2."""
    return AugmentedTerm(party, 2.0, np.zeros(party.n_ineq), np.zeros(party.n_eq),
                         objective=False)


@handles(M.FEAS_EVAL)
def feas_eval(msg, state, ctx):
    """The party's violation term ‖[cᵢ]₊‖² + ‖hᵢ‖² (its AL term without objective, at
    zero multipliers and β = 2); with ``report`` its largest violation (a
    :func:`~constrfl.maxima.sketch`), its number of constraint rows, and 1 if its
    functions are not all convex (the server sums each)."""
    party = ctx.party
    if msg.get("report"):
        c, h = party.c_value(msg["w"]), party.h_value(msg["w"])
        worst = max(float(np.max(c, initial=0.0)), float(np.max(np.abs(h), initial=0.0)))
        return {"violation_max": sketch(worst), "rows": party.n_ineq + party.n_eq,
                "nonconvex": int(not party.is_convex)}, state
    return _evaluate(_violation_term(party), msg, ctx), state
