"""Nuclear-norm regularized low-rank matrix estimation (matrix sensing) of the
composite-optimization seed (``002``, Experiment 2; docs/algorithms.md §1, §7)."""
from __future__ import annotations

import numpy as np

from .. import prox
from ..problem import Client, Problem
from ._args import int_arg, real_arg
from .lasso import mean_squared_error

__all__ = ["low_rank_matrix"]


def low_rank_matrix(n_clients=4, n_samples_per_client=40, shape=(5, 4), rank=2, noise=0.1,
                    lam=0.1, seed=0):
    """Synthetic federated matrix sensing with a nuclear-norm regularizer:

        min_W  (1/M) Σₘ (1/N) Σ_{(X,y)∈Dₘ} (⟨X, W⟩ − y)²  +  lam‖W‖_*,   W ∈ R^{p×q}

    — problem (5) in ``w = W.ravel()`` (row-major, d = p·q) with
    fₘ = ``(2/M)·fn.LeastSquares`` on the flattened sensing matrices and
    P = ``prox.Nuclear(lam, shape)``.  Data: ``W_true = A Bᵀ/√rank`` with A (p×rank),
    B (q×rank) standard normal; each client draws N = ``n_samples_per_client`` sensing
    matrices X with i.i.d. N(0, 1) entries and y = ⟨X, W_true⟩ + noise·N(0, 1).  Unlike
    the seed there is no intercept b.  The seed's scale: M = 64, N = 128, 32×32, rank 16.

    Returns the Problem with ``problem.w_true = W_true.ravel()`` (reshape with
    ``problem.regularizer.shape``).
    """
    caller = "low_rank_matrix"
    M = int_arg(caller, "n_clients", n_clients)
    N = int_arg(caller, "n_samples_per_client", n_samples_per_client)
    try:
        p, q = shape
        p, q = int_arg(caller, "shape[0]", p), int_arg(caller, "shape[1]", q)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{caller}: shape must be a pair of positive integers (p, q), "
                         f"got {shape!r}") from err
    r = int_arg(caller, "rank", rank, 0, min(p, q))
    noise = real_arg(caller, "noise", noise)
    lam = real_arg(caller, "lam", lam)
    seed = int_arg(caller, "seed", seed, 0)
    rng = np.random.default_rng(seed)
    W_true = rng.standard_normal((p, r)) @ rng.standard_normal((r, q)) / np.sqrt(max(r, 1))
    w_true = W_true.ravel()
    clients = []
    for m in range(M):
        X = rng.standard_normal((N, p * q))         # row j: the sensing matrix X_j, flattened
        y = X @ w_true + noise * rng.standard_normal(N)
        clients.append(Client(objective=mean_squared_error(X, y, M), name=f"client-{m}"))
    problem = Problem(clients, regularizer=prox.Nuclear(lam, (p, q)))
    problem.w_true = w_true
    return problem
