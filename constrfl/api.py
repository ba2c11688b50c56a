"""``constrfl.solve``: one call, a :class:`~constrfl.result.SolveResult` back."""
from __future__ import annotations

import numbers
import time

import numpy as np

from .kkt import kkt as compute_kkt
from .problem import Problem
from .result import SolveResult
from .solvers.proxal import CentralSubsolver, FederatedSubsolver, proximal_al

__all__ = ["solve", "METHODS"]

METHODS = ("fedproxal", "cproxal")
BASELINES = ("fedavg", "fedavgm", "fedadagrad", "fedyogi", "fedadam", "fedcada", "fedmid",
             "feddualavg", "fedmid-osp", "feddualavg-osp")


def solve(problem, method="fedproxal", tol=1e-6, *, beta=100.0, rho=0.1, adaptive_rho=True, w0=None, seed=0,
          max_outer=200, max_inner=10000, s_bar=1e-2, tau_decay=0.2, q=0.9,
          local_max_iter=100, local_solver="newton", verbose=False, callback=None, **baseline_options):
    """Solve problem (5) by the proximal augmented Lagrangian method.

    Parameters
    ----------
    problem : Problem
    method : ``"fedproxal"`` (Algorithm 1 with the ADMM of Algorithm 2) or ``"cproxal"``
        (Algorithm 3: the same outer loop, subproblems solved on pooled data).
    tol : ε or ``(ε₁, ε₂)``: stationarity and feasibility tolerances of Definition 1.
    beta : penalty β > 0 of the augmented Lagrangian.
    rho : ADMM penalty: a scalar for every client, one value per client, or
        ``"samples"`` for ρᵢ = 0.1·Nᵢ / meanⱼ Nⱼ (Remark 9; Nᵢ the client's rows).
    adaptive_rho : rescale ρ inside the ADMM by residual balancing (see
        :func:`constrfl.solvers.admm.admm`); ``False`` keeps ρ fixed as in the paper.
    w0 : starting point; default a point on the unit sphere drawn from ``seed``
        (the paper's choice), projected onto dom P.
    max_outer, max_inner : caps on outer iterations and ADMM iterations per subproblem.
    s_bar, tau_decay : subproblem tolerances τ_k = s̄·rᵏ (``tau_decay=r``), or the
        paper's τ_k = s̄/(k+1)² with ``tau_decay=None``; never below ε₁/10.
    q : geometric decay of the clients' local tolerances inside the ADMM (§4).
    local_max_iter : iterations per local solve.
    local_solver : the clients' solver for (19): ``"newton"`` (semismooth Newton with a
        line search; falls back to L-BFGS for functions without Hessians) or
        ``"lbfgs"`` (scipy's L-BFGS-B, gradients only).
    verbose : print one row per outer iteration.
    callback : called after every outer iteration with a dict (the history record plus
        ``w``, ``w_prev``, ``beta``, ``multipliers_prev`` and ``multipliers``).
    **baseline_options : options of the baseline methods (FedAvg, FedAdam, ...; see
        :mod:`constrfl.solvers.baselines`); an error for the proximal AL methods.

    ``status`` is ``"optimal"`` only when the KKT residuals, recomputed at the returned
    point, meet ``tol``; otherwise ``message`` names the residual that failed.
    """
    start = time.perf_counter()
    _check_problem(problem)
    eps1, eps2 = _tolerances(tol)
    if method in BASELINES:
        from .solvers.baselines import solve_baseline
        return solve_baseline(problem, method, (eps1, eps2), w0=w0, seed=seed,
                              verbose=verbose, callback=callback, **baseline_options)
    if baseline_options:
        raise TypeError(f"solve() got unexpected options for method {method!r}: "
                        f"{sorted(baseline_options)}")
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
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable")
    w0 = _start_point(problem, w0, seed)

    if method == "fedproxal":
        sub = FederatedSubsolver(problem, _rhos(problem, rho), q, max_inner, local_max_iter,
                                 bool(adaptive_rho), local_solver)
    elif method == "cproxal":
        sub = CentralSubsolver(problem, local_max_iter)
    else:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS + BASELINES}")

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


def _start_point(problem, w0, seed):
    d = problem.dim
    if w0 is None:
        if not isinstance(seed, numbers.Integral):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        v = np.random.default_rng(seed).standard_normal(d)
        w0 = v / np.linalg.norm(v)
    else:
        w0 = np.array(w0, dtype=np.float64)
        if w0.shape != (d,):
            raise ValueError(f"w0 has shape {w0.shape}, expected ({d},)")
        if not np.all(np.isfinite(w0)):
            raise ValueError("w0 contains NaN or inf")
    return problem.regularizer.prox(w0, 0.0)


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
