"""Settings records (in the style of OSQP's and ProxQP's settings): one frozen dataclass
per inner solver of the proximal AL methods and one for the baselines, each field with
its default.  The option checks live here (those that need the problem in
:func:`settings_for` and :meth:`ADMMSettings.client_rhos`; what a baseline requires of
the problem, e.g. a penalty for constraints, in :mod:`constrfl.solvers.baselines`).
``cf.solve``, ``run_server`` and ``simulate`` build their settings with
:func:`settings_for` (or :func:`resume_settings`), and a result keeps them as a plain
dict (:func:`to_saved`, :func:`from_saved`).

* :class:`NewtonSettings`: ``fedproxal`` with ``inner="newton"`` or ``"newton-cg"``,
  and ``cproxal`` (the same proximal Newton steps on pooled data);
* :class:`ADMMSettings`: ``fedproxal`` with ``inner="admm"`` (Algorithm 2);
* :class:`BaselineSettings`: the federated baselines of
  :mod:`constrfl.solvers.baselines` (``None``: the method's own default).

Both proximal AL records extend :class:`OuterSettings`, the outer loop's options.
``replace(**changes)`` returns a checked copy; an option the record does not have is a
TypeError naming it.  ``inner="auto"`` is resolved by :func:`settings_for`, which knows
the problem.
"""
from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field

import numpy as np

from . import status as st
from .control import count, positive, real
from .corrections import CORRECTION_NAMES
from .exactsum import RING_BYTES
from .messages import SECURE_MIN_NEIGHBOURS
from .methods import BASELINES, METHODS
from .result import SolveResult
from .rowspace import compact_size

__all__ = ["OuterSettings", "NewtonSettings", "ADMMSettings", "BaselineSettings",
           "settings_for", "resume_settings", "tolerances", "DEFAULT_TOL", "to_saved", "from_saved",
           "choose_inner", "METHODS", "BASELINES", "INNER", "LOCAL_SOLVERS",
           "AUTO_NEWTON_MAX_DIM", "AUTO_NEWTON_NONSMOOTH_MAX_DIM", "AUTO_NEWTON_SMOOTH_MAX_DIM"]

INNER = ("auto", "admm", "newton", "newton-cg", "newton-basis")
#: the clients' solvers for the ADMM's (19) (``local_solver``)
LOCAL_SOLVERS = ("auto", "newton", "newton-cg", "lbfgs")
#: ``inner`` when none is given (resolved by :func:`choose_inner`)
DEFAULT_INNER = "auto"
#: ``inner="auto"`` runs the federated Newton method up to this dimension (its upload,
#: d(d+1)/2 sums a client and round, stays below 4 MB)
AUTO_NEWTON_MAX_DIM = 500
#: ... and, where P is smooth and only sums may leave the parties (where the alternative
#: is Newton-CG), up to this one (64 MB a client and round; measured: NP dense
#: d = 1,000, 20 × 200 rows, ridge 1e-3: 18 rounds, 8.8 s, where Newton-CG took 207 rounds,
#: 29 with its recycled directions (docs/algorithms.md (R1)–(R3)); d = 2,000: 32 rounds,
#: 60 s, 1.8 GB, where Newton-CG took 892 rounds, 40 s, now 72)
AUTO_NEWTON_SMOOTH_MAX_DIM = 2000
#: ... and, with a P that is not smooth (where the alternative is the ADMM), up to this
#: one (64 MB a client and round, its step exact up to
#: :data:`~constrfl.solvers.newton.EXACT_STEP_MAX_DIM`; measured: NP dense d = 2,000,
#: 20 × 200 rows, ℓ1 1e-3: 31 rounds, 190 s, where the ADMM took 982 rounds, 144 s
#: (validation/results/bench_highdim_dense_l1.md); d = 3,000, a forcing sequence: 57
#: rounds but 852 s, 3.6 GB, another job on the second core; at d = 5,000 a round would
#: be 400 MB up a client, and the ADMM takes 722 rounds,
#: validation/results/bench_highdim_dense5k_l1.md; Maros–Meszaros n = 649–1,000, 5
#: clients: 12–571 rounds where the ADMM ran out of 60 s)
AUTO_NEWTON_NONSMOOTH_MAX_DIM = 2000
#: ... as long as a round's Hessian sums, every client's upload together, take at most
#: this many bytes (RING_BYTES an entry): the server holds a round's replies at once
AUTO_NEWTON_MAX_BYTES = 4e9
#: ``inner="auto"`` runs ``"newton-basis"`` above ``AUTO_NEWTON_MAX_DIM`` when every party
#: has a compact Hessian and the server's copies stay below this many bytes (a sparse
#: party's entry budgeted at 200 bytes: measured 5.0 GB peak for 26M entries, d = 100,000,
#: when the server summed them; 2.0 GB, the parties in the same process included, since
#: it keeps each party's triangle on an int32 pattern) ...
AUTO_BASIS_MAX_BYTES = 8e9
#: ... and, where P is smooth (Newton-CG is the alternative), its algebra a Newton step
#: below this many flops (≈ 10 s on one core) and its sparse entries below this many
#: (NP sparse d = 100,000, 26M entries: 166 s against Newton-CG's 2.4 s;
#: d = 20,000, 1M: 5.6 s, 14 rounds against 59)
AUTO_BASIS_MAX_FLOPS = 1e11
AUTO_GRAM_MAX_ENTRIES = 5e6


class _Record:
    """What every settings record shares: checked copies and the save format."""

    @classmethod
    def options(cls):
        """The names of the record's options (what ``replace`` accepts)."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.init)

    @classmethod
    def check_names(cls, names, where):
        """TypeError naming the ``names`` that are not options of this record."""
        unknown = sorted(set(names) - set(cls.options()))
        if unknown:
            raise TypeError(f"options that do not apply to {where}: {unknown}")

    @classmethod
    def build(cls, options, where):
        """The record of ``options`` (the others at their defaults); an unknown one is a
        TypeError saying it does not apply to ``where``."""
        cls.check_names(options, where)
        return cls(**options)

    def replace(self, **changes):
        """A copy with ``changes``, checked like the original."""
        self.check_names(changes, type(self).__name__)
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """Every field as given (plain Python values; JSON-serializable)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, saved):
        """The record of a :meth:`to_dict` (fields the record sets itself are ignored)."""
        computed = {f.name for f in dataclasses.fields(cls) if not f.init}
        return cls.build({k: v for k, v in saved.items() if k not in computed}, cls.__name__)

    def _set(self, name, value):
        object.__setattr__(self, name, value)      # a frozen record's normalized value


@dataclass(frozen=True)
class TransportSettings(_Record):
    """What every method shares of how the clients' uploads travel."""

    #: True: the clients mask their uploads pairwise (secure summation,
    #: :mod:`constrfl.federation.secure`), each with
    #: :data:`~constrfl.messages.SECURE_NEIGHBOURS` neighbours; an int k ≥ 2: with k
    #: (every other client when there are no more): the server, even with fewer than k
    #: clients' help, can read only their sum; needs at least 3 clients and costs one
    #: round, the key agreement
    secure: bool | int = False

    def __post_init__(self):
        if not isinstance(self.secure, int):
            raise TypeError(f"secure must be True, False or a number of neighbours (an "
                            f"int), got {self.secure!r}")
        if not isinstance(self.secure, bool) and self.secure < SECURE_MIN_NEIGHBOURS:
            raise ValueError(f"secure={self.secure}: a client masks with at least "
                             f"{SECURE_MIN_NEIGHBOURS} neighbours (with one, that neighbour "
                             "and the server read its upload)")


@dataclass(frozen=True)
class OuterSettings(TransportSettings):
    """The outer loop of Algorithms 1 and 3 (:func:`constrfl.solvers.proxal.proximal_al`);
    τ_k = s̄·rᵏ (``tau_decay=r``) or the paper's s̄/(k+1)² (``tau_decay=None``), never
    below ε₁/10 (:func:`constrfl.solvers.proxal.tau_schedule`)."""

    #: cap on outer iterations
    max_outer: int = 200
    #: s̄ of the subproblem tolerances τ_k
    s_bar: float = 1e-2
    #: r of τ_k = s̄·rᵏ, in (0, 1); None: the paper's s̄/(k+1)²
    tau_decay: float | None = 0.2
    #: also τ_k ≤ tau_rel × the outer loop's error at the last iterate; None: off
    tau_rel: float | None = 0.1
    #: "rows": each party scales its own constraint rows whose gradient norm at w⁰ is far
    #: from 1 (no round); True: equilibrate rows, columns and objective first
    #: (:mod:`constrfl.scaling`; one round); False: none
    scaling: bool | str = "rows"
    #: ε_rel ≥ 0: optimal when stationarity ≤ ε₁ + ε_rel·S₁ and Definition 1 ≤ ε₂ +
    #: ε_rel·S₂ (the scales of :class:`~constrfl.result.KKT`); 0: ``tol`` alone
    eps_rel: float = 0.0
    #: True: the server receives only sums over the parties (every method but
    #: ``inner="newton-basis"``); False: the parties also disclose their own compact
    #: Hessians (row bases, sparse patterns, constraint models: ``"newton-basis"``)
    private: bool = True

    def __post_init__(self):
        super().__post_init__()
        self._set("max_outer", count(self.max_outer, "max_outer"))
        self._set("s_bar", positive(self.s_bar, "s_bar"))
        if self.tau_decay is not None:
            if not (real(self.tau_decay) and 0 < self.tau_decay < 1):
                raise ValueError(f"tau_decay must be None or in (0, 1), got {self.tau_decay!r}")
            self._set("tau_decay", float(self.tau_decay))
        if self.tau_rel is not None:
            self._set("tau_rel", positive(self.tau_rel, "tau_rel"))
        if not (real(self.eps_rel) and 0 <= self.eps_rel < np.inf):
            raise ValueError(f"eps_rel must be a finite number >= 0, got {self.eps_rel!r}")
        self._set("eps_rel", float(self.eps_rel))
        if not (isinstance(self.scaling, bool) or self.scaling == "rows"):
            raise TypeError(f"scaling must be True, False or 'rows', got {self.scaling!r}")
        if not isinstance(self.private, bool):
            raise TypeError(f"private must be True or False, got {self.private!r}")
        if self.secure and not self.private:
            raise ValueError("secure=True masks the sums; private=False would send each "
                             "client's own compact Hessian unmasked: choose one")


@dataclass(frozen=True)
class NewtonSettings(OuterSettings):
    """``fedproxal`` with ``inner="newton"`` (each client uploads its local AL value,
    gradient and Hessian, d(d+1)/2 floats, one round a step), ``"newton-cg"`` (a round
    of Hessian-vector products per CG iteration, d floats up; needs a smooth P) or
    ``"newton-basis"`` (the Hessian in a compact exact form, ≤ 50·d floats a step: in the
    party's row basis, sent once, or as its sparse entries on a pattern sent once; any
    P), and ``cproxal``.  β grows tenfold, up to ``beta_max``, after an outer iteration
    that cut the violation by less than 4× (:func:`constrfl.solvers.proxal.next_penalties`)."""

    #: first penalty β > 0 of the augmented Lagrangian
    beta: float = 100.0
    #: cap on Newton steps per subproblem
    max_inner: int = 10000
    #: cap of the β schedule (``beta_max=beta`` keeps β fixed, as in the paper)
    beta_max: float = 1e4
    #: cap of η, the proximal term's parameter ‖w − wᵏ‖²/(2η): η = β until β reaches
    #: ``beta_max``, then grows alone where the outer steps do not contract
    #: (:func:`constrfl.solvers.proxal.next_penalties`; ``eta_max=beta_max``: η = β always)
    eta_max: float = 1e6
    #: ``"newton"``, ``"newton-cg"`` or ``"newton-basis"`` (``cproxal``: ``"newton"``,
    #: on the pooled data)
    inner: str = "newton"

    def __post_init__(self):
        super().__post_init__()
        self._set("beta", positive(self.beta, "beta"))
        self._set("max_inner", count(self.max_inner, "max_inner"))
        self._set("beta_max", positive(self.beta_max, "beta_max"))
        self._set("eta_max", positive(self.eta_max, "eta_max"))
        if self.inner not in ("newton", "newton-cg", "newton-basis"):
            raise ValueError(f"NewtonSettings: inner must be 'newton', 'newton-cg' or "
                             f"'newton-basis', got {self.inner!r} (inner='admm': "
                             f"ADMMSettings)")
        if self.inner == "newton-basis" and self.private:
            raise ValueError("inner='newton-basis' sends each party's own compact Hessian "
                             "(its row basis, sparse pattern or constraint models) to the "
                             "server; pass private=False to allow that, or use "
                             "inner='newton' or 'newton-cg', which send only sums")


@dataclass(frozen=True)
class ADMMSettings(OuterSettings):
    """``fedproxal`` with ``inner="admm"``: Algorithm 2, each round a client uploads two
    d-vectors and two scalars (:mod:`constrfl.solvers.admm`).  β stays fixed."""

    #: penalty β > 0 of the augmented Lagrangian (the ADMM's rounds grow like log β, its
    #: outer iterations fall with β: NP breast-cancer n = 20, 981 rounds at 500, 772 at 2000)
    beta: float = 2000.0
    #: the blocks' first penalties: "auto" (each det(∇²φᵢ)^(1/d)), a number, one per
    #: client, or "samples" (ρᵢ = 0.1·Nᵢ/meanⱼ Nⱼ, Remark 9; Nᵢ the client's rows)
    rho: object = "auto"
    #: each block adapts its ρᵢ by the spectral rule (False: fixed, as in the paper)
    adaptive_rho: bool = True
    #: cap on ADMM rounds per subproblem
    max_inner: int = 10000
    #: iterations per local solve of (19)
    local_max_iter: int = 100
    #: the clients' solver for (19): "newton" (semismooth, L-BFGS for functions without
    #: Hessians), "newton-cg" (Newton by conjugate gradients on Hessian products, L-BFGS
    #: for a client whose products are missing or dense), "lbfgs", or "auto" (newton up to d =
    #: AUTO_NEWTON_MAX_DIM, then newton-cg)
    local_solver: str = "auto"
    inner: str = field(default="admm", init=False)

    def __post_init__(self):
        super().__post_init__()
        self._set("beta", positive(self.beta, "beta"))
        self._set("rho", _rho_form(self.rho))
        if not isinstance(self.adaptive_rho, (bool, np.bool_)):
            raise TypeError(f"adaptive_rho must be True or False, got {self.adaptive_rho!r}")
        self._set("adaptive_rho", bool(self.adaptive_rho))
        self._set("max_inner", count(self.max_inner, "max_inner"))
        self._set("local_max_iter", count(self.local_max_iter, "local_max_iter"))
        if self.local_solver not in LOCAL_SOLVERS:
            raise ValueError(f"local_solver must be one of {LOCAL_SOLVERS}, got "
                             f"{self.local_solver!r}")

    @property
    def beta_max(self):
        """β is fixed: the cap of the β schedule is β itself."""
        return self.beta

    @property
    def eta_max(self):
        """The proximal term's η is β (Algorithm 2's Ψ_k)."""
        return self.beta

    def client_rhos(self, problem):
        """The blocks' first penalties for ``problem``'s clients: one per client, or None
        for ``"auto"``."""
        names = problem.client_names
        if self.rho == "auto":
            return None
        if self.rho == "samples":
            rows = problem.client_samples()
            if rows is None:
                raise ValueError("rho='samples' needs the clients' row counts, which this "
                                 "server does not know; give rho as numbers")
            rows = np.asarray(rows, dtype=float)
            for name, k in zip(names, rows):
                if k <= 0:
                    raise ValueError(f"rho='samples': client {name!r} holds no data rows")
            return 0.1 * rows / rows.mean()
        if isinstance(self.rho, float):
            return np.full(len(names), self.rho)
        if len(self.rho) != len(names):
            raise ValueError(f"rho has shape ({len(self.rho)},), expected a scalar or "
                             f"({len(names)},) (one value per client)")
        for name, r in zip(names, self.rho):
            if not np.isfinite(r) or r <= 0:
                raise ValueError(f"rho for client {name!r} must be finite and positive, "
                                 f"got {r}")
        return np.array(self.rho)


def _rho_form(rho):
    """``rho`` as "auto", "samples", a float or a tuple of floats (the values per client
    are checked by :meth:`ADMMSettings.client_rhos`, which knows the clients)."""
    bad = ValueError(f"rho must be 'auto', a number, an array or 'samples', got {rho!r}")
    if isinstance(rho, str):
        if rho not in ("auto", "samples"):
            raise bad
        return rho
    if isinstance(rho, (bool, np.bool_)):
        raise bad
    try:
        arr = np.asarray(rho, dtype=np.float64)
    except (TypeError, ValueError):
        raise bad from None
    if arr.ndim == 0:
        return positive(float(arr), "rho")
    if arr.ndim != 1:
        raise ValueError(f"rho has shape {arr.shape}, expected a scalar or one value per "
                         "client")
    return tuple(arr.tolist())


#: the adaptive FedOpt methods (seed 003)
ADAPTIVE = ("fedadagrad", "fedyogi", "fedadam")
#: options that only some baselines take: their default and the methods that take them
SPECIFIC = {
    "momentum": (0.9, ("fedavgm",)),
    "beta1": (0.9, ADAPTIVE + ("fedcada",)),
    "beta2": (0.99, ("fedyogi", "fedadam", "fedcada")),
    "tau": (1e-3, ADAPTIVE),
    "eps": (1e-8, ("fedcada",)),
    "correction": ("linear", ("fedcada",)),
}
#: default client rates η_c by method (else 0.01): FedCAda's Adam steps are about η_c per
#: coordinate whatever the gradient's scale
CLIENT_LR = {"fedcada": 0.001}
#: default server rates (η of the adaptive methods; η_s = 1 for the others): FedAdagrad's
#: v sums the early deltas, so its steps shrink like 1/√t (Flower's default)
SERVER_LR = {"fedadagrad": 0.1, "fedyogi": 0.01, "fedadam": 0.01}


@dataclass(frozen=True)
class BaselineSettings(TransportSettings):
    """The federated baselines (:mod:`constrfl.solvers.baselines`, docs/algorithms.md §7);
    ``None`` stands for the method's default (:meth:`resolved`).  One K for all clients,
    as FedMid's and FedDualAvg's server steps assume.

    With the defaults (``rounds=3000``) every method reaches a relative objective gap
    ≤ 1e-3 on the strongly convex federated least squares of 8 clients, d = 10, of
    ``tests/test_baselines.py``.  With rates tuned there (5 clients, d = 6, 40 rows each,
    full participation and batches, K = 5) the gap falls to ≤ 1e-4 after 9 rounds
    (FedAvg, FedMid, FedDualAvg and the OSP variants), 17 (FedCAda), 36 (FedAvgM), 75
    (FedAdagrad, FedAdam) and 78 (FedYogi); the test allows 20–120."""

    #: communication rounds R
    rounds: int = 100
    #: K local steps a round [10]; or ``epochs`` E with ``batch_size`` B:
    #: K = E·⌈N̄/B⌉, N̄ the clients' mean number of rows
    local_steps: int | None = None
    #: E local epochs a round (with ``batch_size``), instead of ``local_steps``
    epochs: int | None = None
    #: B rows per local gradient, drawn without replacement [None: the full gradient]
    batch_size: int | None = None
    #: C ∈ (0, 1], the share of clients sampled each round
    client_fraction: float = 1.0
    #: η_c per unit of the mean client objective [0.01; 0.001 for FedCAda]
    client_lr: float | None = None
    #: δ ∈ (0, 1]: round r uses η_c·δʳ (Reddi et al.'s exponential decay)
    client_lr_decay: float = 1.0
    #: η_s, or η of the adaptive methods [1; 0.1 FedAdagrad, 0.01 FedYogi and FedAdam]
    server_lr: float | None = None
    #: None (constraints raise ValueError) or "quadratic": γ/2(‖[c]₊‖² + ‖h‖²) added
    penalty: str | None = None
    #: γ of the quadratic penalty [100]
    penalty_weight: float | None = None
    #: FedAvgM's β: m ← βm + Δ, x ← x + η_s m [0.9]
    momentum: float | None = None
    #: β₁ of FedOpt (003, Algorithm 2) and of FedCAda's client Adam [0.9]
    beta1: float | None = None
    #: β₂ of FedYogi, FedAdam and FedCAda [0.99]
    beta2: float | None = None
    #: τ of FedOpt: x ← x + η m/(√v + τ), v₀ = τ² [1e-3]
    tau: float | None = None
    #: ϵ of FedCAda's client Adam [1e-8]
    eps: float | None = None
    #: FedCAda's bias correction (seed 001; see the ``adam.train`` handler) ["linear"]
    correction: str | None = None
    #: record the objective and KKT residuals of every round (an uncounted observer's
    #: message); else only at the end
    observe: bool = True

    def __post_init__(self):
        super().__post_init__()
        self._set("rounds", count(self.rounds, "rounds"))
        for name in ("local_steps", "epochs", "batch_size"):
            if getattr(self, name) is not None:
                self._set(name, count(getattr(self, name), name))
        if self.epochs is not None and self.local_steps is not None:
            raise ValueError("give either local_steps or epochs, not both")
        if self.epochs is not None and self.batch_size is None:
            raise ValueError("epochs needs batch_size (rows per local step)")
        self._set("client_fraction", _interval("client_fraction", self.client_fraction,
                                               0, 1, closed_low=False))
        self._set("client_lr_decay", _interval("client_lr_decay", self.client_lr_decay,
                                               0, 1, closed_low=False))
        for name in ("client_lr", "server_lr", "penalty_weight", "tau", "eps"):
            if getattr(self, name) is not None:
                self._set(name, _interval(name, getattr(self, name), 0, np.inf,
                                          closed_low=False))
        for name in ("momentum", "beta1", "beta2"):
            if getattr(self, name) is not None:
                self._set(name, _interval(name, getattr(self, name), 0, 1,
                                          closed_high=False))
        if self.penalty not in (None, "quadratic"):
            raise ValueError(f"penalty must be None or 'quadratic', got {self.penalty!r}")
        if self.penalty is None and self.penalty_weight is not None:
            raise ValueError("penalty_weight needs penalty='quadratic'")
        if self.correction is not None and self.correction not in CORRECTION_NAMES:
            raise ValueError(f"correction must be one of {sorted(CORRECTION_NAMES)}, "
                             f"got {self.correction!r}")
        if not isinstance(self.observe, (bool, np.bool_)):
            raise TypeError(f"observe must be True or False, got {self.observe!r}")
        self._set("observe", bool(self.observe))

    def resolved(self, method):
        """The options as ``method`` runs them (a dict): its defaults filled in, those of
        other methods None; an option ``method`` does not take is a ValueError."""
        out = self.to_dict()
        for name, (default, methods) in SPECIFIC.items():
            if out[name] is None:
                out[name] = default if method in methods else None
            elif method not in methods:
                raise ValueError(f"option {name!r} does not apply to method {method!r} "
                                 f"(it is for {', '.join(methods)})")
        if out["client_lr"] is None:
            out["client_lr"] = CLIENT_LR.get(method, 0.01)
        if out["server_lr"] is None:
            out["server_lr"] = SERVER_LR.get(method, 1.0)
        if out["penalty"] is not None and out["penalty_weight"] is None:
            out["penalty_weight"] = 100.0
        if out["epochs"] is None and out["local_steps"] is None:
            out["local_steps"] = 10
        return out


def _interval(name, value, low, high, closed_low=True, closed_high=True):
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


# -- the settings of a solve ------------------------------------------------------------------

def choose_inner(dim, regularizer, compact=None, private=True, clients=1):
    """What ``inner="auto"`` runs (measured in validation/bench.py and
    validation/qp_benchmark.py): ``"newton"`` up to d = ``AUTO_NEWTON_MAX_DIM`` (tens of
    rounds where the ADMM needs hundreds); above it ``"newton-basis"`` when ``compact``
    (each party's :func:`~constrfl.rowspace.compact_size`; None where the server cannot
    see the parties, as under Flower) says every party has a compact Hessian, and the
    server can afford them (:func:`basis_affordable`; tens of rounds at d = 1,000–
    100,000, validation/results/bench_highdim.md); else ``"newton-cg"`` when P is smooth
    (none or a ridge, weighted or an estimator's: :meth:`~constrfl.prox.Regularizer.
    ridge_weights`; O(d) floats a round, a round a CG iteration); with any other P
    ``"newton"`` up to d = ``AUTO_NEWTON_NONSMOOTH_MAX_DIM`` (Maros–Meszaros, n =
    649–1,000, 5 clients: 12–571 rounds where the ADMM ran out of 60 s; NP dense
    d = 2,000 with ℓ1: 52 rounds where it ran out of 300 s), else ``"admm"``.  With
    ``private`` (the default) the parties send only sums: ``"newton-basis"`` (per-site
    forms) is not among the choices, and with a smooth P ``"newton"`` (the Hessian's
    sum) runs up to d = ``AUTO_NEWTON_SMOOTH_MAX_DIM``.
    ``"newton"`` only while the ``clients``' Hessian triangles of a round take at most
    ``AUTO_NEWTON_MAX_BYTES`` together; past that the alternative of its P."""
    smooth = regularizer.ridge_weights(dim) is not None
    fits = clients * RING_BYTES * dim * (dim + 1) / 2 <= AUTO_NEWTON_MAX_BYTES
    if dim <= AUTO_NEWTON_MAX_DIM and fits:
        return "newton"
    if not private and compact is not None and basis_affordable(dim, compact, smooth):
        return "newton-basis"
    if smooth:
        return ("newton" if private and fits and dim <= AUTO_NEWTON_SMOOTH_MAX_DIM
                else "newton-cg")
    return "newton" if fits and dim <= AUTO_NEWTON_NONSMOOTH_MAX_DIM else "admm"


def basis_affordable(dim, compact, smooth=True):
    """Every party has a compact Hessian (``compact``: their ``(kind, floats, rows)``),
    the server's copies take at most ``AUTO_BASIS_MAX_BYTES`` and, with a ``smooth`` P
    (Newton-CG the alternative), its step at most ``AUTO_BASIS_MAX_FLOPS`` (min(R, d)²·R
    for (B2)–(B3), R rows in the bases, docs/algorithms.md §5) and its sparse entries at
    most ``AUTO_GRAM_MAX_ENTRIES``."""
    if not all(c is not None for c in compact):
        return False
    R = sum(rows for kind, _, rows in compact if kind == "basis")
    entries = sum(floats for kind, floats, _ in compact if kind == "gram")
    if 8.0 * R * dim + 200.0 * entries > AUTO_BASIS_MAX_BYTES:
        return False
    return not smooth or (min(R, dim) ** 2 * R <= AUTO_BASIS_MAX_FLOPS
                          and entries <= AUTO_GRAM_MAX_ENTRIES)


def settings_for(method, options, problem):
    """The checked settings record of ``method`` with ``options`` (the others at their
    defaults): ``inner="auto"`` and ``local_solver="auto"`` resolved for ``problem`` (its
    ``dim`` and ``regularizer``); an option that does not apply to ``method`` (and its
    inner solver) is a TypeError."""
    if method in BASELINES:
        return BaselineSettings.build(options, f"method {method!r}")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS + BASELINES}")
    if method == "cproxal" and "inner" in options:
        raise TypeError("solve() option 'inner' does not apply to method 'cproxal' "
                        "(it solves the pooled subproblem by proximal Newton)")
    given = {k: v for k, v in options.items() if k != "inner"}
    inner, where = options.get("inner", DEFAULT_INNER), f"method {method!r}"
    if inner not in INNER:
        raise ValueError(f"inner must be one of {INNER}, got {inner!r}")
    if method == "cproxal":
        return NewtonSettings.build(given, where)
    if inner == "auto":
        inner = choose_inner(problem.dim, problem.regularizer, _compact_sizes(problem),
                             options.get("private", True), problem.n_clients)
        where += f" with inner={inner!r}, chosen by inner='auto' for d={problem.dim}"
    else:
        where += f" with inner={inner!r}"
    if inner != "admm":
        return NewtonSettings.build(dict(given, inner=inner), where)
    settings = ADMMSettings.build(given, where)
    if settings.local_solver == "auto":            # no dense d×d Hessians above the limit
        settings = settings.replace(local_solver="newton" if problem.dim <= AUTO_NEWTON_MAX_DIM
                                    else "newton-cg")
    return settings


def _compact_sizes(problem):
    """:func:`~constrfl.rowspace.compact_size` of each party with functions, or None for
    a problem whose parties the server does not hold (a ServerView)."""
    parties = getattr(problem, "parties", None)
    if parties is None:
        return None
    return [compact_size(p) for p in parties if not p.is_empty]


#: ``tol`` when none is given (and a resumed result saved none: format version 2)
DEFAULT_TOL = 1e-6


def tolerances(tol):
    """``(ε₁, ε₂)`` from ``tol``: a number or a pair; None: :data:`DEFAULT_TOL`."""
    tol = DEFAULT_TOL if tol is None else tol
    pair = tol if isinstance(tol, (tuple, list)) else (tol, tol)
    if len(pair) != 2:
        raise ValueError(f"tol must be a number or a pair (eps1, eps2), got {tol!r}")
    return positive(pair[0], "tol (eps1)"), positive(pair[1], "tol (eps2)")


def to_saved(method, settings, eps):
    """A result's ``settings``: the record's fields, ``method`` and the tolerances
    ``eps`` = (ε₁, ε₂) as ``tol``, a plain dict."""
    return dict(settings.to_dict(), method=method, tol=list(eps))


def from_saved(saved):
    """``(method, record)`` of a result's ``settings`` (:func:`to_saved`; also those of
    format version 2, which a ``cproxal`` solve saved without ``inner``)."""
    saved = dict(saved)
    method = saved.pop("method")
    saved.pop("tol", None)
    if method in BASELINES:
        return method, BaselineSettings.from_dict(saved)
    if saved.get("inner") == "admm":
        return method, ADMMSettings.from_dict(saved)
    return method, NewtonSettings.from_dict(saved)


def resume_settings(problem, res, method, options, tol=None):
    """``(method, settings, eps)`` of a solve resuming ``res`` (checked against
    ``problem``): those it ran with, of which ``options`` may raise only the cap
    (``max_outer``; a baseline's ``rounds``), and must after ``"max_iterations"``;
    the tolerances are ``tol`` when given, else the resumed solve's."""
    if not isinstance(res, SolveResult):
        raise TypeError("resume must be a SolveResult with its solver state "
                        "(from cf.solve or cf.load_result)")
    if res.state is None:
        raise ValueError("resume: this result holds no solver state (a file saved before "
                         "format version 4, whose protocol sent each site's values, "
                         "loads but cannot be resumed: solve again)")
    if res.status not in st.RESUMABLE:
        raise ValueError(f"a solve that ended {res.status!r} cannot be resumed "
                         f"(resumable: {', '.join(st.RESUMABLE)})")
    saved = res.state["problem"]
    if saved["dim"] != problem.dim or list(saved["owners"]) != problem.party_names:
        raise ValueError(f"resume: the result belongs to another problem (dimension "
                         f"{saved['dim']}, parties {list(saved['owners'])}; this one: "
                         f"{problem.dim}, {problem.party_names})")
    saved_method, settings = from_saved(res.settings)
    if method not in ("fedproxal", saved_method):     # "fedproxal" is solve()'s default
        raise ValueError(f"resume: the result is from method {saved_method!r}, not {method!r}")
    limit = "rounds" if saved_method in BASELINES else "max_outer"
    for k, v in options.items():
        if k != limit and not _same(res.settings.get(k), v):
            raise ValueError(f"resume: option {k!r} differs from the resumed solve's "
                             f"({res.settings.get(k)!r}); only {limit!r} may change")
    cap = getattr(settings, limit)
    if res.status == st.MAX_ITERATIONS and not options.get(limit, 0) > cap:
        raise ValueError(f"resume: the solve stopped at {limit}={cap}; pass a larger "
                         f"{limit} to continue it")
    if limit in options:
        settings = settings.replace(**{limit: options[limit]})
    return saved_method, settings, tolerances(res.settings.get("tol") if tol is None else tol)


def _same(a, b):
    try:
        return bool(np.all(np.asarray(a) == np.asarray(b)))
    except Exception:
        return False
