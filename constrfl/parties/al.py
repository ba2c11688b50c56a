"""The proximal augmented Lagrangian (Algorithm 1), a party's side: its subproblem's
term, multiplier step and KKT share (``al.begin``, ``al.update``, ``kkt.report``)."""
from __future__ import annotations

import numpy as np

from ..messages import MessageType as M
from ..kkt import party_share
from ..records import Multipliers
from ..scaling import row_scaling
from ..solvers.augmented import AugmentedTerm
from .registry import handles

__all__ = ["term", "kkt_share", "al_begin", "al_update", "kkt_report"]


def term(state, party):
    """The party's AL term ALᵢ of subproblem (9) at the state's β, μ, ν."""
    return AugmentedTerm(party, state["beta"], state["mu"], state["nu"])


def kkt_share(party, w, mu, nu):
    """The party's part of the KKT round: its multipliers, Lagrangian-gradient share,
    residuals and objective value at w — in the user's units for a scaled party."""
    user = getattr(party, "user", None)
    if user is not None:
        (w, mu, nu), party = user.user_units(w, mu, nu), user.party
    return {"mu": mu, "nu": nu, **party_share(party, w, Multipliers(mu, nu))}


@handles(M.AL_BEGIN)
def al_begin(msg, state, ctx):
    """Subproblem (9) at centre w; the first one may bring the scaling (D, c), or ask
    the party to scale its own far rows at w (``scale_rows``, the first time).  The
    reply is the party's KKT share at (w, μ, ν) (what the solve reports when it stops
    before its first outer iteration ends)."""
    state = dict(state, beta=msg["beta"], wk=msg["w"])
    if "scale_columns" in msg:
        state.update(scale_columns=msg["scale_columns"],
                     scale_objective=msg["scale_objective"])
    elif "scale_rows" in msg and "scale_rows_ineq" not in state:
        state.update(row_scaling(ctx.party, msg["w"], msg["scale_rows"]))
    party = ctx.view(state).party
    return kkt_share(party, msg["w"], state["mu"], state["nu"]), state


@handles(M.AL_UPDATE)
def al_update(msg, state, ctx):
    """Step 3 of Algorithm 1 at w, then the KKT share at (w, μ⁺, ν⁺); the next
    subproblem is centred at w with penalty ``beta``."""
    w = msg["w"]
    mu, nu = term(state, ctx.party).new_multipliers(w)
    return kkt_share(ctx.party, w, mu, nu), dict(state, mu=mu, nu=nu, beta=msg["beta"],
                                                  wk=w)


@handles(M.KKT_REPORT)
def kkt_report(msg, state, ctx):
    """The baselines' KKT round: residuals at w with the penalty's multipliers
    μ = γ[cᵢ(w)]₊, ν = γhᵢ(w) (γ = ``penalty_weight``)."""
    party, w, gamma = ctx.party, msg["w"], msg["penalty_weight"]
    mu, nu = gamma * np.maximum(party.c_value(w), 0.0), gamma * party.h_value(w)
    return kkt_share(party, w, mu, nu), state
