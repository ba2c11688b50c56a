"""What a party holds while it serves a solve (:class:`PartyContext`) and its state's lifecycle
(:func:`init_state`, :func:`restore_state`).

The state is what a resume needs — plain data, saved with results and in the Flower
sites' state files.  The :class:`PartyContext` holds the rest: the party's functions and
what the handlers derive from them once and reuse for the solve (the scaled functions,
an exact ADMM block's eigendecomposition, the row basis of (B1)).  It is never
serialized: a resumed party derives them again, bit for bit.
"""
from __future__ import annotations

import numpy as np

from ..scaling import scaled_party, scaled_regularizer

__all__ = ["PartyContext", "init_state", "restore_state"]

#: the state's scaling (:mod:`constrfl.scaling`): the key of the scaled context
SCALING = ("scale_columns", "scale_objective", "scale_rows_ineq", "scale_rows_eq")

#: fields of states saved by earlier versions that the handlers no longer keep there
#: (an exact block's eigendecomposition, now on the :class:`PartyContext`)
RETIRED = ("eigen_at", "eigen_vectors", "eigen_values")


class PartyContext:
    """What a party holds: its functions (``party``, hence its data), the problem's
    public regularizer P (``regularizer``, used only by the composite baselines'
    clients), and what its handlers derive from them (:meth:`memo`).  Lives as long as
    the party's runtime; never serialized."""

    __slots__ = ("party", "regularizer", "_memo")

    def __init__(self, party, regularizer=None):
        self.party = party
        self.regularizer = regularizer
        self._memo = {}          # slot -> (key, value)

    def __repr__(self):
        return f"PartyContext({self.party!r}, {self.regularizer!r})"

    def memo(self, slot, key, compute):
        """``compute()``, kept in ``slot`` for ``key``: one value a slot, computed again
        when the key changes."""
        hit = self._memo.get(slot)
        if hit is None or hit[0] != key:
            hit = self._memo[slot] = key, compute()
        return hit[1]

    def view(self, state):
        """The context as the handlers see it under ``state``: itself, or once the state
        holds a scaling (:mod:`constrfl.scaling`) a context of the scaled functions (built
        once per scaling)."""
        if "scale_columns" not in state:
            return self
        return self.memo("scaled", tuple(np.asarray(state[k]).tobytes() for k in SCALING),
                         lambda: self._scaled(*(state[k] for k in SCALING)))

    def _scaled(self, D, c, e_ineq, e_eq):
        P = None if self.regularizer is None else scaled_regularizer(self.regularizer, D, c)
        return PartyContext(scaled_party(self.party, D, c, e_ineq, e_eq), P)


def init_state(party):
    """A party's first state: zero multipliers."""
    return {"mu": np.zeros(party.n_ineq), "nu": np.zeros(party.n_eq)}


def restore_state(state):
    """A saved state as the handlers take it: without the :data:`RETIRED` fields."""
    return {k: v for k, v in state.items() if k not in RETIRED}
