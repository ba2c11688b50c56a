"""The federated optimizers of the other seeds (docs/algorithms.md §7) under ``cf.solve``.

Methods: FedAvg, FedAvgM and the adaptive FedAdagrad, FedYogi, FedAdam (seed ``003``,
Reddi et al., ICLR 2021); FedCAda (seed ``001``, Zhou et al. 2024); FedMid, FedDualAvg and
their only-server-proximal variants FedMid-OSP, FedDualAvg-OSP (seed ``002``, Yuan, Zaheer
& Reddi, ICML 2021).  They return the same :class:`~constrfl.result.SolveResult` as the
proximal AL methods.

**One round** (§7), shared by every method (:func:`_run`):

1. the server samples ``round(C·n)`` clients S (at least one) uniformly without
   replacement;
2. it broadcasts its state: the point the clients start from (the model; FedDualAvg's
   dual state z), plus FedCAda's moments m, v and FedDualAvg's prox weight offset;
3. each client i ∈ S runs K local steps of its family's update (the handlers
   ``sgd.train``, ``dual.train``, ``adam.train``) and uploads Δᵢ = (local end point) −
   (start point); FedCAda also uploads its mᵢ, vᵢ;
4. the server averages the uploads from their sum, Δ = Σ_{i∈S} Δᵢ/|S| (uniformly: F is a
   plain sum; it never sees a single Δᵢ), adds
   its own share (below) and applies its family's update (:class:`_Primal`,
   :class:`_Dual`, :class:`_CAda`; their state is explicit data, :class:`BaselineState`).

**Scaling.** Problem (5) is F = f₀ + Σᵢ fᵢ + P; the seeds write min (1/n) Σᵢ Fᵢ + ψ.  Here
Fᵢ = fᵢ (plus its penalty, below) and ψ = P/n: the seeds' objective is F/n, so the client
rate is per unit of the mean client objective.  A client's steps then see only its own
fᵢ's curvature, whatever n (with Fᵢ = n·fᵢ the quadratic penalty's curvature grew like n:
FedAvg with the penalty diverged on 1000 clients at the default rate), and the server's
and clients' prox steps use P/n.  (For the federated Lasso template, n·fᵢ is client i's
mean squared error, the seed's Fᵢ; its rates here are per unit of fᵢ.)

**The server's own functions** (f₀, c₀, h₀) are evaluated by the server, at the round's
model wᵣ, and enter the average as K client steps linearized there:
Δ ← Δ − η_c·K·∇F₀(wᵣ)/n (no communication).  FedCAda, whose clients step in their Adam
metric, has no such counterpart and rejects problems with server functions.

**Constraints** are not handled natively.  With ``penalty="quadratic"`` every party adds
the quadratic penalty of its own constraints, with weight γ = ``penalty_weight``:

    Fᵢ = fᵢ + γ/2 (‖[cᵢ]₊‖² + ‖hᵢ‖²)  (clients),    F₀ = f₀ + γ/2 (‖[c₀]₊‖² + ‖h₀‖²)

so the methods minimize F + γ/2 (‖[c]₊‖² + ‖h‖²), whose stationary points satisfy the
KKT stationarity of (5) with μ = γ[c(w)]₊, ν = γh(w), but violate active constraints by
about μ*/γ.  Minibatches sample fᵢ only; the penalty terms use the client's full data (a
minibatch estimate of [cᵢ]₊ would be biased).  Constraints without a penalty: ValueError.

**Composite P.**  FedMid and FedDualAvg use the prox of ψ = P/n as in seed 002 (clients
and server; the OSP variants on the server only).  Two biases follow, both measured on
the federated least squares with P = 0.05‖·‖₁ of ``tests/test_baselines.py`` (8 clients,
d = 10, the defaults, 3000 rounds).  FedMid shrinks by ψ twice a round, in the clients' Δ
and in the server prox (one client, K = 1, η_s = 1, P = λ‖·‖₁: the round is soft
thresholding by 2η_cλ/n), so its fixed point is that of roughly twice the regularizer:
relative gap 4e-3 there, where FedMid-OSP reaches 7e-5.  FedDualAvg-OSP's clients step at
the dual state z instead of the primal point prox(z) (seed 002 calls the OSP variants
"less principled"), and its fixed point can be far off: relative gap 99 there.
Neither is what seed 002 calls the "curse of primal averaging": the loss of sparsity when
sparse client models are averaged (an average of sparse vectors is dense), which
FedDualAvg avoids by averaging dual states and applying the prox to the average.
FedAvg, FedAvgM, the adaptive FedOpt methods and
FedCAda apply P by a server prox step after their update, x ← prox_{tP}(x⁺), with t the
step length per unit of gradient that the server's update applies at a fixed point (so a
fixed point is stationary for F + P when Δ ≈ −η_c K ∇F):

    FedAvg: η_s η_c K  (FedAvg is then FedMid-OSP)     FedAvgM: η_s η_c K/(1 − β)
    FedAdagrad/Yogi/Adam: η η_c K/(√v + τ)             FedCAda: η_s η_c K/(√v̂ + ϵ)

The last two are per-coordinate (a diagonal metric), where the prox is coordinate-wise only
for a separable P (Zero, L1, SquaredL2, ElasticNet, Box, NonNegative); other regularizers
raise ValueError for these methods.

**Messages** (:mod:`constrfl.parties.baselines`: ``sgd.train``, ``dual.train``,
``adam.train``): per round and sampled client, the broadcast — the model (d floats;
FedCAda x, m, v: 3d; FedDualAvg z) and 8 scalars: the client rate, K, the round, n, γ,
the batch size, the seed and the client-prox flag (FedDualAvg: the prox offset instead;
FedCAda: none, but β₁, β₂, ϵ and the correction) — and the upload (d floats; FedCAda
3d), all counted (8 bytes a float).  Client sampling and minibatches are drawn
from generators seeded by (seed, round) and (seed, client, round): no generator state.

**Status.**  The seeds run a fixed number of rounds; so do these.  ``status`` is
``"optimal"`` only when the KKT residuals of the *original* problem at the returned model,
with μ = γ[c]₊ and ν = γh (zeros without a penalty), meet ``tol``; otherwise
``"max_iterations"`` with a message naming the failing residual; ``"numerical_error"`` when
the iteration diverged: the server's model turned non-finite, or ‖w‖∞ passed
max(1, ‖w⁰‖∞)/ε (ε = 2⁻⁵²), where its rounding error alone exceeds the scale of the
start (:func:`_divergence`; the last model within range is returned).  A round is kept
once observed; a stop in the middle of one leaves it pending in the state, and the
resumed run sends its cut-off message again (:func:`_run`): bit for bit the
uninterrupted run.

**History**: one dict per round (``round``, ``clients``, ``client_lr``, ``objective`` of (5),
``stationarity``, ``feasibility``, ``complementarity``, ``definition1``, ``rounds``,
``bytes_up``, ``bytes_down``).  The objective and residuals come from an observer's
``kkt.report`` message to every party after the round: not part of the method, not
counted in the traffic, never used to steer it (``observe=False`` skips it but for the
final model).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import status as st
from ..errors import PartyError, SolveStop
from ..execution import bookkeeping, run
from ..corrections import CORRECTION_NAMES, CORRECTIONS, penalized_grad
from ..messages import SECURE_MIN_CLIENTS, MessageType as M
from ..residuals import measured_at
from ..progress import IterationTable, status_text
from ..records import KKT, saved_as
from ..result import SolveResult
from ..settings import ADAPTIVE

__all__ = ["execute_baseline", "BaselineState"]

SERVER_RULES = {"fedavg": "sgd", "fedavgm": "momentum", "fedadagrad": "adagrad",
                "fedyogi": "yogi", "fedadam": "adam", "fedmid": "sgd", "fedmid-osp": "sgd"}


@saved_as("baseline-state")
@dataclass
class BaselineState:
    """The server's state of a baseline run (plain data; resumable)."""

    round: int                 # rounds completed
    server: dict               # the server optimizer's state (model, moments, ...)
    history: list = field(default_factory=list)
    local_steps: int = 0       # over all sampled clients
    pending: dict | None = None  # the round in progress (:func:`_run`)
    scale: float = 1.0         # max(1, ‖w⁰‖∞), the scale of :func:`_divergence`
    reported_seq: int = 0      # the message of the observer's report of the model


def execute_baseline(problem, method, tol, settings, fed, *, w0, seed, resume, verbose,
                     progress, callback, start):
    """Run a baseline with ``settings`` (a :class:`~constrfl.settings.BaselineSettings`)
    over the federation ``fed`` (any backend) and return its result.  ``problem``,
    ``tol`` (a pair), ``w0``, ``seed``, ``resume``, ``verbose``, ``progress`` and
    ``callback`` (already checked: :func:`constrfl.control.checked_callback`) are those of
    :func:`constrfl.solve`; ``seed`` seeds the server's client sampling (with the round)
    and the clients' minibatches (with the client's name and the round); ``start`` is when
    the solve began (``fed.control`` holds its deadline).  ``outer_iterations`` counts the
    rounds run, ``inner_iterations`` the local steps of all sampled clients together."""
    cfg = _configure(problem, method, settings)
    if settings.secure and _sampled(cfg, problem.n_clients) < SECURE_MIN_CLIENTS:
        raise ValueError(f"secure=True needs at least {SECURE_MIN_CLIENTS} clients a round; "
                         f"client_fraction={cfg['client_fraction']} samples "
                         f"{_sampled(cfg, problem.n_clients)} of {problem.n_clients}")
    family = _family(method, problem.regularizer, problem.n_clients, cfg)
    report = _Report(verbose, method, problem, cfg["rounds"])

    def fresh():
        w = problem.start_point(w0, seed)
        return BaselineState(round=0, server=family.init(w), scale=max(1.0, _size(w)))

    def loop(s):
        return _run(problem, family, s, cfg, seed, fed, report, callback)

    def describe(s):
        return status_text(start, fed.traffic.rounds, s.round,
                           s.history[-1] if s.history else None, unit="round")
    s, outcome = run(fed, resume, fresh, loop, describe, progress, start)
    w = family.model(s.server)
    last, stop = _final_record(problem, fed, s, w, cfg["penalty_weight"])
    if stop is not None and outcome.status == st.MAX_ITERATIONS:
        outcome.status, outcome.message, outcome.error = stop.status, str(stop), stop
    kkt = KKT.of(last, problem.regularizer.exact_dist)
    note = (" (multipliers estimated as penalty_weight·[c]₊, penalty_weight·h)"
            if cfg["penalty_weight"] else "")
    if outcome.status == st.MAX_ITERATIONS and kkt.meets(*tol):
        outcome.status = st.OPTIMAL
        outcome.message = (f"KKT residuals of the original problem meet tol after "
                           f"{s.round} rounds{note}")
    elif outcome.status == st.MAX_ITERATIONS:
        outcome.message = (f"ran rounds={cfg['rounds']} (the method has no stopping rule); "
                           f"KKT residuals of the original problem miss tol: "
                           f"{'; '.join(kkt.failures(*tol))}{note}")
    mults = dict(problem.zero_multipliers(), **fed.multipliers("report", s.reported_seq))
    res = SolveResult(w=w, objective=last["objective"], multipliers=mults, kkt=kkt, outer_iterations=s.round, inner_iterations=s.local_steps,
                      history=s.history,
                      **bookkeeping(problem, method, settings, tol, fed, s, outcome))
    report.close(res)
    return res


# -- the options against the problem ----------------------------------------------------------

def _configure(problem, method, settings):
    """The options as ``method`` runs them on ``problem`` (a dict; K the local steps,
    ``penalty_weight`` γ, 0 without a penalty); what the method needs of the problem
    is checked here."""
    cfg = settings.resolved(method)
    cfg["K"] = _local_steps(problem, cfg)
    cfg["penalty_weight"] = _penalty_weight(problem, cfg)
    if method == "fedcada" and not problem.server.is_empty:
        raise ValueError("fedcada: the problem has server functions (f₀, c₀ or h₀); FedCAda "
                         "steps in its clients' Adam metric and has no server-side share")
    vector_gain = method in ADAPTIVE + ("fedcada",)
    if vector_gain and not problem.regularizer.separable:
        raise ValueError(f"{method}: its server prox step is per coordinate (an adaptive "
                         f"metric), which needs a separable regularizer; got "
                         f"{problem.regularizer!r}: use fedmid or feddualavg")
    return cfg


def _local_steps(problem, cfg):
    """K: ``local_steps``, or ``epochs`` over the clients' mean number of rows."""
    if cfg["epochs"] is None:
        return cfg["local_steps"]
    rows = problem.client_rows()
    if rows is None:
        raise ValueError("epochs needs the clients' row counts, which this server does "
                         "not know; use local_steps instead")
    if min(rows) == 0:
        raise ValueError("epochs: every client's objective must hold data rows; "
                         "use local_steps instead")
    return cfg["epochs"] * int(np.ceil(np.mean(rows) / cfg["batch_size"]))


def _penalty_weight(problem, cfg):
    """γ of the quadratic penalty (0 without one); constraints need a penalty."""
    if cfg["penalty"] is None:
        constrained = problem.constrained_parties() or []
        if constrained:
            raise ValueError("the federated baselines cannot handle constraints natively "
                             f"(held by {', '.join(map(repr, constrained))}); pass "
                             "penalty='quadratic' (and penalty_weight) to run them on the "
                             "quadratic penalty reformulation, or use method='fedproxal'")
        return 0.0
    return cfg["penalty_weight"]


# -- the server updates: configuration on the object, state explicit ------------------------

class _Primal:
    """Server of FedAvg, FedAvgM, FedAdagrad/Yogi/Adam (003) and FedMid(-OSP) (002):
    x ← prox_{tP}(x + step(Δ)), with ``rule`` (β = ``momentum``; the options:
    :class:`~constrfl.settings.BaselineSettings`)

        sgd:      step = η_s Δ                      gain η_s
        momentum: m ← βm + Δ, step = η_s m          gain η_s/(1 − β)
        adagrad, yogi, adam: step = η m/(√v + τ)    gain η/(√v + τ)

    where (003, Algorithm 2; m₀ = 0, v₀ = τ²) m ← β₁m + (1−β₁)Δ and v ← v + Δ²
    (Adagrad), v − (1−β₂)Δ² sign(v − Δ²) (Yogi), β₂v + (1−β₂)Δ² (Adam),

    and t = gain·η_c·K (FedMid's server prox_{η_s η_c K ψ} for ``sgd``).  FedMid's
    clients prox too (``client_prox``)."""

    message = M.SGD_TRAIN

    def __init__(self, P, n, rule, lr, momentum=None, beta1=None, beta2=None, tau=None,
                 client_prox=False):
        self.P, self.n, self.rule, self.lr, self.client_prox = P, n, rule, lr, client_prox
        self.momentum, self.beta1, self.beta2, self.tau = momentum, beta1, beta2, tau

    def init(self, w0):
        return {"x": w0, "m": np.zeros_like(w0),
                "v": np.full_like(w0, self.tau ** 2 if self.tau is not None else 0.0)}

    def model(self, s):
        return s["x"]

    def broadcast(self, s):
        return {"x": s["x"], "prox": self.client_prox}

    def update(self, s, avg, client_lr, steps, t):
        d, m, v = avg["delta"], s["m"], s["v"]
        if self.rule == "sgd":
            step, gain = self.lr * d, self.lr
        elif self.rule == "momentum":
            m = self.momentum * m + d
            step, gain = self.lr * m, self.lr / (1.0 - self.momentum)
        else:
            m = self.beta1 * m + (1.0 - self.beta1) * d
            if self.rule == "adagrad":
                v = v + d * d
            elif self.rule == "yogi":
                v = v - (1.0 - self.beta2) * d * d * np.sign(v - d * d)
            else:
                v = self.beta2 * v + (1.0 - self.beta2) * d * d
            gain = self.lr / (np.sqrt(v) + self.tau)
            step = gain * m
        return {"x": self.P.prox(s["x"] + step, gain * client_lr * steps / self.n),
                "m": m, "v": v}


class _Dual:
    """FedDualAvg(-OSP) server (002, Alg. 3): z ← z + η_s Δ, A ← A + η_s η_c K, model
    w = prox_{A P}(z) (A₀ = 0, z₀ = w₀).  Broadcasts z, and A when the clients prox."""

    def __init__(self, P, n, lr, send_offset):
        self.P, self.n, self.lr, self.send_offset = P, n, lr, send_offset
        self.message = M.DUAL_TRAIN if send_offset else M.SGD_TRAIN

    def init(self, w0):
        return {"z": w0, "w": w0, "offset": 0.0}

    def model(self, s):
        return s["w"]

    def broadcast(self, s):
        return ({"x": s["z"], "offset": s["offset"]} if self.send_offset
                else {"x": s["z"], "prox": False})

    def update(self, s, avg, client_lr, steps, t):
        z = s["z"] + self.lr * avg["delta"]
        offset = s["offset"] + self.lr * client_lr * steps
        return {"z": z, "w": self.P.prox(z, offset / self.n), "offset": offset}


class _CAda:
    """FedCAda server (001, Alg. 2): x ← prox_{tP}(x + η_s Δ), m ← mean mᵢ, v ← mean vᵢ
    (m₀ = v₀ = 0), with t = η_s η_c K/(√v̂ + ϵ), v̂ = v/c(β₂ᵗ) the clients' metric."""

    message = M.ADAM_TRAIN

    def __init__(self, P, n, lr, beta1, beta2, eps, correction):
        self.P, self.n, self.lr, self.beta2, self.eps = P, n, lr, beta2, eps
        self.correct = CORRECTIONS[correction]
        self.client = {"beta1": beta1, "beta2": beta2, "eps": eps,
                       "correction": CORRECTION_NAMES.index(correction)}

    def init(self, w0):
        return {"x": w0, "m": np.zeros_like(w0), "v": np.zeros_like(w0)}

    def model(self, s):
        return s["x"]

    def broadcast(self, s):
        return {"x": s["x"], "m": s["m"], "v": s["v"], **self.client}

    def update(self, s, avg, client_lr, steps, t):
        gain = self.lr / (np.sqrt(avg["v"] / self.correct(self.beta2 ** t)) + self.eps)
        return {"x": self.P.prox(s["x"] + self.lr * avg["delta"],
                                  gain * client_lr * steps / self.n),
                "m": avg["m"], "v": avg["v"]}


def _family(method, P, n, cfg):
    """The server update of ``method`` (which also names the clients' message); ψ = P/n."""
    lr = cfg["server_lr"]
    if method in SERVER_RULES:
        return _Primal(P, n, SERVER_RULES[method], lr, cfg["momentum"], cfg["beta1"],
                       cfg["beta2"], cfg["tau"], client_prox=method == "fedmid")
    if method in ("feddualavg", "feddualavg-osp"):
        return _Dual(P, n, lr, send_offset=method == "feddualavg")
    if method == "fedcada":
        return _CAda(P, n, lr, cfg["beta1"], cfg["beta2"], cfg["eps"], cfg["correction"])
    raise ValueError(f"unknown baseline method {method!r}")


# -- the round skeleton ---------------------------------------------------------------------

def _run(problem, family, s, cfg, seed, fed, report, callback):
    """Rounds of §7 from ``s``.  Returns ``(status, message)``: ``"max_iterations"`` (the
    rounds ran); other ways out raise.

    A round is the clients' exchange (:func:`_exchange`) and, with ``observe``, the
    observer's ``kkt.report`` on its model (:func:`_keep`).  A party answers a sequence
    number it has answered from its cache, so after a stop the next message must be the
    one that was cut off: ``s.pending`` says which — ``{}`` while the exchange is out,
    the round's update while its report is out (the round is kept only once observed),
    None between rounds.  A resumed run sends that message again, so it counts every
    round once and is bit for bit the uninterrupted run."""
    while s.pending is not None or s.round < cfg["rounds"]:
        if not s.pending:
            s.pending = _exchange(problem, family, s, cfg, seed, fed)
        _keep(problem, family, s, cfg, fed, report, callback)
    return st.MAX_ITERATIONS, ""


def _sampled(cfg, n):
    """How many of the ``n`` clients a round samples (at least one)."""
    return max(1, int(round(cfg["client_fraction"] * n)))


def _exchange(problem, family, s, cfg, seed, fed):
    """Round r = ``s.round`` + 1's exchange and server update (steps 1–4 of §7): the
    new server state and the round's record (``{"server", "record"}``).  The server's own
    share is computed first: when it fails, no message is out."""
    n, K, r = len(fed.clients), cfg["K"], s.round + 1
    m = _sampled(cfg, n)
    lr = cfg["client_lr"] * cfg["client_lr_decay"] ** (r - 1)
    picked = np.sort(np.random.default_rng([seed, r - 1]).choice(n, size=m, replace=False))
    w = family.model(s.server)
    own = None if problem.server.is_empty else _own_grad(problem.server, w, cfg)
    payload = {**family.broadcast(s.server), "n_clients": n,
               "penalty_weight": cfg["penalty_weight"], "batch_size": cfg["batch_size"] or 0,
               "seed": seed, "steps": K, "lr": lr, "round": r}
    s.pending = {}
    sums = fed.broadcast(family.message, payload, to=[fed.clients[i] for i in picked])
    s.pending = None
    with np.errstate(all="ignore"):
        avg = {key: total / m for key, total in sums.items()}
        if own is not None:                   # the server's own share, linearized at w
            avg["delta"] = avg["delta"] - lr * K / n * own
        server = family.update(s.server, avg, lr, K, r)
    why = _divergence(family.model(server), s.scale)
    if why:
        raise SolveStop(f"{why} in round {r}: the iteration diverged (lower client_lr "
                        f"or server_lr); returning round {r - 1}'s model, the last one "
                        "within range", st.NUMERICAL_ERROR)
    return {"server": server,
            "record": dict(round=r, clients=m, client_lr=lr, rounds=fed.traffic.rounds,
                           bytes_up=fed.traffic.bytes_up, bytes_down=fed.traffic.bytes_down)}


def _keep(problem, family, s, cfg, fed, report, callback):
    """Keep the pending round: with ``observe``, first the observer's record of its model
    (a model whose report fails — e.g. a non-finite objective — is not kept); then the
    report and the callback."""
    server, rec = s.pending["server"], s.pending["record"]
    w = family.model(server)
    if cfg["observe"]:
        rec = {**rec, **_observe(problem, fed, w, cfg["penalty_weight"])}
        s.reported_seq = fed.seq
    s.server, s.round, s.pending = server, rec["round"], None
    s.local_steps += rec["clients"] * cfg["K"]
    s.history.append(rec)
    report(rec)
    if callback is not None and callback(dict(rec, w=w.copy())):
        raise SolveStop(f"the callback asked to stop after round {s.round}")


#: ε = 2⁻⁵², the spacing of doubles at 1
EPS = float(np.finfo(np.float64).eps)


def _size(w):
    """‖w‖∞ (NaN when w holds a NaN)."""
    return float(np.max(np.abs(w), initial=0.0))


def _divergence(w, scale):
    """Why the model w is out of range, or "": a NaN or inf; or ‖w‖∞ > scale/ε, with
    scale = max(1, ‖w⁰‖∞), where the rounding error of w alone, ε‖w‖∞, exceeds the
    scale the run started at, so any later iterate at that scale — one the rounds
    would bring back — carries an error larger than itself."""
    size = _size(w)
    if not np.isfinite(size):
        return "the model overflowed (NaN or inf)"
    if size > scale / EPS:
        return (f"‖w‖∞ = {size:.3g} exceeds max(1, ‖w⁰‖∞)/ε = {scale / EPS:.3g} (its "
                "rounding error alone exceeds the scale of the start)")
    return ""


def _own_grad(server, w, cfg):
    """The server's own share ∇(f₀ + γ/2(‖[c₀]₊‖² + ‖h₀‖²)) at w (its own functions)."""
    try:
        return penalized_grad(server, w, 1.0, cfg["penalty_weight"])
    except PartyError as err:
        raise err.named("server") from err.__cause__


_UNOBSERVED = dict(objective=np.nan, stationarity=np.nan, feasibility=np.nan,
                   complementarity=np.nan, definition1=np.nan)


def _final_record(problem, fed, s, w, weight):
    """The observer's record of the returned model w and the stop that prevented it
    (or None): the last round's record; else (``observe=False``, or no round kept) one
    ``kkt.report`` now, unless a message is out (``s.pending``: a party would answer the
    report from that message's cache); else the NaN record :data:`_UNOBSERVED`."""
    last = s.history[-1] if s.history else {}
    if "stationarity" in last:
        return last, None
    unobserved = dict(_UNOBSERVED)
    if s.pending is not None:
        return unobserved, None
    try:
        out = _observe(problem, fed, w, weight)
        s.reported_seq = fed.seq
        return out, None
    except SolveStop as stop:
        return unobserved, stop


def _observe(problem, fed, w, weight):
    """The observer's record at the model: objective of (5) and KKT residuals of §2
    (with the penalty multipliers, which each party records), from a ``kkt.report``
    round that is not counted."""
    sums = fed.broadcast(M.KKT_REPORT, {"w": w, "penalty_weight": weight},
                         include_server=True, counted=False)
    kkt, objective = measured_at(problem, w, sums)
    return dict(objective=objective, **{key: getattr(kkt, key) for key in KKT.RECORDED})


class _Report(IterationTable):
    """About 20 evenly spaced rounds, the first and the last."""

    columns = (("round", 6), ("clients", 8), ("client_lr", 10), ("stationarity", 12),
               ("feasibility", 11), ("objective", 15))

    def __init__(self, verbose, method, problem, rounds):
        self.every, self.last = max(1, rounds // 20), rounds
        super().__init__(verbose, method, problem)

    def shows(self, r):
        return r["round"] % self.every == 0 or r["round"] in (1, self.last)

    def format(self, r):
        return (f"{r['round']:6d} {r['clients']:8d} {r['client_lr']:10.3e} "
                f"{r.get('stationarity', np.nan):12.3e} {r.get('feasibility', np.nan):11.3e} "
                f"{r.get('objective', np.nan):15.8e}")
