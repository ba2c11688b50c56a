"""L1- or L2-ball constrained logistic regression of the composite-optimization seed
(``002``, Experiment 4; docs/algorithms.md §7): the ball is the regularizer P (its indicator)."""
from __future__ import annotations

import numpy as np

from .. import functions as fn
from .. import prox
from ..problem import Client, Problem
from ._args import client_name, groups, int_arg, labels01, real_arg, rows, warn_if_badly_scaled

__all__ = ["norm_ball_logistic"]

BALLS = {"l1": prox.L1Ball, "l2": prox.L2Ball}


def norm_ball_logistic(n_clients=4, n_samples_per_client=50, dim=10, ball="l1", radius=1.0,
                       seed=0, *, data=None):
    """``min_w (1/M) Σₘ Lₘ(w)  s.t.  ‖w‖ ≤ radius`` (‖·‖₁ or ‖·‖₂ by ``ball``).

    Lₘ is the mean logistic loss (31) of client m's rows; the constraint is
    P = ``prox.L1Ball(radius)`` or ``prox.L2Ball(radius)`` (projection by prox).

    Synthetic data (default): ``w_true ~ N(0, I_dim)``; each of the M = ``n_clients``
    clients draws N = ``n_samples_per_client`` rows x ~ N(0, I_dim) with labels
    y ~ Bernoulli(σ(xᵀw_true)).  ``w_true`` is the data-generating parameter, attached
    as ``problem.w_true`` as in every synthetic template; it usually lies outside the
    ball (that is what makes the constraint active), so it is not the solution.

    ``data=(X, y, client_ids)`` uses given rows instead (X a 2-D array or any
    ``scipy.sparse`` matrix, kept sparse; y in {0, 1}; e.g. from
    :func:`~constrfl.problems.datasets.make_classification` and a partitioner;
    ``client_ids[j]`` names the client of row j, clients in sorted order); then
    ``n_clients``, ``n_samples_per_client``, ``dim`` and ``seed`` are unused and
    ``problem.w_true`` is None.
    """
    caller = "norm_ball_logistic"
    if not isinstance(ball, str) or ball not in BALLS:
        raise ValueError(f"{caller}: ball must be one of {sorted(BALLS)}, got {ball!r}")
    radius = real_arg(caller, "radius", radius, positive=True)
    if data is None:
        M = int_arg(caller, "n_clients", n_clients)
        N = int_arg(caller, "n_samples_per_client", n_samples_per_client)
        d = int_arg(caller, "dim", dim)
        rng = np.random.default_rng(int_arg(caller, "seed", seed, 0))
        w_true = rng.standard_normal(d)
        X = rng.standard_normal((M * N, d))
        y = (rng.random(M * N) < 1.0 / (1.0 + np.exp(-X @ w_true))).astype(np.float64)
        ids = np.repeat(np.arange(M), N)
    else:
        try:
            X, y, ids = data
        except (TypeError, ValueError):
            raise ValueError(f"{caller}: data must be a triple (X, y, client_ids)") from None
        X, y, ids = rows(caller, X, prefix="data: ", y=y, client_ids=ids)
        warn_if_badly_scaled(caller, X)
        y = labels01(caller, "data: y", y, ids)
        w_true = None
    parts = groups(ids)
    clients = [Client(objective=(1.0 / len(parts)) * fn.LogisticLoss(X[r], y[r]),
                      name=client_name(i)) for i, r in parts]
    problem = Problem(clients, regularizer=BALLS[ball](radius))
    problem.w_true = w_true
    return problem
