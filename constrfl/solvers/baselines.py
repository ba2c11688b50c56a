"""The federated optimizers of the other seeds (ALGORITHMS.md §7) under ``cf.solve``.

Methods: FedAvg, FedAvgM and the adaptive FedAdagrad, FedYogi, FedAdam (seed ``003``,
Reddi et al., ICLR 2021); FedCAda (seed ``001``, Zhou et al. 2024); FedMid, FedDualAvg and
their only-server-proximal variants FedMid-OSP, FedDualAvg-OSP (seed ``002``, Yuan, Zaheer
& Reddi, ICML 2021).  They return the same :class:`~constrfl.result.SolveResult` as the
proximal AL methods.

**One round** (§7), shared by every method (:func:`_run`):

1. the server samples ``round(C·n)`` clients S (at least one) uniformly without
   replacement, with its own generator;
2. it broadcasts its state: the point the clients start from (the model; FedDualAvg's
   dual state z), plus FedCAda's moments m, v and FedDualAvg's prox weight offset;
3. each client i ∈ S runs K local steps of its family's update (:func:`_sgd_client`,
   :func:`_dual_client`, :func:`_adam_client`) with its own generator and uploads
   Δᵢ = (local end point) − (start point); FedCAda also uploads its mᵢ, vᵢ;
4. the server averages the uploads, Δ = mean_{i∈S} Δᵢ (uniformly: F is a plain sum), adds
   its own share (below) and applies its family's update (:class:`_PrimalServer`,
   :class:`_DualServer`, :class:`_CAdaServer`).

**Scaling.** Problem (5) is F = f₀ + Σᵢ fᵢ + P; the seeds write min (1/n) Σᵢ Fᵢ + ψ.  Here
client i works on Fᵢ = n·fᵢ and ψ = P, so the average of the clients' gradients is
∇(Σᵢ fᵢ) and the learning rates refer to F itself (for the federated Lasso template,
n·fᵢ is client i's mean squared error: exactly the seed's Fᵢ).

**The server's own functions** (f₀, c₀, h₀) are evaluated by the server, at the round's
model wᵣ, and enter the average as K client steps linearized there:
Δ ← Δ − η_c·K·∇F₀(wᵣ) (no communication).  FedCAda, whose clients step in their Adam
metric, has no such counterpart and rejects problems with server functions.

**Constraints** are not handled natively.  With ``penalty="quadratic"`` every owner adds
the quadratic penalty of its own constraints, with weight γ = ``penalty_weight``:

    Fᵢ = n·(fᵢ + γ/2 (‖[cᵢ]₊‖² + ‖hᵢ‖²))  (clients),    F₀ = f₀ + γ/2 (‖[c₀]₊‖² + ‖h₀‖²)

so the methods minimize F + γ/2 (‖[c]₊‖² + ‖h‖²), whose stationary points satisfy the
KKT stationarity of (5) with μ = γ[c(w)]₊, ν = γh(w), but violate active constraints by
about μ*/γ.  Minibatches sample fᵢ only; the penalty terms use the client's full data (a
minibatch estimate of [cᵢ]₊ would be biased).  Constraints without a penalty: ValueError.

**Composite P.**  FedMid and FedDualAvg use ``P.prox`` as in seed 002 (clients and server;
the OSP variants on the server only).  As specified there, FedMid shrinks by P twice a
round, in the clients' Δ and in the server prox (one client, K = 1, η_s = 1, P = λ‖·‖₁: the
round is soft thresholding by 2η_cλ), so its fixed point is biased: the seed's "curse of
primal averaging", visible in ``validation/results/baselines.md``.  FedAvg, FedAvgM, the adaptive FedOpt methods and
FedCAda apply P by a server prox step after their update, x ← prox_{tP}(x⁺), with t the
step length per unit of gradient that the server's update applies at a fixed point (so a
fixed point is stationary for F + P when Δ ≈ −η_c K ∇F):

    FedAvg: η_s η_c K  (FedAvg is then FedMid-OSP)     FedAvgM: η_s η_c K/(1 − β)
    FedAdagrad/Yogi/Adam: η η_c K/(√v + τ)             FedCAda: η_s η_c K/(√v̂ + ϵ)

The last two are per-coordinate (a diagonal metric), where the prox is coordinate-wise only
for a separable P (Zero, L1, SquaredL2, ElasticNet, Box, NonNegative); other regularizers
raise ValueError for these methods.

**Traffic** (8 bytes a float): per round and sampled client, the broadcast (d floats; FedCAda
3d; FedDualAvg d + 1, z and the prox offset) and the upload (d floats; FedCAda 3d).

**Status.**  The seeds run a fixed number of rounds; so do these.  ``status`` is
``"optimal"`` only when the KKT residuals of the *original* problem at the returned model,
with μ = γ[c]₊ and ν = γh (zeros without a penalty), meet ``tol``; otherwise
``"max_iterations"`` with a message naming the failing residual; ``"numerical_error"`` when
the model turns non-finite (the last finite one is returned).

**History**: one dict per round (``round``, ``clients``, ``client_lr``, ``objective`` of (5),
``stationarity``, ``feasibility``, ``complementarity``, ``definition1``, ``rounds``,
``bytes_up``, ``bytes_down``), measured by an observer of the simulation: not part of the
protocol, not counted in the traffic, never used to steer the method.
"""
from __future__ import annotations

import numbers
import time
from functools import partial

import numpy as np

from ..kkt import kkt as compute_kkt
from ..result import Multipliers, SolveResult
from .admm import Traffic

__all__ = ["solve_baseline", "CORRECTIONS"]

ADAPTIVE = ("fedadagrad", "fedyogi", "fedadam")
SERVER_RULES = {"fedavg": "sgd", "fedavgm": "momentum", "fedadagrad": "adagrad",
                "fedyogi": "yogi", "fedadam": "adam", "fedmid": "sgd", "fedmid-osp": "sgd"}

#: FedCAda's bias corrections (seed 001, options 1–4; "vanilla" is Adam's), of b = βᵗ.
CORRECTIONS = {
    "vanilla": lambda b: 1.0 - b,
    "linear": lambda b: 1.0 + b,
    "square": lambda b: 1.0 + b * b,
    "sin": lambda b: 1.0 + np.sin(b),
    "sqrt": lambda b: 1.0 + np.sqrt(b),
}

# Options that belong to some methods only: default and the methods they apply to.
SPECIFIC = {
    "momentum": (0.9, ("fedavgm",)),
    "beta1": (0.9, ADAPTIVE + ("fedcada",)),
    "beta2": (0.99, ("fedyogi", "fedadam", "fedcada")),
    "tau": (1e-3, ADAPTIVE),
    "eps": (1e-8, ("fedcada",)),
    "correction": ("linear", ("fedcada",)),
}



def solve_baseline(problem, method, tol, *, w0=None, seed=0, verbose=False, callback=None,
                   rounds=100, local_steps=None, epochs=None, batch_size=None,
                   client_fraction=1.0, client_lr=0.01, client_lr_decay=1.0, server_lr=None,
                   penalty=None, penalty_weight=None, momentum=None, beta1=None, beta2=None,
                   tau=None, eps=None, correction=None):
    """Run a federated baseline (see the module docstring for the round and conventions).

    Parameters (defaults in brackets)
    ---------------------------------
    problem, tol, w0, seed, verbose, callback : as for :func:`constrfl.solve`; ``tol`` only
        decides ``status``; ``seed`` drives the server's client sampling and, through
        ``SeedSequence(seed).spawn``, one generator per client for its minibatches;
        ``callback(record)`` gets each round's history record plus ``w``.
    rounds : communication rounds R [100].
    local_steps : K local steps per round [10]; or ``epochs`` E with ``batch_size`` B:
        K = E·⌈N̄/B⌉, N̄ the mean number of rows of the clients' objectives (one K for all
        clients, as FedMid's and FedDualAvg's server steps assume).
    batch_size : B rows per local gradient, drawn without replacement by the client from
        its own data [None: full local gradient].
    client_fraction : C ∈ (0, 1], share of clients sampled per round [1].
    client_lr, client_lr_decay : η_c [0.01] and δ ∈ (0, 1] [1]: round r uses η_c·δʳ
        (the exponential decay of Reddi et al.).
    server_lr : η_s, or η of the adaptive methods [1; 0.01 for FedAdagrad/Yogi/Adam].
    penalty, penalty_weight : ``None`` [default; constraints raise ValueError] or
        ``"quadratic"`` with weight γ [100].
    momentum : FedAvgM's β [0.9]:  m ← βm + Δ,  x ← x + η_s m  (m₀ = 0).
    beta1, beta2, tau : FedOpt's β₁ [0.9], β₂ [0.99], τ [1e-3] (003, Algorithm 2):
        m ← β₁m + (1−β₁)Δ;  v ← v + Δ² (Adagrad), v − (1−β₂)Δ² sign(v − Δ²) (Yogi),
        β₂v + (1−β₂)Δ² (Adam);  x ← x + η m/(√v + τ);  m₀ = 0, v₀ = τ².
    beta1, beta2, eps, correction : FedCAda's client Adam (001, Algorithm 2) [0.9, 0.99,
        1e-8, ``"linear"``]; see :func:`_adam_client`.

    ``outer_iterations`` counts the rounds run, ``inner_iterations`` the local steps of
    all sampled clients together.

    Measured on the strongly convex federated least squares of ``tests/test_baselines.py``
    (5 clients, d = 6, 40 rows each, full participation and batches, K = 5, the rates
    given there): the relative objective gap to cvxpy's optimum falls to ≤ 1e-4 after
    9 rounds (FedAvg, FedMid, FedDualAvg and the OSP variants), 17 (FedCAda), 36
    (FedAvgM), 75 (FedAdagrad, FedAdam) and 78 (FedYogi); the test allows 20–120.
    """
    start = time.perf_counter()
    cfg = _settings(problem, method, rounds=rounds, local_steps=local_steps, epochs=epochs,
                    batch_size=batch_size, client_fraction=client_fraction,
                    client_lr=client_lr, client_lr_decay=client_lr_decay,
                    server_lr=server_lr, penalty=penalty, penalty_weight=penalty_weight,
                    momentum=momentum, beta1=beta1, beta2=beta2, tau=tau, eps=eps,
                    correction=correction)
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable")
    w0 = problem.start_point(w0, seed)
    client_update, server = _family(method, problem.regularizer, w0, cfg)
    streams = np.random.SeedSequence(seed).spawn(problem.n_clients + 1)
    shares = [_Share(c, problem.n_clients, cfg["penalty_weight"], cfg["batch_size"],
                     np.random.default_rng(s)) for c, s in zip(problem.clients, streams[1:])]
    own = (None if problem.server.is_empty
           else _Share(problem.server, 1.0, cfg["penalty_weight"], None, None))
    report = _Report(verbose, method, problem, cfg["rounds"])
    w, status, message, history, traffic, steps = _run(
        problem, server, client_update, shares, own, cfg, np.random.default_rng(streams[0]),
        report, callback)
    mults = _penalty_multipliers(problem, w, cfg["penalty_weight"])
    final = compute_kkt(problem, w, mults)
    note = (" (multipliers estimated as penalty_weight·[c]₊, penalty_weight·h)"
            if cfg["penalty_weight"] else "")
    if status == "max_iterations" and final.meets(*tol):
        status = "optimal"
        message = (f"KKT residuals of the original problem meet tol after {len(history)} "
                   f"rounds{note}")
    elif status == "max_iterations":
        message = (f"ran rounds={cfg['rounds']} (the method has no stopping rule); KKT "
                   "residuals of the original problem miss tol: "
                   f"{'; '.join(final.failures(*tol))}{note}")
    res = SolveResult(w=w, status=status, message=message, objective=problem.objective(w),
                      multipliers=mults, kkt=final, method=method,
                      outer_iterations=len(history), inner_iterations=steps,
                      rounds=traffic.rounds, bytes_up=traffic.bytes_up,
                      bytes_down=traffic.bytes_down, time=time.perf_counter() - start,
                      history=history)
    report.close(res)
    return res


# -- options ----------------------------------------------------------------------------

def _settings(problem, method, **given):
    """Validate the options; fill the method's defaults.  Returns a dict with ``K``."""
    for name, (default, methods) in SPECIFIC.items():
        if given[name] is None:
            given[name] = default if method in methods else None
        elif method not in methods:
            raise ValueError(f"option {name!r} does not apply to method {method!r} "
                             f"(it is for {', '.join(methods)})")
    cfg = dict(given)
    cfg["rounds"] = _integer("rounds", given["rounds"])
    cfg["client_fraction"] = _real("client_fraction", given["client_fraction"], 0, 1,
                                   closed_low=False)
    cfg["client_lr"] = _real("client_lr", given["client_lr"], 0, np.inf, closed_low=False)
    cfg["client_lr_decay"] = _real("client_lr_decay", given["client_lr_decay"], 0, 1,
                                   closed_low=False)
    lr = given["server_lr"]
    cfg["server_lr"] = _real("server_lr", (0.01 if method in ADAPTIVE else 1.0)
                             if lr is None else lr, 0, np.inf, closed_low=False)
    if given["batch_size"] is not None:
        cfg["batch_size"] = _integer("batch_size", given["batch_size"])
    cfg["K"] = _local_steps(problem, given["local_steps"], given["epochs"], cfg["batch_size"])
    cfg["penalty_weight"] = _penalty(problem, given["penalty"], given["penalty_weight"])
    for name in ("momentum", "beta1", "beta2"):
        if cfg[name] is not None:
            cfg[name] = _real(name, cfg[name], 0, 1, closed_high=False)
    for name in ("tau", "eps"):
        if cfg[name] is not None:
            cfg[name] = _real(name, cfg[name], 0, np.inf, closed_low=False)
    if cfg["correction"] is not None and cfg["correction"] not in CORRECTIONS:
        raise ValueError(f"correction must be one of {sorted(CORRECTIONS)}, "
                         f"got {cfg['correction']!r}")
    if method == "fedcada" and not problem.server.is_empty:
        raise ValueError("fedcada: the problem has server functions (f₀, c₀ or h₀); FedCAda "
                         "steps in its clients' Adam metric and has no server-side share")
    vector_gain = method in ADAPTIVE + ("fedcada",)
    if vector_gain and not problem.regularizer.separable:
        raise ValueError(f"{method}: its server prox step is per coordinate (an adaptive "
                         f"metric), which needs a separable regularizer; got "
                         f"{problem.regularizer!r}: use fedmid or feddualavg")
    return cfg


def _integer(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _real(name, value, low, high, closed_low=True, closed_high=True):
    """``value`` as a float in the interval, else ValueError naming ``name``."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    if ok:
        ok = (value >= low if closed_low else value > low) and \
             (value <= high if closed_high else value < high)
    if not ok:
        right = "]" if closed_high and np.isfinite(high) else ")"
        interval = f"{'[' if closed_low else '('}{low}, {high}{right}"
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}")
    return float(value)


def _local_steps(problem, local_steps, epochs, batch_size):
    """K from ``local_steps`` [10], or from ``epochs`` and ``batch_size``."""
    if epochs is None:
        return 10 if local_steps is None else _integer("local_steps", local_steps)
    if local_steps is not None:
        raise ValueError("give either local_steps or epochs, not both")
    epochs = _integer("epochs", epochs)
    if batch_size is None:
        raise ValueError("epochs needs batch_size (rows per local step)")
    rows = [0 if c.objective is None else c.objective.n_samples for c in problem.clients]
    if min(rows) == 0:
        raise ValueError("epochs: every client's objective must hold data rows; "
                         "use local_steps instead")
    return epochs * int(np.ceil(np.mean(rows) / batch_size))


def _penalty(problem, penalty, weight):
    """γ of the quadratic penalty (0 without one); constraints need a penalty."""
    if penalty is None:
        if weight is not None:
            raise ValueError("penalty_weight needs penalty='quadratic'")
        constrained = [p._where() for p in problem.parties if p.n_ineq or p.n_eq]
        if constrained:
            raise ValueError("the federated baselines cannot handle constraints natively "
                             f"(held by {', '.join(constrained)}); pass "
                             "penalty='quadratic' (and penalty_weight) to run them on the "
                             "quadratic penalty reformulation, or use method='fedproxal'")
        return 0.0
    if penalty != "quadratic":
        raise ValueError(f"penalty must be None or 'quadratic', got {penalty!r}")
    return _real("penalty_weight", 100.0 if weight is None else weight, 0, np.inf,
                 closed_low=False)


# -- the owners' gradients ----------------------------------------------------------------

class _Share:
    """An owner's share of the penalized objective, ``scale·(f + γ/2(‖[c]₊‖² + ‖h‖²))``;
    its gradient is evaluated by the owner itself, on its own (mini)batches."""

    def __init__(self, party, scale, weight, batch_size, rng):
        self.party, self.scale, self.weight = party, scale, weight
        self.batch_size, self.rng = batch_size, rng

    def grad(self, w):
        p = self.party
        g = p.f_minibatch_grad(w, self.rng, self.batch_size)
        if self.weight and p.n_ineq:
            c, J = p.c_value_jac(w)
            g = g + self.weight * (J.T @ np.maximum(c, 0.0))
        if self.weight and p.n_eq:
            g = g + self.weight * (p.h_jac(w).T @ p.h_value(w))
        return self.scale * g


def _penalty_multipliers(problem, w, weight):
    """μ = γ[c(w)]₊, ν = γh(w) per owner (zeros for γ = 0): the multipliers for which a
    stationary point of the penalized objective is KKT-stationary for (5)."""
    return {p.name: Multipliers(weight * np.maximum(p.c_value(w), 0.0), weight * p.h_value(w))
            for p in problem.parties}


# -- client updates: K local steps from the broadcast, return the upload --------------------

def _sgd_client(share, down, steps, lr, t, P=None):
    """FedAvg / FedOpt client (003, Alg. 1–2; 002, Alg. 1): K steps x ← x − η_c gₖ; with
    ``P``, FedMid's client (002, Alg. 2): x ← prox_{η_c P}(x − η_c gₖ).  The OSP variants
    and FedDualAvg-OSP (on the dual state z, with w = z) use it without ``P``.
    Uploads Δᵢ = x_K − x₀."""
    x = x0 = down["x"]
    for _ in range(steps):
        x = x - lr * share.grad(x)
        if P is not None:
            x = P.prox(x, lr)
    return {"delta": x - x0}


def _dual_client(share, down, steps, lr, t, P):
    """FedDualAvg client (002, Alg. 3): from the server's dual state z and prox weight
    offset A, for k = 0..K−1:  w = prox_{(A + η_c k)P}(z),  z ← z − η_c ∇Fᵢ(w).
    (A = η_s η_c r K for constant rates, so A + η_c k is the seed's η̃_{r,k}.)
    Uploads Δᵢ = z_K − z₀."""
    z = z0 = down["x"]
    for k in range(steps):
        z = z - lr * share.grad(P.prox(z, down["offset"] + lr * k))
    return {"delta": z - z0}


def _adam_client(share, down, steps, lr, t, beta1, beta2, eps, correct):
    """FedCAda client (001, Alg. 2): from the server's (x, m, v), for K steps

        m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²,  m̂ = m/c(β₁ᵗ),  v̂ = v/c(β₂ᵗ),
        x ← x − η_c m̂/(√v̂ + ϵ),

    t the round (1, 2, ...), c the correction: 1 − b (vanilla Adam), 1 + b (linear, the
    paper's), 1 + b², 1 + sin b, 1 + √b.  Uploads Δᵢ = x_K − x₀ and its m, v."""
    x = x0 = down["x"]
    m, v = down["m"], down["v"]
    c1, c2 = correct(beta1 ** t), correct(beta2 ** t)
    for _ in range(steps):
        g = share.grad(x)
        m = beta1 * m + (1.0 - beta1) * g
        v = beta2 * v + (1.0 - beta2) * g * g
        x = x - lr * (m / c1) / (np.sqrt(v / c2) + eps)
    return {"delta": x - x0, "m": m, "v": v}


# -- server updates -------------------------------------------------------------------------

class _PrimalServer:
    """Server of FedAvg, FedAvgM, FedAdagrad/Yogi/Adam (003) and FedMid(-OSP) (002):
    x ← prox_{tP}(x + step(Δ)), with ``rule`` (β = ``momentum``; see :func:`solve_baseline`)

        sgd:      step = η_s Δ                      gain η_s
        momentum: m ← βm + Δ, step = η_s m          gain η_s/(1 − β)
        adagrad, yogi, adam: m, v as in 003; step = η m/(√v + τ)     gain η/(√v + τ)

    and t = gain·η_c·K (FedMid's server prox_{η_s η_c K ψ} for ``sgd``)."""

    def __init__(self, w0, P, rule, lr, momentum=None, beta1=None, beta2=None, tau=None):
        self.x, self.P, self.rule, self.lr = w0, P, rule, lr
        self.momentum, self.beta1, self.beta2, self.tau = momentum, beta1, beta2, tau
        self.m = np.zeros_like(w0)
        self.v = np.full_like(w0, tau ** 2 if tau is not None else 0.0)

    @property
    def model(self):
        return self.x

    def broadcast(self):
        return {"x": self.x}

    def update(self, avg, client_lr, steps, t):
        step, gain = self._step(avg["delta"])
        self.x = self.P.prox(self.x + step, gain * client_lr * steps)

    def _step(self, d):
        if self.rule == "sgd":
            return self.lr * d, self.lr
        if self.rule == "momentum":
            self.m = self.momentum * self.m + d
            return self.lr * self.m, self.lr / (1.0 - self.momentum)
        self.m = self.beta1 * self.m + (1.0 - self.beta1) * d
        if self.rule == "adagrad":
            self.v = self.v + d * d
        elif self.rule == "yogi":
            self.v = self.v - (1.0 - self.beta2) * d * d * np.sign(self.v - d * d)
        else:
            self.v = self.beta2 * self.v + (1.0 - self.beta2) * d * d
        gain = self.lr / (np.sqrt(self.v) + self.tau)
        return gain * self.m, gain


class _DualServer:
    """FedDualAvg(-OSP) server (002, Alg. 3): z ← z + η_s Δ, A ← A + η_s η_c K, model
    w = prox_{A P}(z) (A₀ = 0, z₀ = w₀).  Broadcasts z, and A when the clients prox."""

    def __init__(self, w0, P, lr, send_offset):
        self.z = self.w = w0
        self.P, self.lr, self.send_offset = P, lr, send_offset
        self.offset = 0.0

    @property
    def model(self):
        return self.w

    def broadcast(self):
        return {"x": self.z, "offset": self.offset} if self.send_offset else {"x": self.z}

    def update(self, avg, client_lr, steps, t):
        self.z = self.z + self.lr * avg["delta"]
        self.offset += self.lr * client_lr * steps
        self.w = self.P.prox(self.z, self.offset)


class _CAdaServer:
    """FedCAda server (001, Alg. 2): x ← prox_{tP}(x + η_s Δ), m ← mean mᵢ, v ← mean vᵢ
    (m₀ = v₀ = 0), with t = η_s η_c K/(√v̂ + ϵ), v̂ = v/c(β₂ᵗ) the clients' metric."""

    def __init__(self, w0, P, lr, beta2, eps, correct):
        self.x, self.P, self.lr = w0, P, lr
        self.beta2, self.eps, self.correct = beta2, eps, correct
        self.m, self.v = np.zeros_like(w0), np.zeros_like(w0)

    @property
    def model(self):
        return self.x

    def broadcast(self):
        return {"x": self.x, "m": self.m, "v": self.v}

    def update(self, avg, client_lr, steps, t):
        self.m, self.v = avg["m"], avg["v"]
        gain = self.lr / (np.sqrt(self.v / self.correct(self.beta2 ** t)) + self.eps)
        self.x = self.P.prox(self.x + self.lr * avg["delta"], gain * client_lr * steps)


def _family(method, P, w0, cfg):
    """The client update and the server of ``method``."""
    lr = cfg["server_lr"]
    if method in SERVER_RULES:
        client = partial(_sgd_client, P=P if method == "fedmid" else None)
        return client, _PrimalServer(w0, P, SERVER_RULES[method], lr, cfg["momentum"],
                                     cfg["beta1"], cfg["beta2"], cfg["tau"])
    if method == "feddualavg":
        return partial(_dual_client, P=P), _DualServer(w0, P, lr, send_offset=True)
    if method == "feddualavg-osp":
        return _sgd_client, _DualServer(w0, P, lr, send_offset=False)
    if method == "fedcada":
        correct = CORRECTIONS[cfg["correction"]]
        client = partial(_adam_client, beta1=cfg["beta1"], beta2=cfg["beta2"],
                         eps=cfg["eps"], correct=correct)
        return client, _CAdaServer(w0, P, lr, cfg["beta2"], cfg["eps"], correct)
    raise ValueError(f"unknown baseline method {method!r}")


# -- the round skeleton ---------------------------------------------------------------------

def _run(problem, server, client_update, shares, own, cfg, sampler, report, callback):
    """R rounds of §7 (see the module docstring).  Returns ``(w, status, message, history,
    traffic, local_steps)``; ``status`` is ``"max_iterations"`` or ``"numerical_error"``."""
    n, K = len(shares), cfg["K"]
    m = max(1, int(round(cfg["client_fraction"] * n)))
    traffic, history, steps = Traffic(), [], 0
    w = server.model
    for r in range(cfg["rounds"]):
        lr = cfg["client_lr"] * cfg["client_lr_decay"] ** r
        sampled = np.sort(sampler.choice(n, size=m, replace=False))
        down = server.broadcast()
        with np.errstate(all="ignore"):
            ups = [client_update(shares[i], down, K, lr, r + 1) for i in sampled]
            traffic.exchange(m, _floats(down), _floats(ups[0]))
            steps += m * K
            avg = {key: np.mean([u[key] for u in ups], axis=0) for key in ups[0]}
            if own is not None:
                avg["delta"] = avg["delta"] - lr * K * own.grad(server.model)
            server.update(avg, lr, K, r + 1)
        if not np.all(np.isfinite(server.model)):
            return (w, "numerical_error", f"non-finite model in round {r + 1}; returning "
                    "the last finite one", history, traffic, steps)
        w = server.model
        rec = _observe(problem, w, cfg["penalty_weight"])
        rec.update(round=r + 1, clients=m, client_lr=lr, rounds=traffic.rounds,
                   bytes_up=traffic.bytes_up, bytes_down=traffic.bytes_down)
        history.append(rec)
        report(rec)
        if callback is not None:
            callback(dict(rec, w=w.copy()))
    return w, "max_iterations", "", history, traffic, steps


def _floats(message):
    return int(sum(np.size(v) for v in message.values()))


def _observe(problem, w, weight):
    """The observer's record at the model: objective of (5) and KKT residuals of §2."""
    k = compute_kkt(problem, w, _penalty_multipliers(problem, w, weight))
    return dict(objective=problem.objective(w), stationarity=k.stationarity,
                feasibility=k.feasibility, complementarity=k.complementarity,
                definition1=k.definition1)


class _Report:
    """``verbose=True``: a header, about 20 evenly spaced rounds and the status."""

    def __init__(self, verbose, method, problem, rounds):
        self.on, self.every = verbose, max(1, rounds // 20)
        self.last = rounds
        if self.on:
            print(f"constrfl {method}: {problem.n_clients} clients, dim {problem.dim}, "
                  f"regularizer {problem.regularizer!r}")
            print("{:>6} {:>8} {:>10} {:>12} {:>11} {:>15}".format(
                "round", "clients", "client_lr", "stationarity", "feasibility", "objective"))

    def __call__(self, r):
        if self.on and (r["round"] % self.every == 0 or r["round"] in (1, self.last)):
            print(f"{r['round']:6d} {r['clients']:8d} {r['client_lr']:10.3e} "
                  f"{r['stationarity']:12.3e} {r['feasibility']:11.3e} {r['objective']:15.8e}")

    def close(self, res):
        if self.on:
            print(f"status: {res.status} ({res.message}); time {res.time:.3f}s")
