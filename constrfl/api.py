"""``constrfl.solve``: one call, a :class:`~constrfl.result.SolveResult` back — whatever
happens during the solve (see :mod:`constrfl.status`)."""
from __future__ import annotations

import time

import numpy as np

from . import status as st
from .control import (checked_callback, checkpoint, count, interruptible, positive, real,
                      restore)
from .errors import SolveStop
from .federation import InProcessFederation
from .problem import Problem
from .prox import SquaredL2, Zero
from .result import KKT, SolveResult
from .solvers.admm import ADMM
from .solvers.newton import Newton
from .solvers.proxal import OuterState, proximal_al

__all__ = ["solve", "execute", "METHODS", "BASELINES", "settings_for", "choose_inner"]

METHODS = ("fedproxal", "cproxal")
INNER = ("auto", "admm", "newton", "newton-cg")
#: ``inner="auto"`` runs the federated Newton method up to this dimension (its upload,
#: d(d+1)/2 floats a client and round, stays below 1 MB)
AUTO_NEWTON_MAX_DIM = 500
BASELINES = ("fedavg", "fedavgm", "fedadagrad", "fedyogi", "fedadam", "fedcada", "fedmid",
             "feddualavg", "fedmid-osp", "feddualavg-osp")

#: the options of the proximal AL methods and their defaults, by who uses them
#: (β: the ADMM's rounds grow only like log β while its outer iterations fall with β,
#: measured on NP breast-cancer n = 20: 981 rounds at β = 500, 772 at 2000; the Newton
#: methods start lower and raise β themselves up to ``beta_max``)
OUTER_OPTIONS = dict(max_outer=200, s_bar=1e-2, tau_decay=0.2, tau_rel=0.1)
ADMM_OPTIONS = dict(beta=2000.0, rho="auto", adaptive_rho=True, max_inner=10000,
                    local_max_iter=100, local_solver="auto")
NEWTON_OPTIONS = dict(beta=100.0, max_inner=10000, beta_max=1e4)
#: every option of ``fedproxal`` with its default (β and ``max_inner`` those of the
#: Newton methods, which ``inner="auto"`` runs up to d = 500)
PROXAL_OPTIONS = {**OUTER_OPTIONS, "inner": "auto", **ADMM_OPTIONS, **NEWTON_OPTIONS}


def choose_inner(dim, regularizer):
    """What ``inner="auto"`` runs (measured in validation/bench.py): ``"newton"`` up to
    d = ``AUTO_NEWTON_MAX_DIM`` (tens of rounds where the ADMM needs hundreds), then
    ``"newton-cg"`` when P is smooth (none or SquaredL2: O(d) floats a round), else
    ``"admm"``."""
    if dim <= AUTO_NEWTON_MAX_DIM:
        return "newton"
    return "newton-cg" if isinstance(regularizer, (Zero, SquaredL2)) else "admm"


def solve(problem, method="fedproxal", tol=1e-6, *, w0=None, seed=0, verbose=False,
          callback=None, max_time=None, resume=None, **options):
    """Solve problem (5); returns a :class:`~constrfl.result.SolveResult`, also when the
    solve is cut short (a status says how; the result keeps everything computed so far).

    This runs the federation **in one process** (every client's handlers are called
    here, with the messages and traffic of a real deployment); ``constrfl.flower`` runs
    the same solvers across processes and machines.

    Parameters common to every method
    ---------------------------------
    problem : Problem
    method : ``"fedproxal"`` (Algorithm 1), ``"cproxal"`` (Algorithm 3: the same outer
        loop, subproblems solved on pooled data), or a baseline of ``BASELINES``
        (options in :func:`constrfl.solvers.baselines.solve_baseline`).
    tol : ε or ``(ε₁, ε₂)``: stationarity and feasibility tolerances of Definition 1.
    w0 : starting point; default a point on the unit sphere drawn from ``seed``
        (the paper's choice), projected onto dom P.
    seed : integer seed (the default ``w0``; the baselines' sampling).
    verbose : print one row per outer iteration (per round for the baselines).
    callback : called after every outer iteration (every round for the baselines) with
        a dict (the history record plus ``w``, ``w_prev``, ``multipliers_prev`` and
        ``multipliers``); returning True or raising StopIteration stops the solve
        (status ``"stopped"``), any other exception stops it too (kept as ``error``).
    max_time : seconds after which the solve stops with ``"time_limit"`` (checked
        before every communication round).
    resume : a result of an earlier solve of the same problem (``"max_iterations"``,
        ``"time_limit"``, ``"interrupted"``, ``"stopped"``, ``"client_error"``,
        ``"client_failure"``), e.g. from :func:`constrfl.load_result`: continue it with
        its method and settings (``max_outer``, or the baselines' ``rounds``, may be
        raised); in-process the continuation is bit-identical to an uninterrupted solve.

    Options of ``fedproxal`` and ``cproxal``
    ----------------------------------------
    beta : penalty β > 0 of the augmented Lagrangian [100; 2000 with ``inner="admm"``].
    inner : ``fedproxal``'s subproblem solver [``"auto"``]:
        ``"newton"``: federated proximal Newton; each client uploads its local AL value,
        gradient and Hessian (d(d+1)/2 floats, disclosing local curvature) in one round
        per step; tens of rounds in all.
        ``"newton-cg"``: the same without Hessians: each conjugate-gradient iteration is
        a round of Hessian-vector products (d floats up); needs a smooth P (none or
        ``SquaredL2``).
        ``"admm"``: Algorithm 2 of the paper; each round a client uploads two d-vectors
        and two scalars; hundreds of rounds.
        ``"auto"``: ``"newton"`` for d ≤ 500, else ``"newton-cg"`` with a smooth P, else
        ``"admm"`` (:func:`choose_inner`; the README's benchmark says why).
    max_outer : cap on outer iterations [200].
    s_bar, tau_decay : subproblem tolerances τ_k = s̄·rᵏ (``tau_decay=r``), or the
        paper's τ_k = s̄/(k+1)² with ``tau_decay=None``; never below ε₁/10 [1e-2, 0.2].
    tau_rel : also τ_k ≤ ``tau_rel`` × the outer loop's error at the last iterate (None:
        the schedule alone; :func:`constrfl.solvers.proxal.tau_schedule`) [0.1].
    max_inner : cap on ADMM rounds or Newton steps per subproblem [10000].
    Only with ``inner="newton"``, ``"newton-cg"`` and ``cproxal``:
    beta_max : β grows tenfold, up to ``beta_max``, after an outer iteration that cut the
        constraint violation by less than 4× (:func:`constrfl.solvers.proxal.next_beta`);
        ``beta_max=beta`` keeps β fixed as in the paper [1e4].
    Only with ``inner="admm"``:
    rho : the blocks' first ADMM penalties: ``"auto"`` (each chooses det(∇²φᵢ)^(1/d)),
        a scalar for every client, one value per client, or ``"samples"`` for
        ρᵢ = 0.1·Nᵢ / meanⱼ Nⱼ (Remark 9; Nᵢ the client's rows) [``"auto"``].
    adaptive_rho : each block adapts its own ρᵢ by the spectral rule of
        :mod:`constrfl.solvers.admm`; ``False`` keeps ρᵢ fixed, as in the paper [True].
    local_max_iter : iterations per local solve [100].
    local_solver : the clients' solver for (19): ``"newton"`` (semismooth Newton with a
        line search; L-BFGS for functions without Hessians), ``"lbfgs"``, or ``"auto"``:
        newton up to d = ``AUTO_NEWTON_MAX_DIM``, lbfgs above (no dense d×d Hessian)
        [``"auto"``].

    An option that does not apply to the method (or inner solver) is a TypeError.
    ``status`` is ``"optimal"`` only when the KKT residuals, computed by the owners at
    the returned point, meet ``tol``; otherwise ``message`` names the residual that
    failed.  Statuses: :mod:`constrfl.status`.
    """
    start = time.perf_counter()
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a constrfl.Problem, got {type(problem).__name__}")
    if resume is not None:
        method, options, w0 = _resumed(problem, resume, method, options)
    eps = _tolerances(tol)
    callback = checked_callback(callback)
    deadline = None if max_time is None else start + positive(max_time, "max_time")
    if method in BASELINES:
        from .solvers.baselines import BASELINE_OPTIONS, solve_baseline
        unknown = sorted(set(options) - set(BASELINE_OPTIONS))
        if unknown:
            raise TypeError(f"solve() got options that do not apply to method "
                            f"{method!r}: {unknown}")
        return solve_baseline(problem, method, eps, w0=w0, seed=seed, verbose=verbose,
                              callback=callback, deadline=deadline, resume=resume,
                              start=start, **options)
    settings = settings_for(method, options, problem)
    snapshots = resume.state["parties"] if resume is not None else None
    fed = InProcessFederation(problem, snapshots, counted=method != "cproxal")
    return execute(problem, method, eps, settings, fed, w0=w0, seed=seed, resume=resume,
                   verbose=verbose, callback=callback, deadline=deadline, start=start)


def settings_for(method, options, problem):
    """The validated settings of a proximal AL method: defaults filled in, ``inner="auto"``
    resolved for ``problem`` (its ``dim`` and ``regularizer``); an option that does not
    apply to ``method`` (and its inner solver) is a TypeError."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS + BASELINES}")
    inner = options.get("inner", "auto")
    if method == "cproxal" and "inner" in options:
        raise TypeError("solve() option 'inner' does not apply to method 'cproxal' "
                        "(it solves the pooled subproblem by proximal Newton)")
    if inner not in INNER:
        raise ValueError(f"inner must be one of {INNER}, got {inner!r}")
    chosen = ""
    if inner == "auto":
        inner = choose_inner(problem.dim, problem.regularizer)
        chosen = f", chosen by inner='auto' for d={problem.dim}"
    own = ADMM_OPTIONS if method == "fedproxal" and inner == "admm" else NEWTON_OPTIONS
    allowed = dict(OUTER_OPTIONS, **own)
    unknown = sorted(set(options) - set(allowed) - {"inner"})
    if unknown:
        where = f"method {method!r}" + (f" with inner={inner!r}{chosen}"
                                         if method == "fedproxal" else "")
        raise TypeError(f"solve() got options that do not apply to {where}: {unknown}")
    s = dict(allowed, **{k: v for k, v in options.items() if k != "inner"})
    s["beta"] = positive(s["beta"], "beta")
    if "beta_max" in s:
        s["beta_max"] = positive(s["beta_max"], "beta_max")
    s["s_bar"] = positive(s["s_bar"], "s_bar")
    if s["tau_decay"] is not None and not (real(s["tau_decay"]) and 0 < s["tau_decay"] < 1):
        raise ValueError(f"tau_decay must be None or in (0, 1), got {s['tau_decay']!r}")
    if s["tau_rel"] is not None:
        s["tau_rel"] = positive(s["tau_rel"], "tau_rel")
    for name in ("max_outer", "max_inner") + (("local_max_iter",) if "rho" in s else ()):
        s[name] = count(s[name], name)
    if "rho" in s:
        if s["local_solver"] not in ("auto", "newton", "lbfgs"):
            raise ValueError(f"local_solver must be 'auto', 'newton' or 'lbfgs', got "
                             f"{s['local_solver']!r}")
        if s["local_solver"] == "auto":        # no dense d×d Hessians above the limit
            s["local_solver"] = "newton" if problem.dim <= AUTO_NEWTON_MAX_DIM else "lbfgs"
        if not isinstance(s["adaptive_rho"], (bool, np.bool_)):
            raise TypeError(f"adaptive_rho must be True or False, got {s['adaptive_rho']!r}")
    if method == "fedproxal":
        s["inner"] = inner
    return s


def execute(problem, method, eps, settings, fed, *, w0=None, seed=0, resume=None,
            verbose=False, callback=None, deadline=None, start=None):
    """Run a proximal AL method over the federation ``fed`` and return its result
    (``problem`` needs ``dim``, ``regularizer``, ``start_point`` and ``parties``; the
    backends of :mod:`constrfl.federation` and :mod:`constrfl.flower` share this)."""
    start = time.perf_counter() if start is None else start
    fed.deadline = deadline
    if resume is not None:
        s, previous_time = restore(fed, resume), resume.time
    else:
        s = OuterState(k=0, w=problem.start_point(w0, seed), beta=settings["beta"],
                       multipliers=problem.zero_multipliers())
        previous_time = 0.0
    inner = _inner_solver(problem, method, settings, fed, eps)
    report = _Table(verbose, method, problem)
    error = None
    try:
        with interruptible(fed):
            status, message = proximal_al(
                problem, fed, inner, s, eps, max_outer=settings["max_outer"],
                s_bar=settings["s_bar"], tau_decay=settings["tau_decay"],
                tau_rel=settings["tau_rel"], beta_max=settings.get("beta_max", settings["beta"]), report=report,
                callback=callback)
    except SolveStop as stop:
        status, message = stop.status, str(stop)
        error = stop if (stop.__cause__ is not None or stop.status in st.FAILED) else None
    except KeyboardInterrupt:
        status, message = st.INTERRUPTED, "interrupted (KeyboardInterrupt)"
    res = _result(problem, method, s, status, message, error, fed, settings,
                  previous_time + time.perf_counter() - start)
    report.close(res)
    return res


def _inner_solver(problem, method, settings, fed, eps):
    if method == "cproxal":
        return Newton(problem.regularizer, settings["max_inner"], batch=1)
    if settings["inner"] in ("newton", "newton-cg"):
        return Newton(problem.regularizer, settings["max_inner"],
                      cg=settings["inner"] == "newton-cg")
    return ADMM(fed.clients, _rhos(problem, settings["rho"]), problem.regularizer, eps,
                max_iter=settings["max_inner"],
                adaptive_rho=bool(settings["adaptive_rho"]),
                local_max_iter=settings["local_max_iter"],
                local_solver=settings["local_solver"])


def _result(problem, method, s, status, message, error, fed, settings, elapsed):
    """The SolveResult at the last completed outer iteration."""
    last = s.history[-1] if s.history else None
    if last is not None:
        kkt = KKT(last["stationarity"], last["feasibility"], last["complementarity"],
                  last["definition1"], problem.regularizer.exact_dist)
        objective = last["objective"]
    else:                                    # no KKT round completed: nothing measured
        kkt, objective = KKT(np.nan, np.nan, np.nan, np.nan), np.nan
    mults = dict(problem.zero_multipliers(), **s.multipliers)
    return SolveResult(w=s.w, status=status, message=message, objective=objective,
                       multipliers=mults, kkt=kkt, method=method, outer_iterations=s.k,
                       inner_iterations=s.inner_iterations, rounds=fed.traffic.rounds,
                       bytes_up=fed.traffic.bytes_up, bytes_down=fed.traffic.bytes_down,
                       time=elapsed, history=s.history, error=error,
                       state=checkpoint(problem, fed, s),
                       settings=dict(settings, method=method))


def _resumed(problem, res, method, options):
    """Method, options and start point of a resumed solve, checked against ``res``."""
    if not isinstance(res, SolveResult) or res.state is None:
        raise TypeError("resume must be a SolveResult with its solver state "
                        "(from cf.solve or cf.load_result)")
    if res.status not in st.RESUMABLE:
        raise ValueError(f"a solve that ended {res.status!r} cannot be resumed "
                         f"(resumable: {', '.join(st.RESUMABLE)})")
    saved = res.state["problem"]
    owners = problem.owners
    if saved["dim"] != problem.dim or list(saved["owners"]) != owners:
        raise ValueError(f"resume: the result belongs to another problem (dimension "
                         f"{saved['dim']}, owners {list(saved['owners'])}; this one: "
                         f"{problem.dim}, {owners})")
    settings = dict(res.settings)
    saved_method = settings.pop("method")
    if method not in ("fedproxal", saved_method):     # "fedproxal" is solve()'s default
        raise ValueError(f"resume: the result is from method {saved_method!r}, not {method!r}")
    limit = "rounds" if saved_method in BASELINES else "max_outer"
    for k, v in options.items():
        if k != limit and not _same(settings.get(k), v):
            raise ValueError(f"resume: option {k!r} differs from the resumed solve's "
                             f"({settings.get(k)!r}); only {limit!r} may change")
    if res.status == st.MAX_ITERATIONS and not options.get(limit, 0) > settings[limit]:
        raise ValueError(f"resume: the solve stopped at {limit}={settings[limit]}; pass a "
                         f"larger {limit} to continue it")
    settings.update(options)
    return saved_method, settings, None


def _same(a, b):
    try:
        return bool(np.all(np.asarray(a) == np.asarray(b)))
    except Exception:
        return False


def _tolerances(tol):
    pair = tol if isinstance(tol, (tuple, list)) else (tol, tol)
    if len(pair) != 2:
        raise ValueError(f"tol must be a number or a pair (eps1, eps2), got {tol!r}")
    return positive(pair[0], "tol (eps1)"), positive(pair[1], "tol (eps2)")


def _rhos(problem, rho):
    n = problem.n_clients
    if isinstance(rho, str):
        if rho == "auto":
            return None
        if rho != "samples":
            raise ValueError(f"rho must be 'auto', a number, an array or 'samples', "
                             f"got {rho!r}")
        counts = problem.client_samples()
        if counts is None:
            raise ValueError("rho='samples' needs the clients' row counts, which this "
                             "server does not know; give rho as numbers")
        counts = np.asarray(counts, dtype=float)
        for name, k in zip(problem.client_names, counts):
            if k <= 0:
                raise ValueError(f"rho='samples': client {name!r} holds no data rows")
        return 0.1 * counts / counts.mean()
    if isinstance(rho, (bool, np.bool_)):
        raise ValueError(f"rho must be 'auto', a number, an array or 'samples', "
                         f"got {rho!r}")
    try:
        arr = np.asarray(rho, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"rho must be 'auto', a number, an array or 'samples', "
                         f"got {rho!r}") \
            from None
    if arr.ndim == 0:
        return np.full(n, positive(float(arr), "rho"))
    if arr.shape != (n,):
        raise ValueError(f"rho has shape {arr.shape}, expected a scalar or ({n},) "
                         "(one value per client)")
    for name, r in zip(problem.client_names, arr):
        if not np.isfinite(r) or r <= 0:
            raise ValueError(f"rho for client {name!r} must be finite and positive, got {r}")
    return arr


class _Table:
    """The ``verbose=True`` iteration table (one row per outer iteration), OSQP-like:
    a header, the rows and a footer with the status."""

    COLS = ("iter", "tau", "inner", "rounds", "step", "stationarity", "feasibility",
            "complement", "objective")

    def __init__(self, verbose, method, problem):
        self.on = verbose
        if self.on:
            print(f"constrfl {method}: {problem.n_clients} clients, dim {problem.dim}, "
                  f"regularizer {problem.regularizer!r}")
            print("{:>5} {:>9} {:>6} {:>7} {:>9} {:>12} {:>11} {:>10} {:>15}".format(*self.COLS))

    def __call__(self, r):
        if self.on:
            print(f"{r['k']:5d} {r['tau']:9.2e} {r['inner_iterations']:6d} {r['rounds']:7d} "
                  f"{r['step']:9.2e} {r['stationarity']:12.3e} {r['feasibility']:11.3e} "
                  f"{r['complementarity']:10.2e} {r['objective']:15.8e}")

    def close(self, res):
        if self.on:
            print(f"status: {res.status} ({res.message}); time {res.time:.3f}s")
