"""Linear-equality-constrained QP (86), the random instances of Appendix E.2."""
from __future__ import annotations

import numpy as np

from .. import functions as fn
from ..problem import Client, Problem

__all__ = ["lcqp"]


def lcqp(n_clients=5, dim=50, rows_per_client=2, seed=0):
    """``min Σᵢ ½wᵀAᵢw + bᵢᵀw  s.t.  Cᵢw + dᵢ = 0``: Aᵢ = UᵢDᵢUᵢᵀ with Dᵢ diagonal
    uniform on [0, 1] and Uᵢ Haar-orthogonal, bᵢ and Cᵢ standard Gaussian, dᵢ uniform
    on the unit sphere.

    ``problem.w_true`` is the solution, in closed form: with ``A = Σᵢ Aᵢ`` (positive
    definite almost surely), ``b = Σᵢ bᵢ`` and C, d stacked, the KKT system
    ``[A Cᵀ; C 0][w; ν] = [−b; −d]`` is solved by a dense linear solve (nonsingular
    when C has full row rank, which holds almost surely for m < d Gaussian rows).
    """
    if n_clients < 1 or dim < 1 or rows_per_client < 0:
        raise ValueError("lcqp: need n_clients >= 1, dim >= 1, rows_per_client >= 0")
    if n_clients * rows_per_client >= dim:
        raise ValueError(f"lcqp: {n_clients * rows_per_client} equality rows would not "
                         f"leave a feasible set with freedom in dimension {dim}")
    from scipy.stats import ortho_group   # here: importing scipy.stats costs ~1 s
    rng = np.random.default_rng(seed)
    clients, A_sum, b_sum, Cs, ds = [], np.zeros((dim, dim)), np.zeros(dim), [], []
    for i in range(n_clients):
        U = ortho_group.rvs(dim, random_state=rng) if dim > 1 else np.ones((1, 1))
        A = (U * rng.uniform(0.0, 1.0, dim)) @ U.T
        b = rng.standard_normal(dim)
        eqs = []
        if rows_per_client:
            C = rng.standard_normal((rows_per_client, dim))
            d = rng.standard_normal(rows_per_client)
            eqs = [fn.Affine(C, d / np.linalg.norm(d))]
            Cs.append(eqs[0].C)
            ds.append(eqs[0].d)
        objective = fn.Quadratic(A, b)
        A_sum += objective.A
        b_sum += objective.b
        clients.append(Client(objective=objective, equalities=eqs, name=f"client-{i}"))
    problem = Problem(clients)
    m = n_clients * rows_per_client
    C = np.vstack(Cs) if Cs else np.zeros((0, dim))
    K = np.block([[A_sum, C.T], [C, np.zeros((m, m))]])
    rhs = -np.concatenate([b_sum, np.concatenate(ds) if ds else np.zeros(0)])
    problem.w_true = np.linalg.solve(K, rhs)[:dim]
    return problem
