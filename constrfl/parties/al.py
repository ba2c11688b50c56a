"""The proximal augmented Lagrangian (Algorithm 1), a party's side: its subproblem's
term, multiplier step and KKT share (``al.begin``, ``al.update``, ``kkt.report``), and a
multiplier step taken ahead on a Newton trial, then taken or undone (:func:`take_ahead`,
:func:`settle`; docs/algorithms.md §3)."""
from __future__ import annotations

import numpy as np

from ..messages import MessageType as M
from ..residuals import party_share
from ..records import Multipliers
from ..scaling import row_scaling
from ..augmented import AugmentedTerm
from .registry import handles

__all__ = ["term", "kkt_share", "reported_multipliers", "RECORDS", "al_begin", "al_update",
           "kkt_report", "take_ahead", "settle", "PENDING"]


def term(state, party):
    """The party's AL term ALᵢ of subproblem (9) at the state's β, μ, ν."""
    return AugmentedTerm(party, state["beta"], state["mu"], state["nu"])


#: the kinds of KKT shares a party records the multipliers of (:func:`kkt_share`):
#: an outer iteration's (``al.*``), one riding on a Newton evaluation, an observer's
#: report (``kkt.report``: the baselines, the unboundedness probe)
RECORDS = ("kkt", "ride", "report")


def kkt_share(party, state, w, mu, nu, record="kkt"):
    """The party's part of a KKT round at (w, μ, ν), in the user's units for a scaled
    party: its share of the residuals (:func:`~constrfl.residuals.party_share`, sums only) and
    ``multiplier_step_sq`` = ‖(μ, ν) − (μᵏ, νᵏ)‖₂² from its multipliers in ``state``;
    and the state's record of the multipliers it reported (``<record>_mu``,
    ``<record>_nu``, one of :data:`RECORDS`: what the site can tell its user, never
    sent)."""
    user = getattr(party, "user", None)
    old_mu, old_nu = state["mu"], state["nu"]
    if user is not None:
        old_mu, old_nu = user.user_units(w, old_mu, old_nu)[1:]
        (w, mu, nu), party = user.user_units(w, mu, nu), user.party
    step = np.concatenate([mu - old_mu, nu - old_nu])
    reply = dict(party_share(party, w, Multipliers(mu, nu)),
                 multiplier_step_sq=float(step @ step))
    return reply, {f"{record}_mu": mu, f"{record}_nu": nu}


def reported_multipliers(party, state, record="kkt", seq=None):
    """The multipliers of the party's last KKT share of the kind ``record`` — with
    ``seq``, of the last one sent with a message numbered ``seq`` or before (the
    transport keeps the one before the newest and their numbers:
    :func:`keep_records`) — or zeros: what a site reports to its own user (and
    ``cf.solve`` gathers in-process)."""
    for prefix in (record, f"{record}_before"):
        if f"{prefix}_mu" in state and (seq is None or state.get(f"{prefix}_seq", 0) <= seq):
            return Multipliers(state[f"{prefix}_mu"], state[f"{prefix}_nu"])
    return Multipliers(np.zeros(party.n_ineq), np.zeros(party.n_eq))


def keep_records(old, new, seq):
    """``new`` (a party's state after message ``seq``) with each KKT record it wrote
    numbered ``seq`` and the record it replaced kept as ``<record>_before``: a round
    that fails half-way leaves the answered parties' previous record at hand."""
    out = new
    for r in RECORDS:
        if new.get(f"{r}_mu") is not None and new.get(f"{r}_mu") is not old.get(f"{r}_mu"):
            out = dict(out, **{f"{r}_seq": seq})
            if f"{r}_mu" in old:
                out.update({f"{r}_before_{k}": old[f"{r}_{k}"] for k in ("mu", "nu")},
                           **{f"{r}_before_seq": old.get(f"{r}_seq", 0)})
    return out


#: a multiplier step taken ahead (:func:`take_ahead`): μ⁺, ν⁺ at the point, the next
#: penalty β, the point (the next centre) and the subproblem it would start
PENDING = ("pending_mu", "pending_nu", "pending_beta", "pending_wk", "pending_subproblem")


def take_ahead(state, w, mu, nu, beta, subproblem):
    """The state with the multiplier step of ``al.update`` at w (μ⁺, ν⁺; the next
    penalty β) recorded for subproblem ``subproblem`` + 1, not taken, and the KKT record
    ``kkt`` of its multipliers written as ``al.update`` would write it (the ``ride``
    record of the same share): ``newton.eval`` with ``next_beta`` evaluates the next
    subproblem ahead; :func:`settle` then takes the step or undoes it."""
    return dict(state, pending_mu=mu, pending_nu=nu, pending_beta=beta, pending_wk=w,
                pending_subproblem=subproblem + 1, kkt_mu=state["ride_mu"],
                kkt_nu=state["ride_nu"])


def settle(msg, state):
    """Before the handlers of a message of subproblem j (its ``subproblem``; ``al.update``
    ends j, ``al.begin`` starts it): a step taken ahead for j, by a party still in
    j − 1, becomes the party's (μ, ν, β and the centre as ``al.update`` there would have
    left them: the server ended j − 1 on that trial, and the message is j's); any other
    is undone, with the KKT record it wrote (the record before it is the party's again:
    the subproblem went on, or the server ended it with ``al.update``).  A party then
    still short of j refuses the message (it took no step ahead for j: its state was
    lost) rather than answer it at the old multipliers.  Without ``subproblem``: the
    state as it is.  (A state saved before the parties counted their subproblems counts
    as in j − 1.)"""
    j = msg.get("subproblem")
    if j is None:
        return state
    if "pending_subproblem" in state:
        out = {k: v for k, v in state.items() if k not in PENDING}
        if state["pending_subproblem"] == j and state.get("subproblem", j - 1) == j - 1:
            out.update(mu=state["pending_mu"], nu=state["pending_nu"],
                       beta=state["pending_beta"], wk=state["pending_wk"], subproblem=j)
        elif "kkt_before_mu" in state:
            out.update(kkt_mu=state["kkt_before_mu"], kkt_nu=state["kkt_before_nu"],
                       kkt_seq=state["kkt_before_seq"])
        else:
            for k in ("kkt_mu", "kkt_nu", "kkt_seq"):
                out.pop(k, None)
        state = out
    if state.get("subproblem", j) < j:
        raise ValueError(f"a message of subproblem {j} to a party in subproblem "
                         f"{state['subproblem']} that took no step ahead for it (its "
                         "state was lost?)")
    return state


@handles(M.AL_BEGIN)
def al_begin(msg, state, ctx):
    """Subproblem (9) at centre w; the first one may bring the scaling (D, c), or ask
    the party to scale its own far rows at w (``scale_rows``, the first time).  The
    reply is the party's KKT share at (w, μ, ν) (what the solve reports when it stops
    before its first outer iteration ends)."""
    state = dict(state, beta=msg["beta"], wk=msg["w"])
    if "subproblem" in msg:
        state["subproblem"] = msg["subproblem"]
    if "scale_columns" in msg:
        state.update(scale_columns=msg["scale_columns"],
                     scale_objective=msg["scale_objective"])
    elif "scale_rows" in msg and "scale_rows_ineq" not in state:
        state.update(row_scaling(ctx.party, msg["w"], msg["scale_rows"]))
    party = ctx.view(state).party
    reply, reported = kkt_share(party, state, msg["w"], state["mu"], state["nu"])
    reply.pop("multiplier_step_sq")
    return reply, dict(state, **reported)


@handles(M.AL_UPDATE)
def al_update(msg, state, ctx):
    """Step 3 of Algorithm 1 at w, then the KKT share at (w, μ⁺, ν⁺) with the step
    ‖(μ⁺, ν⁺) − (μ, ν)‖₂²; the next subproblem is centred at w with penalty ``beta``."""
    w = msg["w"]
    mu, nu = term(state, ctx.party).new_multipliers(w)
    reply, reported = kkt_share(ctx.party, state, w, mu, nu)
    state = dict(state, mu=mu, nu=nu, beta=msg["beta"], wk=w, **reported)
    if "subproblem" in msg:
        state["subproblem"] = msg["subproblem"] + 1
    return reply, state


@handles(M.KKT_REPORT)
def kkt_report(msg, state, ctx):
    """The baselines' KKT round: residuals at w with the penalty's multipliers
    μ = γ[cᵢ(w)]₊, ν = γhᵢ(w) (γ = ``penalty_weight``)."""
    party, w, gamma = ctx.party, msg["w"], msg["penalty_weight"]
    mu, nu = gamma * np.maximum(party.c_value(w), 0.0), gamma * party.h_value(w)
    reply, reported = kkt_share(party, state, w, mu, nu, "report")
    reply.pop("multiplier_step_sq")
    return reply, dict(state, **reported)
