"""``constrfl.solve``: one call, a :class:`~constrfl.result.SolveResult` back — whatever
happens during the solve (see :mod:`constrfl.status`)."""
from __future__ import annotations

import time

import numpy as np

from .control import SolveControl, checked_callback, positive
from .execution import bookkeeping, run
from .federation import InProcessFederation
from .problem import Problem
from .progress import IterationTable, status_text
from .result import KKT, SolveResult
from .scaling import RowScaledView, ScaledView, federated_scaling
from .settings import (AUTO_NEWTON_MAX_DIM, BASELINES, METHODS, NewtonSettings,
                       choose_inner, resume_settings, settings_for, tolerances)
from .solvers.admm import ADMM
from .solvers.baselines import execute_baseline
from .solvers.newton import Newton
from .solvers.proxal import OuterState, proximal_al

#: ``METHODS``, ``BASELINES``, ``settings_for``, ``choose_inner`` and
#: ``AUTO_NEWTON_MAX_DIM`` live in :mod:`constrfl.settings`
__all__ = ["solve", "execute", "METHODS", "BASELINES", "settings_for",
           "choose_inner", "AUTO_NEWTON_MAX_DIM"]


def solve(problem, method="fedproxal", tol=None, *, w0=None, seed=0, verbose=False,
          progress=None, callback=None, max_time=None, resume=None, federation=None,
          **options):
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
        (options: :class:`constrfl.settings.BaselineSettings`).
    tol : ε or ``(ε₁, ε₂)``: stationarity and feasibility tolerances of Definition 1
        [1e-6; a resumed solve: the tolerances it ran with].
    w0 : starting point; default a point on the unit sphere drawn from ``seed``
        (the paper's choice), projected onto dom P.
    seed : integer seed (the default ``w0``; the baselines' sampling).
    verbose : print one row per outer iteration (per round for the baselines).
    progress : a status line on stderr while the solve runs (rounds, outer iterations,
        last residuals, seconds), shown after a second and erased at the end; None: when
        stderr is a terminal and ``verbose`` is off (:mod:`constrfl.progress`; per-round
        records: the ``"constrfl"`` logger at DEBUG).
    callback : called after every outer iteration (every round for the baselines) with
        a dict (the history record plus ``w``, ``w_prev``, ``multipliers_prev`` and
        ``multipliers``); returning True or raising StopIteration stops the solve
        (status ``"stopped"``), any other exception stops it too (kept as ``error``).
    max_time : seconds after which the solve stops with ``"time_limit"`` (checked
        before every communication round, and in the server's iterative model solves:
        ``"newton-basis"``, or a nonsmooth P above d = 1,000).
    resume : a result of an earlier solve of the same problem (``"max_iterations"``,
        ``"time_limit"``, ``"interrupted"``, ``"stopped"``, ``"client_error"``,
        ``"client_failure"``), e.g. from :func:`constrfl.load_result`: continue it with
        its method and settings (``max_outer``, or the baselines' ``rounds``, may be
        raised); in-process the continuation is bit-identical to an uninterrupted solve.
    federation : None (this process) or ``federation(method, snapshots, control,
        disclose, secure)``, the :class:`~constrfl.federation.Federation` the solve runs
        over (``snapshots``: the parties' states of a resumed solve, else None;
        ``control``: the solve's :class:`~constrfl.control.SolveControl`; ``disclose``:
        the solve may receive disclosed fields, ``private=False``; ``secure``: the
        clients mask their uploads, ``secure=True``); then ``problem`` is what the server
        knows, a :class:`~constrfl.problem.ServerView` (:func:`constrfl.flower.run_server`
        passes Flower's).  The other keywords, and their defaults, are the same for every
        backend: they are spelled here only.

    Options
    -------
    inner : ``fedproxal``'s subproblem solver [``"auto"``]; the server receives only
        sums over the clients (docs/algorithms.md §9):
        ``"newton"``: federated proximal Newton; the server gets the sum of the clients'
        AL values, gradients and Hessians (d(d+1)/2 entries) in one round per step; tens
        of rounds in all.
        ``"newton-cg"``: the same without Hessians: each conjugate-gradient iteration is
        a round of Hessian-vector products (d entries up); needs a smooth P (none or
        ``SquaredL2``).
        ``"newton-basis"`` (only with ``private=False``): ``"newton"``'s steps with each
        client's Hessian in a compact exact form (its row basis, or its sparse
        entries), ≤ 50·d floats up a round, which the server sees client by client.
        ``"admm"``: Algorithm 2 of the paper; each round a client uploads two d-vectors
        and two scalars (summed); hundreds of rounds.
        ``"auto"``: ``"newton"`` for d ≤ 500, and up to d = 2,000 with a smooth P; with
        ``private=False`` above d = 500 ``"newton-basis"`` where every party has a
        compact Hessian the server can afford; else ``"newton-cg"`` with a smooth P,
        else ``"newton"`` up to d = 2,000, else ``"admm"`` (``"newton"`` only while a
        round's Hessian sums take at most 4 GB over the clients;
        :func:`~constrfl.settings.choose_inner`; the README's benchmark says why).
    private : True (default): only sums over the clients reach the server; False: the
        clients may also disclose their compact Hessians (``"newton-basis"``).
    The other options, their meanings and defaults are the fields of the settings records
    of :mod:`constrfl.settings`: :class:`~constrfl.settings.NewtonSettings` (``inner=
    "newton"``, ``"newton-cg"``, ``"newton-basis"``; ``cproxal``), :class:`~constrfl.settings.ADMMSettings`
    (``inner="admm"``) and :class:`~constrfl.settings.BaselineSettings` (the baselines).
    An option that does not apply to the method (or inner solver) is a TypeError.
    ``status`` is ``"optimal"`` only when the KKT residuals, computed by the parties at
    the returned point, meet ``tol``; otherwise ``message`` names the residual that
    failed.  Statuses: :mod:`constrfl.status`.
    """
    start = time.perf_counter()
    for name, flag in (("verbose", verbose), ("progress", progress)):
        if not (isinstance(flag, bool) or (name == "progress" and flag is None)):
            raise TypeError(f"{name} must be True or False"
                            f"{' (or None: when stderr is a terminal)' if name == 'progress' else ''}"
                            f", got {flag!r}")
    if federation is None:
        if not isinstance(problem, Problem):
            raise TypeError(f"problem must be a constrfl.Problem, got "
                            f"{type(problem).__name__}")

        def federation(method, snapshots, control, disclose, secure):
            return InProcessFederation(problem, snapshots, counted=method != "cproxal",
                                       control=control, disclose=disclose, secure=secure)
    if resume is not None:
        method, settings, eps = resume_settings(problem, resume, method, options, tol)
        w0 = None                          # the iterate is in the resumed solver state
    else:
        settings, eps = settings_for(method, options, problem), tolerances(tol)
    callback = checked_callback(callback)
    control = SolveControl(None if max_time is None
                           else start + positive(max_time, "max_time"))
    if settings.secure and method == "cproxal":
        raise ValueError("secure=True masks the clients' uploads; method 'cproxal' has no "
                         "federation (the pooled problem): use method='fedproxal'")
    fed = federation(method, None if resume is None else resume.state["parties"], control,
                     disclose=not getattr(settings, "private", True), secure=settings.secure)
    run = execute_baseline if method in BASELINES else execute
    return run(problem, method, eps, settings, fed, w0=w0, seed=seed, resume=resume,
               verbose=verbose, progress=False if verbose else progress,
               callback=callback, start=start)


def execute(problem, method, eps, settings, fed, *, w0, seed, resume, verbose, progress,
            callback, start):
    """Run a proximal AL method over the federation ``fed`` and return its result
    (``problem`` needs ``dim``, ``regularizer``, ``start_point`` and ``parties``; the
    backends of :mod:`constrfl.federation` and :mod:`constrfl.flower` share this; the
    keywords are :func:`solve`'s, ``start`` when it began)."""
    report = _Table(verbose, method, problem)

    def fresh():
        return OuterState(k=0, w=problem.start_point(w0, seed), beta=settings.beta)

    def loop(s):
        view = _scaled(problem, fed, s, settings.scaling, fresh=resume is None)
        inner = _inner_solver(view, method, settings, fed, eps)
        return proximal_al(view, fed, inner, s, eps, settings, report=report,
                           callback=callback)

    def describe(s):
        return status_text(start, fed.traffic.rounds, s.k, s.history[-1] if s.history
                           else s.start, inner=s.inner)
    s, outcome = run(fed, resume, fresh, loop, describe, progress, start)
    res = _result(problem, method, s, outcome, fed, settings, eps)
    report.close(res)
    return res


def _scaled(problem, fed, s, scaling, fresh):
    """The problem the solvers see.  ``scaling="rows"``: the problem, whose first
    message asks the parties to scale their own far rows.  ``scaling=True``: with
    ``fresh``, the scaling of §8a is measured at w⁰ (one round) and, unless every factor
    is 1, s.w becomes x⁰ = w⁰/D; a resumed solve keeps its scaling."""
    if scaling == "rows":
        return RowScaledView(problem)
    if scaling and fresh:
        found = federated_scaling(problem, fed, s.w)
        if found is not None:
            s.scale_columns, s.scale_objective = found
            s.w = s.w / s.scale_columns
    if s.scale_columns is None:
        return problem
    return ScaledView(problem, s.scale_columns, s.scale_objective)


def _inner_solver(problem, method, settings, fed, eps):
    if method == "cproxal":
        return Newton(problem.regularizer, problem.dim, settings.max_inner, batch=1)
    if isinstance(settings, NewtonSettings):
        return Newton(problem.regularizer, problem.dim, settings.max_inner,
                      cg=settings.inner == "newton-cg",
                      basis=settings.inner == "newton-basis")
    return ADMM(fed.clients, settings.client_rhos(problem), problem.regularizer, eps,
                max_iter=settings.max_inner, adaptive_rho=settings.adaptive_rho,
                local_max_iter=settings.local_max_iter, local_solver=settings.local_solver,
                dim=problem.dim)


def _result(problem, method, s, outcome, fed, settings, eps):
    """The SolveResult at the last completed outer iteration."""
    last = s.history[-1] if s.history else s.start      # else: measured at w⁰, if at all
    if last is not None:
        kkt = KKT.of(last, problem.regularizer.exact_dist)
        objective = last["objective"]
    else:                                    # not even the first round completed
        kkt, objective = KKT(np.nan, np.nan, np.nan, np.nan), np.nan
    mults = dict(problem.zero_multipliers(), **fed.multipliers(s.reported, s.reported_seq))
    w = s.w if s.scale_columns is None else s.scale_columns * s.w      # the user's units
    return SolveResult(w=w, objective=objective, multipliers=mults, kkt=kkt,
                       outer_iterations=s.k, inner_iterations=s.inner_iterations,
                       history=s.history,
                       **bookkeeping(problem, method, settings, eps, fed, s, outcome))


class _Table(IterationTable):
    """One row per outer iteration."""

    columns = (("iter", 5), ("tau", 9), ("inner", 6), ("rounds", 7), ("step", 9),
               ("stationarity", 12), ("feasibility", 11), ("complement", 10),
               ("objective", 15))

    def format(self, r):
        return (f"{r['k']:5d} {r['tau']:9.2e} {r['inner_iterations']:6d} {r['rounds']:7d} "
                f"{r['step']:9.2e} {r['stationarity']:12.3e} {r['feasibility']:11.3e} "
                f"{r['complementarity']:10.2e} {r['objective']:15.8e}")
