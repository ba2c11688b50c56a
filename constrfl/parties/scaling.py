"""The scaling (docs/algorithms.md §8a, :mod:`constrfl.scaling`), a party's side: its
statistics at w⁰ (``scale.stats``).  The scaled functions the handlers see once the
state holds a scaling: :meth:`~.context.PartyContext.view`."""
from __future__ import annotations

from ..messages import MessageType as M
from ..scaling import column_stats
from .registry import handles

__all__ = ["scale_stats"]


@handles(M.SCALE_STATS)
def scale_stats(msg, state, ctx):
    """The scaling's statistics at w⁰; the party keeps its row scales (§8a)."""
    reply, e_ineq, e_eq = column_stats(ctx.party, msg["w"])
    return reply, dict(state, scale_rows_ineq=e_ineq, scale_rows_eq=e_eq)
