"""cvxpy ground truth: the pooled problem (5) solved centrally, compared side by side.

Multiplier convention (ours and cvxpy's agree): Lagrangian ``F + μᵀc + νᵀh`` with μ ≥ 0
for ``c ≤ 0``; cvxpy's ``(expr <= 0).dual_value`` is μ.  For ``expr == 0`` cvxpy
returns ν with the same sign convention (checked in the tests through stationarity).
"""
from __future__ import annotations

import numbers
import time
import warnings
from dataclasses import dataclass

import numpy as np

from .functions import NoCvxpyForm
from .kkt import as_multipliers, kkt as compute_kkt
from .problem import Problem
from .result import KKT, Multipliers, SolveResult

__all__ = ["certify", "Certificate", "pooled_cvxpy"]

TIGHT = dict(tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9,
             static_regularization_constant=1e-10, max_iter=500)


@dataclass(repr=False)
class Certificate:
    """Our point and the cvxpy reference, with the same KKT code applied to both.

    ``ok`` is the verdict: cvxpy ended "optimal", ``objective_gap ≤ gap_tol`` and our
    point is (kkt_tol, kkt_tol)-optimal in the sense of Definition 1
    (``kkt.meets(kkt_tol, kkt_tol)``: stationarity and the feasibility/complementarity
    residual).  ``repr`` is one line with the verdict; ``str`` the side-by-side table.
    """

    w: np.ndarray
    objective: float
    kkt: KKT
    reference_w: np.ndarray
    reference_objective: float
    reference_multipliers: dict
    reference_kkt: KKT
    reference_status: str
    reference_time: float
    objective_gap: float          # |F(w) − F*| / |F*| (|F(w) − F*| when F* = 0)
    w_distance: float             # ‖w − w*‖∞
    multiplier_distance: float    # max over owners of ‖(μ, ν) − (μ*, ν*)‖∞ (nan if not given)
    reference_projection: float = 0.0   # ‖w* − cvxpy's point‖∞ (projection onto dom P)
    gap_tol: float = 1e-6
    kkt_tol: float = 1e-6

    @property
    def ok(self):
        return bool(self.reference_status == "optimal" and self.objective_gap <= self.gap_tol
                    and self.kkt.meets(self.kkt_tol, self.kkt_tol))

    def __repr__(self):
        return (f"Certificate(ok={self.ok}, objective_gap={self.objective_gap:.2e}, "
                f"stationarity={self.kkt.stationarity:.2e}, "
                f"definition1={self.kkt.definition1:.2e}, w_distance={self.w_distance:.2e}, "
                f"reference={self.reference_status!r})")

    def __str__(self):
        rows = [("objective", self.objective, self.reference_objective)]
        rows += [(k, getattr(self.kkt, k), getattr(self.reference_kkt, k))
                 for k in ("stationarity", "feasibility", "complementarity", "definition1")]
        lines = [f"{'':18}{'constrfl':>16}{'cvxpy':>16}"]
        lines += [f"{name:18}{a:16.8e}{b:16.8e}" for name, a, b in rows]
        lines.append(f"relative objective gap {self.objective_gap:.2e}, "
                     f"|w - w*|inf {self.w_distance:.2e}, "
                     f"|mult - mult*|inf {self.multiplier_distance:.2e} "
                     f"(cvxpy: {self.reference_status}, {self.reference_time:.3f}s)")
        if self.reference_projection:
            lines.append(f"cvxpy's point projected onto dom P (moved "
                         f"{self.reference_projection:.2e})")
        lines.append(f"ok: {self.ok} (gap_tol {self.gap_tol:.1e}, kkt_tol {self.kkt_tol:.1e})")
        return "\n".join(lines)


def _cvx(f, w, where):
    try:
        return f.cvxpy(w)
    except NoCvxpyForm as err:
        raise TypeError(f"certify: {where}: {err}; no cvxpy ground truth is possible") from None


def pooled_cvxpy(problem):
    """The pooled problem in cvxpy: ``(cp.Problem, w, {owner: (ineq_cons, eq_cons)})``.

    Raises ValueError for nonconvex problems and TypeError for functions without a
    cvxpy form (e.g. :class:`~constrfl.functions.Custom`).
    """
    import cvxpy as cp
    for p in problem.parties:
        for slot, f in p._slots():
            if not f.is_convex:
                raise ValueError(f"certify: {p._where()}: {slot} is {f.curvature}; a "
                                 "nonconvex problem has no convex ground truth")
    w = cp.Variable(problem.dim)
    reg, cons = problem.regularizer.cvxpy(w)
    obj = reg
    owned = {}
    for p in problem.parties:
        if p.objective is not None:
            obj = obj + _cvx(p.objective, w, f"{p._where()}: objective")
        ineq = [_cvx(c, w, f"{p._where()}: constraints[{k}]") <= 0
                for k, c in enumerate(p.constraints)]
        eq = [_cvx(h, w, f"{p._where()}: equalities[{k}]") == 0
              for k, h in enumerate(p.equalities)]
        owned[p.name] = (ineq, eq)
        cons = cons + ineq + eq
    return cp.Problem(cp.Minimize(obj), cons), w, owned


def _duals(cons, n):
    if not cons:
        return np.zeros(n)
    return np.concatenate([np.atleast_1d(np.asarray(c.dual_value, dtype=np.float64)).ravel()
                           for c in cons])


def _point(problem, result, multipliers):
    """``(w, multipliers)`` from a SolveResult or a point; named errors otherwise."""
    if not isinstance(problem, Problem):
        raise TypeError(f"certify: problem must be a constrfl.Problem, got "
                        f"{type(problem).__name__}")
    if isinstance(result, SolveResult):
        return result.w, result.multipliers
    w = np.asarray(result)
    if w.dtype.kind not in "iuf":
        raise TypeError(f"certify: result must be a SolveResult or a point w (an array of "
                        f"{problem.dim} real numbers), got {result!r:.60} "
                        f"({type(result).__name__})")
    if w.shape != (problem.dim,):
        raise ValueError(f"certify: the point w has shape {w.shape}, expected "
                         f"({problem.dim},)")
    return w.astype(np.float64), multipliers


def _solver(solver):
    """The name of an installed cvxpy solver, upper case; named errors otherwise."""
    import cvxpy as cp
    installed = cp.installed_solvers()
    if not isinstance(solver, str):
        raise TypeError(f"certify: solver must be the name of a cvxpy solver (a string), "
                        f"got {solver!r}; installed: {installed}")
    if solver.upper() not in installed:
        raise ValueError(f"certify: solver {solver!r} is not an installed cvxpy solver; "
                         f"installed: {installed}")
    return solver.upper()


def certify(problem, result, multipliers=None, *, solver="CLARABEL", atol=1e-6,
            gap_tol=1e-6, kkt_tol=1e-6, **solver_options):
    """Solve the pooled problem with cvxpy (Clarabel, tight tolerances by default) and
    compare it with ``result`` (a SolveResult, or a point ``w`` with ``multipliers``;
    without them :func:`constrfl.kkt` estimates ours).

    Clarabel runs with tolerances 1e-9 first and with its defaults if that does not
    end "optimal".  ``atol`` is passed to :func:`constrfl.kkt` for the reference point
    only (an interior-point solution sits near, not on, kinks, bounds and μ = 0).
    The reference point is projected onto dom P (``P.prox(w*, 0)``) when P's value is
    inf there: a solver's point may lie 1e-10 (Clarabel) to 1e-5 (SCS) outside an
    indicator's set, which would make the reference objective inf; the distance moved
    is ``reference_projection``.  ``Certificate.ok`` judges against ``gap_tol`` and
    ``kkt_tol``.
    """
    import cvxpy as cp
    w, multipliers = _point(problem, result, multipliers)
    solver = _solver(solver)
    gap_tol, kkt_tol = _tolerance(gap_tol, "gap_tol"), _tolerance(kkt_tol, "kkt_tol")
    prob, wvar, owned = pooled_cvxpy(problem)
    opts = dict(TIGHT) if solver == "CLARABEL" and not solver_options else solver_options
    t0 = time.perf_counter()
    failure = None
    for attempt in ([opts, {}] if opts else [{}]):   # tight first, then the defaults
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")       # "inaccurate" is judged below
                prob.solve(solver=solver, **attempt)
        except cp.SolverError as err:
            failure = err
            continue
        if prob.status == cp.OPTIMAL:
            break
    elapsed = time.perf_counter() - t0
    if wvar.value is None:
        raise RuntimeError(f"certify: cvxpy/{solver} returned status {prob.status!r} "
                           "and no solution"
                           + (f" (solver error: {failure})" if failure is not None else ""))
    raw = np.asarray(wvar.value, dtype=np.float64)
    P = problem.regularizer
    ref_w = raw if np.isfinite(P.value(raw)) else P.prox(raw, 0.0)   # onto dom P
    ref_mult = {p.name: Multipliers(np.maximum(_duals(owned[p.name][0], p.n_ineq), 0.0),
                                    _duals(owned[p.name][1], p.n_eq))
                for p in problem.parties}
    F, F_ref = problem.objective(w), problem.objective(ref_w)
    ours = compute_kkt(problem, w, multipliers)
    ref = compute_kkt(problem, ref_w, ref_mult, atol=atol)
    gap = abs(F - F_ref) / abs(F_ref) if F_ref != 0 else abs(F - F_ref)
    if multipliers is None:
        mdist = float("nan")
    else:
        mine = as_multipliers(problem, multipliers)
        mdist = max((float(np.max(np.abs(np.concatenate([mine[k].ineq - m.ineq,
                                                          mine[k].eq - m.eq])), initial=0.0))
                     for k, m in ref_mult.items()), default=0.0)
    return Certificate(w=w, objective=F, kkt=ours, reference_w=ref_w,
                       reference_objective=F_ref, reference_multipliers=ref_mult,
                       reference_kkt=ref, reference_status=prob.status,
                       reference_time=elapsed, objective_gap=gap,
                       w_distance=float(np.max(np.abs(w - ref_w))),
                       multiplier_distance=mdist,
                       reference_projection=float(np.max(np.abs(ref_w - raw), initial=0.0)),
                       gap_tol=gap_tol, kkt_tol=kkt_tol)


def _tolerance(x, name):
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not x > 0:
        raise ValueError(f"certify: {name} must be a positive number, got {x!r}")
    return float(x)
