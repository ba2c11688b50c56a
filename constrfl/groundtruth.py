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
from .residuals import as_multipliers, kkt as compute_kkt
from .problem import Problem
from .result import KKT, Multipliers, SolveResult

__all__ = ["certify", "Certificate", "gap_bound", "pooled_cvxpy"]

TIGHT = dict(tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9,
             static_regularization_constant=1e-10, max_iter=500)
#: The reference's own accuracy in the bound on the objective gap: the relative duality
#: gap Clarabel is asked for (it also covers the rounding of F).
REFERENCE_GAP = TIGHT["tol_gap_rel"]


@dataclass(repr=False)
class Certificate:
    """Our point and the cvxpy reference, with the same KKT code applied to both.

    ``ok`` is the verdict, ``failures`` the tests that failed (``bool(cert)`` is
    ``cert.ok``).  For a claimed solution (any status but "infeasible", or a bare point):
    cvxpy ended "optimal", ``objective_gap ≤ gap_limit`` and our point is
    (kkt_tol, kkt_tol)-optimal in the sense of Definition 1 (``kkt.meets``).  For a
    result that says "infeasible": cvxpy says "infeasible" too.  ``gap_limit`` is
    ``gap_tol`` when given, else ``gap_bound``, the gap that kkt_tol-optimality allows
    (:func:`gap_bound`).  ``repr`` is one line with the verdict; ``str`` the table.
    Without a cvxpy solution (cvxpy says "infeasible") the reference fields are NaN.
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
    multiplier_distance: float    # max over parties of ‖(μ, ν) − (μ*, ν*)‖∞ (nan if not given)
    reference_projection: float = 0.0   # ‖w* − cvxpy's point‖∞ (projection onto dom P)
    gap_bound: float = float("nan")     # relative gap allowed by kkt_tol (gap_bound())
    gap_tol: float | None = None        # a fixed relative gap instead of gap_bound
    kkt_tol: float = 1e-6
    status: str | None = None           # the result's status (None for a bare point)

    @property
    def solved(self):
        """cvxpy gave a reference point (it did unless it says "infeasible")."""
        return self.reference_status != "infeasible"

    @property
    def gap_limit(self):
        return self.gap_bound if self.gap_tol is None else self.gap_tol

    @property
    def failures(self):
        """The failed tests, each named with its values; empty when ``ok``."""
        if self.status == "infeasible":
            return ([] if self.reference_status == "infeasible" else
                    [f"constrfl says infeasible, cvxpy {self.reference_status!r}"])
        out = [] if self.reference_status == "optimal" else [
            f"cvxpy status {self.reference_status!r}, not 'optimal'"]
        if self.solved and not self.objective_gap <= self.gap_limit:
            which = "gap_tol" if self.gap_tol is not None else "bound from kkt_tol"
            out.append(f"objective gap {self.objective_gap:.2e} > {self.gap_limit:.2e} "
                       f"({which})")
        return out + self.kkt.failures(self.kkt_tol, self.kkt_tol)

    @property
    def ok(self):
        return not self.failures

    def __bool__(self):
        return self.ok

    def __repr__(self):
        failures = self.failures
        failed = f", failed={failures}" if failures else ""
        return (f"Certificate(ok={not failures}{failed}, "
                f"objective_gap={self.objective_gap:.2e}, "
                f"gap_limit={self.gap_limit:.2e}, stationarity={self.kkt.stationarity:.2e}, "
                f"definition1={self.kkt.definition1:.2e}, reference={self.reference_status!r})")

    def __str__(self):
        rows = [("objective", self.objective, self.reference_objective)]
        rows += [(k, getattr(self.kkt, k), getattr(self.reference_kkt, k))
                 for k in ("stationarity", "feasibility", "complementarity", "definition1")]
        lines = [f"{'':18}{'constrfl':>16}{'cvxpy':>16}"]
        lines += [f"{name:18}{a:16.8e}{b:16.8e}" for name, a, b in rows]
        if self.solved:
            lines.append(f"relative objective gap {self.objective_gap:.2e} (allowed "
                         f"{self.gap_limit:.2e}), |w - w*|inf {self.w_distance:.2e}, "
                         f"|mult - mult*|inf {self.multiplier_distance:.2e}")
        lines.append(f"constrfl: {self.status or 'a point'}; cvxpy: {self.reference_status} "
                     f"({self.reference_time:.3f}s)")
        if self.reference_projection:
            lines.append(f"cvxpy's point projected onto dom P (moved "
                         f"{self.reference_projection:.2e})")
        failures = self.failures
        lines.append(f"ok: {not failures}" + (f", failed: {'; '.join(failures)}"
                                              if failures else "")
                     + f" (kkt_tol {self.kkt_tol:.1e})")
        return "\n".join(lines)


def _cvx(f, w, where):
    try:
        return f.cvxpy(w)
    except NoCvxpyForm as err:
        raise TypeError(f"certify: {where}: {err}; no cvxpy ground truth is possible") from None


def pooled_cvxpy(problem):
    """The pooled problem in cvxpy: ``(cp.Problem, w, {party: (ineq_cons, eq_cons)})``.

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


def _fitted(problem, result):
    """``(problem, result)``, those of a fitted estimator for one."""
    if not isinstance(problem, Problem) and hasattr(problem, "result_"):
        if not hasattr(problem, "problem_"):
            raise TypeError(f"certify: {type(problem).__name__} has no problem_ (fitted "
                            "by an earlier version?): fit it again")
        return problem.problem_, problem.result_ if result is None else result
    if result is None:
        raise TypeError("certify: pass the result (a SolveResult or a point w) to check")
    return problem, result


def _point(problem, result, multipliers):
    """``(w, multipliers)`` from a SolveResult or a point; named errors otherwise."""
    if not isinstance(problem, Problem):
        raise TypeError(f"certify: problem must be a constrfl.Problem or a fitted "
                        f"estimator, got {type(problem).__name__}")
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


def certify(problem, result=None, multipliers=None, *, solver="CLARABEL", atol=1e-6,
            gap_tol=None, kkt_tol=1e-6, **solver_options):
    """Solve the pooled problem with cvxpy (Clarabel, tight tolerances by default) and
    compare it with ``result`` (a SolveResult, or a point ``w`` with ``multipliers``;
    without them :func:`constrfl.residuals` estimates ours).  ``problem`` may also be a
    fitted estimator (``cf.certify(clf)`` or ``cf.certify(clf, clf.result_)``): its
    ``problem_`` (the problem it solved, in its own coordinates) against its
    ``result_`` by default.

    Clarabel runs with tolerances 1e-9 first and with its defaults if that does not
    end "optimal" or "infeasible".  ``atol`` is passed to :func:`constrfl.residuals` for the
    reference point only (an interior-point solution sits near, not on, kinks, bounds
    and μ = 0).  The reference point is projected onto dom P (``P.prox(w*, 0)``) when
    P's value is inf there: a solver's point may lie 1e-10 (Clarabel) to 1e-5 (SCS)
    outside an indicator's set, which would make the reference objective inf; the
    distance moved is ``reference_projection``.  ``Certificate.ok`` judges the gap
    against ``gap_tol`` when given, else against :func:`gap_bound` at ``kkt_tol``, and
    our KKT residuals against ``kkt_tol``.  A result that says "infeasible" is judged
    by cvxpy's status; a cvxpy "infeasible" gives a certificate without reference
    point, any other cvxpy failure a RuntimeError.
    """
    problem, result = _fitted(problem, result)
    w, multipliers = _point(problem, result, multipliers)
    solver = _solver(solver)
    kkt_tol = _tolerance(kkt_tol, "kkt_tol")
    gap_tol = None if gap_tol is None else _tolerance(gap_tol, "gap_tol")
    prob, wvar, owned = pooled_cvxpy(problem)
    elapsed = _solve(prob, wvar, solver, solver_options)
    ours = compute_kkt(problem, w, multipliers)
    mine = ours.multipliers if multipliers is None else as_multipliers(problem, multipliers)
    common = dict(w=w, objective=problem.objective(w), kkt=ours,
                  reference_status=prob.status, reference_time=elapsed, gap_tol=gap_tol,
                  kkt_tol=kkt_tol, status=getattr(result, "status", None))
    if wvar.value is None:
        return _without_reference(problem, **common)
    raw = np.asarray(wvar.value, dtype=np.float64)
    P = problem.regularizer
    ref_w = raw if np.isfinite(P.value(raw)) else P.prox(raw, 0.0)   # onto dom P
    ref_mult = {p.name: Multipliers(np.maximum(_duals(owned[p.name][0], p.n_ineq), 0.0),
                                    _duals(owned[p.name][1], p.n_eq))
                for p in problem.parties}
    F_ref = problem.objective(ref_w)
    ref = compute_kkt(problem, ref_w, ref_mult, atol=atol)
    return Certificate(**common, reference_w=ref_w, reference_objective=F_ref,
                       reference_multipliers=ref_mult, reference_kkt=ref,
                       objective_gap=_relative(common["objective"] - F_ref, F_ref),
                       w_distance=float(np.max(np.abs(w - ref_w))),
                       multiplier_distance=(float("nan") if multipliers is None
                                            else _distance(mine, ref_mult)),
                       reference_projection=float(np.max(np.abs(ref_w - raw), initial=0.0)),
                       gap_bound=gap_bound(w, mine, ref_w, ref_mult, F_ref, kkt_tol,
                                           ref.definition1))


def gap_bound(w, multipliers, ref_w, ref_multipliers, ref_objective, kkt_tol,
              ref_definition1):
    """The relative objective gap |F(w) − F*|/|F*| that a (kkt_tol, kkt_tol)-optimal
    point may have on a convex problem, with the reference (w*, λ*) standing in for
    an exact solution (x°, λ°).

    Our Lagrangian L is convex and the stationarity residual ≤ ε₁ is a subgradient
    g ∈ ∂L(w) with ‖g‖∞ ≤ ε₁, so for the feasible x°: F° ≥ L(x°) ≥ L(w) + gᵀ(x° − w),
    i.e. F(w) − F° ≤ ε₁‖w − x°‖₁ − μᵀc(w) − νᵀh(w) ≤ ε₁‖w − x°‖₁ + ε₂‖λ‖₁ (Definition 1
    bounds |cⱼ| where μⱼ > 0 and |h| by ε₂).  By strong duality F° ≤ L°(w) ≤ F(w) +
    ε₂‖λ°‖₁ (cⱼ(w) ≤ ε₂).  Hence |F(w) − F°| ≤ ε₁‖w − x°‖₁ + ε₂·max(‖λ‖₁, ‖λ°‖₁), and
    the reference, whose Definition-1 residual is ε₂*, adds ε₂*‖λ*‖₁ and its own
    relative accuracy ``REFERENCE_GAP`` (1e-9; a less accurate solver needs ``gap_tol``).
    For the nuclear norm the stationarity residual is a stand-in and the bound
    approximate.
    """
    ours, theirs = _l1(multipliers), _l1(ref_multipliers)
    absolute = (kkt_tol * (np.abs(w - ref_w).sum() + max(ours, theirs))
                + ref_definition1 * theirs)
    return float(_relative(absolute, ref_objective) + REFERENCE_GAP)


def _l1(multipliers):
    return sum(float(np.abs(m.ineq).sum() + np.abs(m.eq).sum())
               for m in multipliers.values())


def _relative(difference, reference):
    """|difference| / |reference| (|difference| when the reference is 0)."""
    return abs(difference) / (abs(reference) if reference != 0 else 1.0)


def _distance(mine, ref_mult):
    return max((float(np.max(np.abs(np.concatenate([mine[k].ineq - m.ineq,
                                                     mine[k].eq - m.eq])), initial=0.0))
                for k, m in ref_mult.items()), default=0.0)


def _solve(prob, wvar, solver, solver_options):
    """Solve ``prob`` (tight tolerances first for Clarabel, then the solver's defaults,
    until an "optimal" or "infeasible"); returns the seconds it took."""
    import cvxpy as cp
    opts = dict(TIGHT) if solver == "CLARABEL" and not solver_options else solver_options
    t0 = time.perf_counter()
    failure = None
    for attempt in ([opts, {}] if opts else [{}]):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")       # "inaccurate" is judged by ok
                prob.solve(solver=solver, **attempt)
        except cp.SolverError as err:
            failure = err
            continue
        if prob.status in (cp.OPTIMAL, cp.INFEASIBLE):
            break
    if wvar.value is None and prob.status != cp.INFEASIBLE:
        raise RuntimeError(f"certify: cvxpy/{solver} returned status {prob.status!r} "
                           "and no solution"
                           + (f" (solver error: {failure})" if failure is not None else ""))
    return time.perf_counter() - t0


def _without_reference(problem, **common):
    """The certificate when cvxpy found the problem infeasible: no reference point."""
    nan = float("nan")
    return Certificate(**common, reference_w=np.full(problem.dim, nan),
                       reference_objective=nan, reference_multipliers={},
                       reference_kkt=KKT(nan, nan, nan, nan), objective_gap=nan,
                       w_distance=nan, multiplier_distance=nan)


def _tolerance(x, name):
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not x > 0:
        raise ValueError(f"certify: {name} must be a positive number, got {x!r}")
    return float(x)
