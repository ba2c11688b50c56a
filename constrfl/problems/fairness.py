"""Fairness-constrained logistic regression (32): two-sided loss-disparity constraints,
local (per client) and global (on the server's data).  Nonconvex (docs/algorithms.md §1, §6)."""
from __future__ import annotations

import numpy as np

from .. import functions as fn
from ..problem import Client, Problem, Server
from ._args import client_name, groups, labels01, real_arg, rows, warn_if_badly_scaled

__all__ = ["fairness"]

CALLER = "fairness"


def _party_rows(X, y, s, ids=None, prefix=""):
    """Check one party's rows (``prefix`` names the argument group in errors): labels
    ``y`` and ``sensitive`` in {0, 1}, errors naming the client (or server_data)."""
    if ids is None:
        X, y, s = rows(CALLER, X, prefix=prefix, y=y, sensitive=s)
    else:
        X, y, s, ids = rows(CALLER, X, prefix=prefix, y=y, sensitive=s, client_ids=ids)
    where = "server_data" if prefix else "client"
    y = labels01(CALLER, f"{prefix}y", y, ids, where)
    s = labels01(CALLER, f"{prefix}sensitive", s, ids, where).astype(bool)
    return X, y, s, ids


def _subgroups(X, y, s):
    """The losses ``L(w; Dᵃ)``, ``L(w; Dᵇ)`` of the rows with s = 0 and s = 1, each
    evaluated once per point for all the functions it appears in."""
    return fn.Cached(fn.LogisticLoss(X[~s], y[~s])), fn.Cached(fn.LogisticLoss(X[s], y[s]))


def _disparity(La, Lb, delta):
    """``[La − Lb − δ, Lb − La − δ]`` (both ≤ 0); a difference of convex functions,
    hence marked nonconvex."""
    return [La - Lb - delta, Lb - La - delta]


def fairness(X, y, client_ids, max_disparity=0.1, *, sensitive_features, server_data=None,
             local=True, regularizer=None):
    """Eq. (32): ``min (1/n) Σᵢ Lᵢ(w)`` s.t. for i = 0..n
    ``L(w; Dᵢᵃ) − L(w; Dᵢᵇ) ≤ δ`` and ``L(w; Dᵢᵇ) − L(w; Dᵢᵃ) ≤ δ``.

    ``L`` is the mean logistic loss (31), ``Lᵢ`` that of all of client i's rows,
    ``δ = max_disparity``, ``a``/``b`` the rows with ``sensitive_features`` 0/1 (labels
    ``y`` and ``sensitive_features`` in {0, 1}, one entry per row; a keyword argument,
    the estimator's name).  ``X`` is a 2-D array or any ``scipy.sparse`` matrix (kept
    sparse).  The argument order is that of every template: ``(X, y, client_ids,
    <bound>, *, ...)``.  ``client_ids[j]`` names the client of row j (clients in sorted
    order, named by the label when it is a string, else ``client-<id>``).  Each client holds its pair of disparity
    constraints (``local=False`` drops them); **a client lacking rows of one subgroup
    gets no disparity constraints** (its disparity is undefined) but keeps its objective.
    ``server_data=(X0, y0, s0)`` puts the same pair on the server's rows (i = 0, the
    global constraints); there both subgroups are required.

    The constraints are differences of convex functions, so the problem is nonconvex:
    ``cf.solve`` runs (without the convex theory's guarantees) and ``cf.certify``
    raises ValueError, since no convex ground truth exists.
    """
    X, y, s, ids = _party_rows(X, y, sensitive_features, client_ids)
    warn_if_badly_scaled(CALLER, X)
    max_disparity = real_arg(CALLER, "max_disparity", max_disparity, positive=True)
    parts = groups(ids)
    if not parts:
        raise ValueError("fairness: X has no rows")
    clients = []
    for i, r in parts:
        if s[r].any() and not s[r].all():
            # Lᵢ = (Nₐ Lₐ + N_b L_b)/Nᵢ from the same two cached losses as the
            # constraints, so each evaluation passes over the rows once
            La, Lb = _subgroups(X[r], y[r], s[r])
            share = s[r].mean()
            objective = (1.0 - share) * La + share * Lb
            cons = _disparity(La, Lb, max_disparity) if local else []
        else:
            objective, cons = fn.LogisticLoss(X[r], y[r]), []
        clients.append(Client(objective=(1.0 / len(parts)) * objective,
                              constraints=cons, name=client_name(i)))
    server = None
    if server_data is not None:
        try:
            X0, y0, s0 = server_data
        except (TypeError, ValueError):
            raise ValueError("fairness: server_data must be a triple (X0, y0, s0)") from None
        X0, y0, s0, _ = _party_rows(X0, y0, s0, prefix="server_data: ")
        if s0.all() or not s0.any():
            raise ValueError("fairness: server_data needs rows of both subgroups "
                             "(sensitive 0 and 1)")
        server = Server(constraints=_disparity(*_subgroups(X0, y0, s0), max_disparity))
    return Problem(clients, server=server, regularizer=regularizer)
