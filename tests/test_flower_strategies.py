"""The server updates of FedAvg, FedAvgM, FedAdagrad, FedYogi and FedAdam
(``constrfl.solvers.baselines._Primal.update``) against Flower's strategies
(``flwr.serverapp.strategy``) on the same sequence of client deltas.

Flower's strategies receive the clients' models xᵢ = x + Δᵢ (equal ``num-examples``)
and average them; constrfl's server receives the mean delta.  Once the documented
convention differences are lined up (docs/flower.md, "Baselines and Flower's
strategies"), the two agree to rounding: relative difference ≤ 1e-14 after 25 rounds
(measured with flwr 1.41.0: 1.4e-16 to 6.2e-16; they are not bit-identical because
Flower averages models and constrfl averages deltas).  Each case also checks that the
conventions matter: without lining them up the two differ by far more than the
tolerance.
"""
import contextlib

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import (Array, ArrayRecord, ConfigRecord, Message, MetricRecord,  # noqa: E402
                      RecordDict)
from flwr.serverapp import strategy as fs  # noqa: E402

from constrfl.flower.grid import LocalGrid  # noqa: E402
from constrfl.prox import Zero  # noqa: E402
from constrfl.solvers.baselines import _Primal  # noqa: E402

@contextlib.contextmanager
def task_identity():
    """Flower's strategies make their messages with ``Message(...)``, which reads the task
    that Flower's runtime sets (``TaskIdentity``, a module of its runtime); run outside
    one, the test sets it (and restores it after)."""
    from flwr.supercore.task_identity import TaskIdentity
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


N_CLIENTS, DIM, ROUNDS, RTOL = 4, 5, 25, 1e-14
ETA, BETA, BETA1, BETA2, TAU = 0.05, 0.9, 0.9, 0.99, 1e-3


def deltas(seed=0):
    """The clients' deltas of every round (fixed: they do not depend on the model)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((N_CLIENTS, DIM)) * 0.5 ** (r / 5) for r in range(ROUNDS)]


def flower_run(strategy, x0, seq):
    """Flower's strategy, round by round: configure, the clients' models, aggregate."""
    grid = LocalGrid([({"site": str(i)}, lambda: None) for i in range(N_CLIENTS)])
    arrays, out = ArrayRecord({"x": Array(x0.copy())}), []
    with task_identity():
        for r, d in enumerate(seq, start=1):
            msgs = list(strategy.configure_train(r, arrays, ConfigRecord(), grid))
            x = arrays["x"].numpy()
            replies = [Message(RecordDict({"arrays": ArrayRecord({"x": Array(x + di)}),
                                           "metrics": MetricRecord({"num-examples": 1})}),
                               reply_to=m) for m, di in zip(msgs, d)]
            arrays, _ = strategy.aggregate_train(r, replies)
            out.append(arrays["x"].numpy())
    return np.array(out)


def constrfl_run(rule, x0, seq, lr, v0=None, lr_of_round=None, **params):
    """constrfl's server update on the mean deltas (P = 0: the prox is the identity)."""
    server = _Primal(Zero(), N_CLIENTS, rule, lr, **params)
    s = server.init(x0.copy())
    if v0 is not None:
        s["v"] = np.full_like(x0, v0)
    out = []
    for r, d in enumerate(seq, start=1):
        if lr_of_round is not None:
            server.lr = lr_of_round(r)
        s = server.update(s, {"delta": d.mean(axis=0)}, client_lr=0.1, steps=1, t=r)
        out.append(s["x"])
    return np.array(out)


def flower_adam_rate(r):
    """Flower's FedAdam step: η·√(1−β₂^(r+1))/(1−β₁^(r+1)) in round r (from 1)."""
    return ETA * np.sqrt(1 - BETA2 ** (r + 1.0)) / (1 - BETA1 ** (r + 1.0))


def common(**kw):
    return dict(min_train_nodes=N_CLIENTS, min_available_nodes=N_CLIENTS,
                fraction_evaluate=0.0, **kw)


CASES = {
    # name: (Flower strategy, constrfl run lined up, constrfl run with its own defaults)
    "fedavg": (lambda: fs.FedAvg(**common()),
               lambda x0, seq: constrfl_run("sgd", x0, seq, 1.0),
               None),                                   # no convention to line up
    "fedavgm": (lambda: fs.FedAvgM(**common(server_learning_rate=ETA, server_momentum=BETA)),
                lambda x0, seq: constrfl_run("momentum", x0, seq, ETA, momentum=BETA),
                None),                                  # sign only: m = −(Flower's v)
    "fedadagrad": (lambda: fs.FedAdagrad(**common(eta=ETA, tau=TAU)),
                   lambda x0, seq: constrfl_run("adagrad", x0, seq, ETA, v0=0.0, beta1=0.0,
                                                tau=TAU),
                   lambda x0, seq: constrfl_run("adagrad", x0, seq, ETA, beta1=BETA1,
                                                tau=TAU)),
    "fedyogi": (lambda: fs.FedYogi(**common(eta=ETA, beta_1=BETA1, beta_2=BETA2, tau=TAU)),
                lambda x0, seq: constrfl_run("yogi", x0, seq, ETA, v0=0.0, beta1=BETA1,
                                             beta2=BETA2, tau=TAU),
                lambda x0, seq: constrfl_run("yogi", x0, seq, ETA, beta1=BETA1,
                                             beta2=BETA2, tau=TAU)),
    "fedadam": (lambda: fs.FedAdam(**common(eta=ETA, beta_1=BETA1, beta_2=BETA2, tau=TAU)),
                lambda x0, seq: constrfl_run("adam", x0, seq, ETA, v0=0.0, beta1=BETA1,
                                             beta2=BETA2, tau=TAU,
                                             lr_of_round=flower_adam_rate),
                lambda x0, seq: constrfl_run("adam", x0, seq, ETA, beta1=BETA1,
                                             beta2=BETA2, tau=TAU)),
}


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("name", CASES)
def test_server_update_equals_flowers_strategy(name):
    make_strategy, lined_up, own_defaults = CASES[name]
    x0 = np.random.default_rng(1).standard_normal(DIM)
    seq = deltas()
    flower = flower_run(make_strategy(), x0, seq)
    ours = lined_up(x0, seq)
    assert flower.shape == ours.shape == (ROUNDS, DIM)
    assert rel(ours, flower) <= RTOL
    assert rel(flower[-1], x0) > 1e-3                      # the model did move
    if own_defaults is not None:                           # the conventions matter
        assert rel(own_defaults(x0, seq), flower) > 1e3 * RTOL
