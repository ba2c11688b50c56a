"""Neyman-Pearson classification (30) over clients."""
from __future__ import annotations

import numpy as np

from .. import functions as fn
from ..problem import Client, Problem, Server

__all__ = ["neyman_pearson"]


def neyman_pearson(X, y, client_ids, max_class1_loss=0.2, *, local=True, server_data=None,
                   regularizer=None):
    """``min (1/n) Σᵢ L(w; Dᵢ⁰)  s.t.  L(w; Dᵢ¹) ≤ r`` — eq. (30).

    ``L`` is the mean logistic loss (31) with the class's own label (0 or 1), ``r`` is
    ``max_class1_loss``.  ``client_ids[j]`` names the client of row j (clients in sorted
    order).  ``local=False`` drops the per-client constraints; ``server_data=(X0, y0)``
    adds the global constraint ``L(w; D₀¹) ≤ r`` on the server's rows.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    ids = np.asarray(client_ids)
    if X.ndim != 2 or y.shape != (X.shape[0],) or ids.shape != y.shape:
        raise ValueError(f"neyman_pearson: X {X.shape}, y {y.shape} and client_ids "
                         f"{ids.shape} must have matching rows")
    if not np.isfinite(max_class1_loss) or max_class1_loss <= 0:
        raise ValueError(f"neyman_pearson: max_class1_loss must be positive, got "
                         f"{max_class1_loss!r}")
    labels = np.unique(ids)
    clients = []
    for i in labels:
        rows = ids == i
        X0, X1 = X[rows & (y == 0)], X[rows & (y == 1)]
        if len(X0) == 0 or (local and len(X1) == 0):
            raise ValueError(f"neyman_pearson: client {i!r} needs rows of class 0"
                             + (" and class 1" if local else ""))
        cons = [fn.LogisticLoss(X1, np.ones(len(X1))) - max_class1_loss] if local else []
        clients.append(Client(objective=(1.0 / len(labels)) * fn.LogisticLoss(X0, np.zeros(len(X0))),
                              constraints=cons, name=f"client-{i}"))
    server = None
    if server_data is not None:
        Xs, ys = (np.asarray(a) for a in server_data)
        Xs1 = np.asarray(Xs[ys == 1], dtype=np.float64)
        if len(Xs1) == 0:
            raise ValueError("neyman_pearson: server_data has no class-1 rows")
        server = Server(constraints=[fn.LogisticLoss(Xs1, np.ones(len(Xs1))) - max_class1_loss])
    return Problem(clients, server=server, regularizer=regularizer)
