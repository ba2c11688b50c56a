"""Federated Lasso: the synthetic sparse regression of the composite-optimization seed
(``002``, Yuan, Zaheer & Reddi 2021; docs/algorithms.md §7), as a problem (5) with P = L1."""
from __future__ import annotations

import numpy as np

from .. import functions as fn
from .. import prox
from ..problem import Client, Problem
from ._args import int_arg, real_arg

__all__ = ["federated_lasso"]


def mean_squared_error(X, y, n_clients):
    """Client m's share ``(1/M)·(1/N)Σⱼ (xⱼᵀw − yⱼ)²`` of the seed's objective, i.e.
    ``(2/M)·LeastSquares`` (``fn.LeastSquares`` carries a factor ½)."""
    return (2.0 / n_clients) * fn.LeastSquares(X, y)


def federated_lasso(n_clients=4, n_samples_per_client=32, dim=20, sparsity=5, noise=0.1,
                    lam=0.05, seed=0):
    """Synthetic federated Lasso (seed ``002``, Experiment 1):

        min_w  (1/M) Σₘ (1/N) Σ_{(x,y)∈Dₘ} (xᵀw − y)²  +  lam‖w‖₁

    — problem (5) with fₘ = ``(2/M)·fn.LeastSquares(Xₘ, yₘ)``, no constraints and
    P = ``prox.L1(lam)``.  Data: ``w_true`` has ``sparsity`` non-zero entries (a random
    support, standard normal values); each of the M = ``n_clients`` clients draws
    N = ``n_samples_per_client`` rows x ~ N(0, I_dim) and y = xᵀw_true + noise·N(0, 1).
    Unlike the seed there is no intercept b (``prox.L1`` would penalize it).
    The seed's full scale is (M, N, dim, sparsity) = (64, 128, 1024, 512).

    Returns the :class:`~constrfl.Problem`; the ground truth is attached as
    ``problem.w_true`` (shape ``(dim,)``), as in every synthetic template.
    """
    caller = "federated_lasso"
    M = int_arg(caller, "n_clients", n_clients)
    N = int_arg(caller, "n_samples_per_client", n_samples_per_client)
    d = int_arg(caller, "dim", dim)
    k = int_arg(caller, "sparsity", sparsity, 0, d)
    noise = real_arg(caller, "noise", noise)
    lam = real_arg(caller, "lam", lam)
    seed = int_arg(caller, "seed", seed, 0)
    rng = np.random.default_rng(seed)
    w_true = np.zeros(d)
    w_true[rng.choice(d, size=k, replace=False)] = rng.standard_normal(k)
    clients = []
    for m in range(M):
        X = rng.standard_normal((N, d))
        y = X @ w_true + noise * rng.standard_normal(N)
        clients.append(Client(objective=mean_squared_error(X, y, M), name=f"client-{m}"))
    problem = Problem(clients, regularizer=prox.L1(lam))
    problem.w_true = w_true
    return problem
