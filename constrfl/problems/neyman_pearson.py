"""Neyman-Pearson classification (30) over clients."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import functions as fn
from ..kernels import CSR_MAX_DENSITY
from ..problem import Client, Problem, Server
from ._args import bulk, client_name, labels01, real_arg, rows, warn_if_badly_scaled

__all__ = ["neyman_pearson"]

CALLER = "neyman_pearson"


def neyman_pearson(X, y, client_ids, max_class1_loss=0.2, *, local=True, server_data=None,
                   regularizer=None):
    """``min (1/n) Σᵢ L(w; Dᵢ⁰)  s.t.  L(w; Dᵢ¹) ≤ r`` — eq. (30).

    ``L`` is the mean logistic loss (31) with the class's own label (0 or 1), ``r`` is
    ``max_class1_loss``.  ``X`` is a 2-D array or any ``scipy.sparse`` matrix (kept
    sparse); ``y`` holds labels in {0, 1} (anything else, NaN included, is an error
    naming the client: no row is dropped); ``client_ids[j]`` names the client of row j
    (clients in sorted order).  ``local=False`` drops the per-client constraints;
    ``server_data=(X0, y0)`` adds the global constraint ``L(w; D₀¹) ≤ r`` on the
    server's rows.

    **A client lacking one class** (a small client, or a cross-validation fold) is
    legitimate: without class-1 rows it has no constraint (a bound on an empty set),
    without class-0 rows no objective term, and ``n`` is the number of clients holding
    class-0 rows (the objective is the mean of their class-0 losses); a client left with
    neither (no class-0 rows and ``local=False``) is not in the problem.  Some client
    needs class-0 rows.
    """
    X, y, ids = rows(CALLER, X, y=y, client_ids=client_ids)
    warn_if_badly_scaled(CALLER, X)
    r = real_arg(CALLER, "max_class1_loss", max_class1_loss, positive=True)
    y = labels01(CALLER, "y", y, ids)
    n = np.unique(ids[y == 0]).size                     # the clients with an objective term
    if n == 0:
        raise ValueError(f"{CALLER}: no client holds rows of class 0 (y == 0): the "
                         "objective would be empty")
    # the rows sorted by client, then class (stably: each client's rows of a class in
    # their order), once; each client's two blocks are then slices of that copy
    order = np.lexsort((y, ids))
    sorted_ids = ids[order]
    Xs, ys = X[order], y[order]
    cuts = np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1
    as_csr = not sp.issparse(X) and np.count_nonzero(X) <= CSR_MAX_DENSITY * X.size
    clients = []
    with bulk():
        for i, lo, hi in zip(sorted_ids[np.r_[0, cuts]], np.r_[0, cuts], np.r_[cuts, len(y)]):
            mid = lo + int(np.searchsorted(ys[lo:hi], 1.0))
            objective = (fn.Sum([fn.LogisticLoss.of_checked_rows(Xs[lo:mid], ys[lo:mid],
                                                                 as_csr)],
                                [1.0 / n]) if mid > lo else None)
            cons = ([fn.Sum([fn.LogisticLoss.of_checked_rows(Xs[mid:hi], ys[mid:hi], as_csr)],
                            [1.0], -r)] if local and hi > mid else [])
            if objective is not None or cons:
                clients.append(Client(objective=objective, constraints=cons,
                                      name=client_name(i)))
    server = None
    if server_data is not None:
        try:
            Xs, ys = server_data
        except (TypeError, ValueError):
            raise ValueError(f"{CALLER}: server_data must be a pair (X0, y0)") from None
        Xs, ys = rows(CALLER, Xs, prefix="server_data: ", y=ys)
        ys = labels01(CALLER, "server_data: y", ys, where="server_data")
        Xs1 = Xs[ys == 1]
        if Xs1.shape[0] == 0:
            raise ValueError(f"{CALLER}: server_data has no class-1 rows")
        server = Server(constraints=[fn.LogisticLoss(Xs1, np.ones(Xs1.shape[0])) - r])
    return Problem(clients, server=server, regularizer=regularizer)
