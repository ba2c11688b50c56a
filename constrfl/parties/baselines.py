"""The federated baselines' clients (docs/algorithms.md §7): their K local steps
(``sgd.train``: FedAvg / FedOpt / FedMid, ``dual.train``: FedDualAvg, ``adam.train``:
FedCAda).  The gradient and FedCAda's corrections, shared with the server:
:mod:`constrfl.corrections`."""
from __future__ import annotations

import zlib

import numpy as np

from ..corrections import CORRECTION_NAMES, CORRECTIONS, penalized_grad
from ..messages import MessageType as M
from .registry import handles

__all__ = ["sgd_train", "dual_train", "adam_train"]


def _local_grad(msg, ctx):
    """The client's gradient oracle for this round: ∇ of fᵢ + penalty (the seeds' Fᵢ);
    its minibatches (``batch_size`` rows, 0: all) come from a generator seeded by
    (``seed``, its name, ``round``), so no generator state is kept."""
    batch = msg["batch_size"] or None
    rng = None if batch is None else np.random.default_rng(
        [msg["seed"], zlib.crc32(ctx.party.name.encode()), msg["round"]])
    return lambda w: penalized_grad(ctx.party, w, 1.0, msg["penalty_weight"], rng, batch)


@handles(M.SGD_TRAIN)
def sgd_train(msg, state, ctx):
    """FedAvg / FedOpt client (003, Alg. 1–2; 002, Alg. 1): K steps x ← x − η_c gₖ;
    with ``prox`` FedMid's client (002, Alg. 2): x ← prox_{η_c ψ}(x − η_c gₖ), ψ = P/n.  The OSP
    variants and FedDualAvg-OSP (on the dual state z) run it without ``prox``."""
    grad, lr = _local_grad(msg, ctx), msg["lr"]
    x = x0 = msg["x"]
    for _ in range(msg["steps"]):
        x = x - lr * grad(x)
        if msg["prox"]:
            x = ctx.regularizer.prox(x, lr / msg["n_clients"])
    return {"delta": x - x0}, state


@handles(M.DUAL_TRAIN)
def dual_train(msg, state, ctx):
    """FedDualAvg client (002, Alg. 3): from the dual state z and prox weight offset A,
    for k = 0..K−1:  w = prox_{(A + η_c k)ψ}(z),  z ← z − η_c ∇Fᵢ(w),  ψ = P/n."""
    grad, lr, P = _local_grad(msg, ctx), msg["lr"], ctx.regularizer
    z = z0 = msg["x"]
    for k in range(msg["steps"]):
        z = z - lr * grad(P.prox(z, (msg["offset"] + lr * k) / msg["n_clients"]))
    return {"delta": z - z0}, state


@handles(M.ADAM_TRAIN)
def adam_train(msg, state, ctx):
    """FedCAda client (001, Alg. 2): from the server's (x, m, v), K steps of
    m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², x ← x − η_c (m/c(β₁ᵗ))/(√(v/c(β₂ᵗ)) + ϵ),
    t the round, c the correction (:data:`~constrfl.corrections.CORRECTIONS`)."""
    grad, lr, t = _local_grad(msg, ctx), msg["lr"], msg["round"]
    b1, b2, eps = msg["beta1"], msg["beta2"], msg["eps"]
    correct = CORRECTIONS[CORRECTION_NAMES[int(msg["correction"])]]
    c1, c2 = correct(b1 ** t), correct(b2 ** t)
    x = x0 = msg["x"]
    m, v = msg["m"], msg["v"]
    for _ in range(msg["steps"]):
        g = grad(x)
        m = b1 * m + (1.0 - b1) * g
        v = b2 * v + (1.0 - b2) * g * g
        x = x - lr * (m / c1) / (np.sqrt(v / c2) + eps)
    return {"delta": x - x0, "m": m, "v": v}, state
