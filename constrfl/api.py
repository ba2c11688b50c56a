"""``constrfl.solve``: one call, a :class:`~constrfl.result.SolveResult` back."""
from __future__ import annotations

import inspect
import numbers
import time

import numpy as np

from .kkt import kkt as compute_kkt
from .problem import Problem
from .result import SolveResult
from .solvers.proxal import FederatedSubsolver, NewtonSubsolver, proximal_al

__all__ = ["solve", "METHODS", "BASELINES"]

METHODS = ("fedproxal", "cproxal")
BASELINES = ("fedavg", "fedavgm", "fedadagrad", "fedyogi", "fedadam", "fedcada", "fedmid",
             "feddualavg", "fedmid-osp", "feddualavg-osp")


def solve(problem, method="fedproxal", tol=1e-6, *, w0=None, seed=0, verbose=False,
          callback=None, **options):
    """Solve problem (5); returns a :class:`~constrfl.result.SolveResult`.

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
    callback : called after every outer iteration with a dict (the history record plus
        ``w``, ``w_prev``, ``beta``, ``multipliers_prev`` and ``multipliers``).

    Options of ``fedproxal`` and ``cproxal``
    ----------------------------------------
    beta : penalty β > 0 of the augmented Lagrangian [100].
    inner : ``fedproxal``'s subproblem solver: ``"admm"`` (Algorithm 2; each round a
        client uploads two d-vectors and a scalar) or ``"newton"`` (federated
        proximal Newton: each client uploads its local AL value, gradient and Hessian,
        d(d+1)/2 floats, disclosing local curvature; one round per evaluation)
        [``"admm"``].
    rho : ADMM penalty: a scalar for every client, one value per client, or
        ``"samples"`` for ρᵢ = 0.1·Nᵢ / meanⱼ Nⱼ (Remark 9; Nᵢ the client's rows) [0.1].
    adaptive_rho : rescale ρ inside the ADMM by residual balancing (see
        :func:`constrfl.solvers.admm.admm`); ``False`` keeps ρ fixed as in the paper
        [True].
    max_outer, max_inner : caps on outer iterations and on ADMM iterations (or Newton
        steps) per subproblem [200, 10000].
    s_bar, tau_decay : subproblem tolerances τ_k = s̄·rᵏ (``tau_decay=r``), or the
        paper's τ_k = s̄/(k+1)² with ``tau_decay=None``; never below ε₁/10 [1e-2, 0.2].
    q : geometric decay of the clients' local tolerances inside the ADMM (§4) [0.9].
    local_max_iter : iterations per local solve [100].
    local_solver : the clients' solver for (19): ``"newton"`` (semismooth Newton with a
        line search; falls back to L-BFGS for functions without Hessians) or
        ``"lbfgs"`` (scipy's L-BFGS-B, gradients only) [``"newton"``].

    ``status`` is ``"optimal"`` only when the KKT residuals, recomputed at the returned
    point, meet ``tol``; otherwise ``message`` names the residual that failed.
    """
    start = time.perf_counter()
    _check_problem(problem)
    eps = _tolerances(tol)
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable")
    if method in BASELINES:
        from .solvers.baselines import solve_baseline
        _check_options(method, options, inspect.signature(solve_baseline).parameters)
        return solve_baseline(problem, method, eps, w0=w0, seed=seed, verbose=verbose,
                              callback=callback, **options)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS + BASELINES}")
    _check_options(method, options, PROXAL_OPTIONS)
    w0 = problem.start_point(w0, seed)
    return _proximal_al(problem, method, eps, w0, verbose, callback, start,
                        **dict(PROXAL_OPTIONS, **options))


PROXAL_OPTIONS = dict(beta=100.0, inner="admm", rho=0.1, adaptive_rho=True, max_outer=200,
                      max_inner=10000, s_bar=1e-2, tau_decay=0.2, q=0.9, local_max_iter=100,
                      local_solver="newton")


def _proximal_al(problem, method, eps, w0, verbose, callback, start, *, beta, inner, rho,
                 adaptive_rho, max_outer, max_inner, s_bar, tau_decay, q, local_max_iter,
                 local_solver):
    eps1, eps2 = eps
    beta = _positive(beta, "beta")
    s_bar = _positive(s_bar, "s_bar")
    if tau_decay is not None and not (isinstance(tau_decay, numbers.Real)
                                      and 0 < tau_decay < 1):
        raise ValueError(f"tau_decay must be None or in (0, 1), got {tau_decay!r}")
    if not (isinstance(q, numbers.Real) and 0 < q < 1):
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    for name, val in (("max_outer", max_outer), ("max_inner", max_inner),
                      ("local_max_iter", local_max_iter)):
        if not isinstance(val, numbers.Integral) or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    if local_solver not in ("newton", "lbfgs"):
        raise ValueError(f"local_solver must be 'newton' or 'lbfgs', got {local_solver!r}")
    if inner not in ("admm", "newton"):
        raise ValueError(f"inner must be 'admm' or 'newton', got {inner!r}")

    if method == "cproxal":
        sub = NewtonSubsolver(problem, max_inner)
    elif inner == "newton":
        sub = NewtonSubsolver(problem, max_inner, federated=True)
    else:
        sub = FederatedSubsolver(problem, _rhos(problem, rho), q, max_inner, local_max_iter,
                                 bool(adaptive_rho), local_solver)

    report = _Table(verbose, method, problem)
    w, status, message, history, outer, inner = proximal_al(
        problem, sub, w0, eps1, eps2, beta, s_bar, tau_decay, max_outer, report, callback)
    mults = sub.multipliers()
    final = compute_kkt(problem, w, mults)
    if status == "optimal" and not final.meets(eps1, eps2):   # recomputed from scratch
        status = "max_iterations"
        message = "recomputed KKT residuals miss tol: " + "; ".join(final.failures(eps1, eps2))
    res = SolveResult(w=w, status=status, message=message, objective=problem.objective(w),
                      multipliers=mults, kkt=final, method=method, outer_iterations=outer,
                      inner_iterations=inner, rounds=sub.traffic.rounds,
                      bytes_up=sub.traffic.bytes_up, bytes_down=sub.traffic.bytes_down,
                      time=time.perf_counter() - start, history=history)
    report.close(res)
    return res


def _check_options(method, options, allowed):
    unknown = sorted(set(options) - set(allowed) - {"problem", "method", "tol"})
    if unknown:
        raise TypeError(f"solve() got unexpected options for method {method!r}: {unknown}")


def _check_problem(problem):
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a constrfl.Problem, got {type(problem).__name__}")


def _positive(x, name):
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not np.isfinite(x) or x <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {x!r}")
    return float(x)


def _tolerances(tol):
    pair = tol if isinstance(tol, (tuple, list)) else (tol, tol)
    if len(pair) != 2:
        raise ValueError(f"tol must be a number or a pair (eps1, eps2), got {tol!r}")
    return _positive(pair[0], "tol (eps1)"), _positive(pair[1], "tol (eps2)")


def _rhos(problem, rho):
    n = problem.n_clients
    if isinstance(rho, str):
        if rho != "samples":
            raise ValueError(f"rho must be a number, an array or 'samples', got {rho!r}")
        counts = np.array([c.n_samples for c in problem.clients], dtype=float)
        for c, k in zip(problem.clients, counts):
            if k <= 0:
                raise ValueError(f"rho='samples': client {c.name!r} holds no data rows")
        return 0.1 * counts / counts.mean()
    arr = np.asarray(rho, dtype=np.float64)
    if arr.ndim == 0:
        return np.full(n, _positive(float(arr), "rho"))
    if arr.shape != (n,):
        raise ValueError(f"rho has shape {arr.shape}, expected a scalar or ({n},) "
                         "(one value per client)")
    for c, r in zip(problem.clients, arr):
        if not np.isfinite(r) or r <= 0:
            raise ValueError(f"rho for client {c.name!r} must be finite and positive, got {r}")
    return arr


class _Table:
    """The ``verbose=True`` iteration table (one row per outer iteration)."""

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
