"""The federated baselines' client math that the server uses too: the gradient of a
party's penalized loss (:func:`penalized_grad`; the server's own share, and every
client's local steps) and FedCAda's bias corrections (:data:`CORRECTIONS`; the
settings check a name, the ``adam.train`` client applies it, the server's record
names it).

A leaf of the package (NumPy only), imported by both sides: the server's
:mod:`constrfl.solvers.baselines` and :mod:`constrfl.settings`, and the clients'
:mod:`constrfl.parties.baselines`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["CORRECTIONS", "CORRECTION_NAMES", "penalized_grad"]

#: FedCAda's bias corrections (seed 001, options 1–4; "vanilla" is Adam's), of b = βᵗ.
CORRECTIONS = {
    "vanilla": lambda b: 1.0 - b,
    "linear": lambda b: 1.0 + b,
    "square": lambda b: 1.0 + b * b,
    "sin": lambda b: 1.0 + np.sin(b),
    "sqrt": lambda b: 1.0 + np.sqrt(b),
}
CORRECTION_NAMES = tuple(CORRECTIONS)      # a message carries the index


def penalized_grad(party, w, scale, weight, rng=None, batch_size=None):
    """∇ of ``scale·(f + γ/2(‖[c]₊‖² + ‖h‖²))`` at w, f on a minibatch of the party's own
    rows (drawn by ``rng``) or all of them; the penalty on all rows (a minibatch estimate
    of [c]₊ would be biased)."""
    g = party.f_minibatch_grad(w, rng, batch_size)
    if weight and party.n_ineq:
        c, J = party.c_value_jac(w)
        g = g + weight * (J.T @ np.maximum(c, 0.0))
    if weight and party.n_eq:
        g = g + weight * (party.h_jac(w).T @ party.h_value(w))
    return scale * g
