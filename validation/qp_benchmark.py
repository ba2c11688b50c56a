"""The Maros–Meszaros benchmark (issue 19): constrfl on convex QPs nobody here wrote,
against Clarabel, OSQP, SCS and ProxQP on the pooled QP, in the same run.

Each QP ``min ½xᵀPx + qᵀx + r s.t. l ≤ Ax ≤ u`` with n ≤ ``--max-n`` is read in place
from ``<data>/maros_meszaros/*.mat`` and federated by
:func:`constrfl.problems.federated_qp` over K clients (bound rows → ``prox.Box``,
equality rows → the server, the other rows dealt to the clients, fₖ = f/K); constrfl
runs ``cf.solve(problem, tol=1e-6, max_time=T)`` with its defaults, each peer its
defaults with the same time limit where its API has one (ProxQP has none).

Success (the issue's criterion): the solver claims optimality (constrfl ``optimal``;
Clarabel ``Solved``, OSQP and SCS ``solved``, ProxQP ``PROXQP_SOLVED``) within the time
limit, the relative objective error ``|f − f*| / max(1, |f*|)`` is ≤ 1e-5 against
the optimum f* (f at the point of an untimed reference run of Clarabel with its gap and
feasibility tolerances at ``REFERENCE_TOL``, else of Clarabel at its defaults; without
either, "no reference", the objective is not checked), and the max relative constraint violation (per row of A, bound rows
included: violation / max(1, |bound|)) is ≤ 1e-5.  A wrong claim is an ``optimal``
outside the criterion's accuracy, or ``infeasible`` on a problem Clarabel solves.

    python validation/qp_benchmark.py                       # n ≤ 1000, K = 1 and 5, 60 s
    python validation/qp_benchmark.py --quick               # 6 small problems, 10 s
    python validation/qp_benchmark.py --problems HS21 QAFIRO --clients 3 --solvers constrfl osqp

Every solve runs in its own spawned process (``--jobs`` at a time, one BLAS thread),
after an untimed warm-up solve of a 2-variable QP with the same solver; a process that
has not answered ``GRACE`` seconds after the time limit is killed and recorded.  Writes
``qp_benchmark.md`` into ``--out-dir`` (default ``validation/out/``), or with
``--update-results`` ``validation/results/qp_benchmark.md``.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C                                                # noqa: E402
from constrfl.problems.datasets import load_maros_meszaros        # noqa: E402
from constrfl.problems.qp import QuadraticProgram                 # noqa: E402

PEERS = {"clarabel": "clarabel", "osqp": "osqp", "scs": "scs", "proxqp": "proxsuite"}
SOLVERS = ("constrfl", *PEERS)
QUICK = ("HS21", "HS35", "HS118", "GENHS28", "QAFIRO", "DUALC1")
ACCURACY = 1e-5          # objective error and constraint violation of the criterion
#: Clarabel's gap and feasibility tolerances for the reference f* (its defaults, 1e-8,
#: left GOULDQP3's point 1.07e-5 (relative) above the optimum that ProxQP at eps_abs =
#: 1e-10 and Clarabel at 1e-12 agree on to 1e-9, so a correct answer looked wrong)
REFERENCE_TOL = 1e-10
SHIFT = 10.0             # qpbenchmark's shift for the shifted geometric mean of runtimes
GRACE = 30.0             # seconds past the time limit before a solve's process is killed
WARMUP = QuadraticProgram(np.eye(2), [1.0, 1.0], [[1.0, 0.0], [1.0, 1.0], [1.0, -1.0]],
                          [0.0, 1.0, -np.inf], [np.inf, 1.0, 1.0], name="warm-up")


# -- the solvers: each prepares its input (untimed) and returns run() -> outcome ----------

def _outcome(x, status, claims, rounds=None, message=""):
    """``claims`` maps the solver's status to ``"optimal"`` / ``"infeasible"``."""
    return dict(x=x, status=status, claim=claims.get(status, "other"), rounds=rounds,
                message=message or status)


def _constrfl(qp, T, K):
    import constrfl as cf
    from constrfl.problems import federated_qp
    problem = federated_qp(qp.P, qp.q, qp.A, qp.l, qp.u, qp.r, n_clients=K, name=qp.name)

    def run():
        res = cf.solve(problem, tol=1e-6, max_time=T)
        return _outcome(res.w, res.status, {"optimal": "optimal", "infeasible": "infeasible"},
                        res.rounds, res.message)
    return run


def _conic(qp):
    """``Ax + s = b``: equality rows (s = 0) first, then ``A_u x ≤ u`` and
    ``−A_l x ≤ −l`` over the finite sides (s ≥ 0); returns (A, b, #zero, #nonneg)."""
    eq = qp.l == qp.u
    up, lo = ~eq & np.isfinite(qp.u), ~eq & np.isfinite(qp.l)
    A = sp.vstack([qp.A[eq], qp.A[up], -qp.A[lo]], format="csc")
    return A, np.r_[qp.u[eq], qp.u[up], -qp.l[lo]], int(eq.sum()), int(up.sum() + lo.sum())


def _clarabel(qp, T, K, tight=False):
    """Clarabel at its defaults, or (``tight``, the reference f*) with its gap and
    feasibility tolerances at ``REFERENCE_TOL``."""
    import clarabel
    A, b, zero, nonneg = _conic(qp)
    cones = ([clarabel.ZeroConeT(zero)] if zero else []) + (
        [clarabel.NonnegativeConeT(nonneg)] if nonneg else [])
    settings = clarabel.DefaultSettings()
    settings.verbose, settings.time_limit = False, T
    if tight:
        settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = REFERENCE_TOL
        settings.max_iter = 500
    P = sp.triu(qp.P, format="csc")

    def run():
        sol = clarabel.DefaultSolver(P, qp.q, A, b, cones, settings).solve()
        return _outcome(sol.x, str(sol.status),
                        {"Solved": "optimal", "PrimalInfeasible": "infeasible"})
    return run


def _osqp(qp, T, K):
    import osqp
    P, A = sp.csc_matrix(sp.triu(qp.P)), sp.csc_matrix(qp.A)     # OSQP converts arrays

    def run():
        solver = osqp.OSQP()
        solver.setup(P, qp.q, A, qp.l, qp.u, verbose=False, time_limit=T)
        res = solver.solve(raise_error=False)
        return _outcome(res.x, res.info.status,
                        {"solved": "optimal", "primal infeasible": "infeasible"})
    return run


def _scs(qp, T, K):
    import scs
    A, b, zero, nonneg = _conic(qp)
    data = dict(P=sp.triu(qp.P, format="csc"), A=A, b=b, c=qp.q)

    def run():
        sol = scs.SCS(data, dict(z=zero, l=nonneg), verbose=False, time_limit_secs=T).solve()
        return _outcome(sol["x"], sol["info"]["status"],
                        {"solved": "optimal", "infeasible": "infeasible"})
    return run


def _proxqp(qp, T, K):
    from proxsuite import proxqp
    eq = qp.l == qp.u
    args = (qp.P.tocsc(), qp.q, qp.A[eq].tocsc(), qp.l[eq], qp.A[~eq].tocsc(), qp.l[~eq],
            qp.u[~eq])

    def run():
        res = proxqp.sparse.solve(*args)
        return _outcome(res.x, res.info.status.name,
                        {"PROXQP_SOLVED": "optimal", "PROXQP_PRIMAL_INFEASIBLE": "infeasible"})
    return run


def _reference(qp, T, K):
    return _clarabel(qp, T, K, tight=True)


PREPARE = dict(constrfl=_constrfl, clarabel=_clarabel, osqp=_osqp, scs=_scs, proxqp=_proxqp,
               reference=_reference)


# -- one solve in a worker process -----------------------------------------------------------

def _point(x, n):
    x = None if x is None else np.asarray(x, dtype=np.float64).ravel()
    return x if x is not None and x.shape == (n,) and np.all(np.isfinite(x)) else None


def run_task(task):
    """Warm up on :data:`WARMUP`, then time ``run()`` of the task's solver (the input's
    preparation is not timed); f and the violation are measured on the raw QP."""
    qp = load_maros_meszaros(task["path"])
    prepare = PREPARE[task["solver"]]
    prepare(WARMUP, task["T"], task["K"])()
    run = prepare(qp, task["T"], task["K"])
    t0 = time.perf_counter()
    out = run()
    elapsed = time.perf_counter() - t0
    x = _point(out.pop("x"), qp.n)
    return dict(task, **out, time=elapsed,
                objective=np.nan if x is None else qp.objective(x),
                violation=np.nan if x is None else qp.violation(x))


def _failure(task, status, message, elapsed=np.nan):
    return dict(task, status=status, claim="other", rounds=None, message=message,
                time=elapsed, objective=np.nan, violation=np.nan)


# -- the scheduler: one spawned process per solve, killed past the hard limit ------------------

def run_tasks(tasks, jobs, hard_limit):
    """Each task in its own spawned process, ``jobs`` at a time, in task order; a process
    without an answer after ``hard_limit`` seconds is killed and recorded as such.  On
    Ctrl-C or SIGTERM the running ones are killed and the finished ones returned (the
    others are None)."""
    from multiprocessing.connection import wait

    queue, running = list(enumerate(tasks)), {}
    out, t0 = [None] * len(tasks), time.perf_counter()

    def finish(recv, record):
        i, proc, _ = running.pop(recv)
        out[i] = record
        print(f"[{sum(o is not None for o in out)}/{len(tasks)} "
              f"{time.perf_counter() - t0:7.1f}s] {record['problem']} {label(record)}: "
              f"{record['status']} {C.fmt(record['time'], '.2f')} s", flush=True)
    with C.interruptible(out, "solves"):
        while queue or running:
            while queue and len(running) < jobs:
                i, task = queue.pop(0)
                recv, proc = C.start_isolated(run_task, task, _failure)
                running[recv] = (i, proc, time.perf_counter())
            deadline = min(start for _, _, start in running.values()) + hard_limit
            for recv in wait(list(running), timeout=max(deadline - time.perf_counter(), 0)):
                i, proc, start = running[recv]
                finish(recv, C.receive_isolated(recv, proc, tasks[i], _failure, start))
            for recv, (i, proc, start) in list(running.items()):
                if time.perf_counter() - start > hard_limit:
                    C.kill_isolated(recv, proc)
                    finish(recv, _failure(tasks[i], "killed", "no answer within the hard "
                                          f"limit of {hard_limit:g} s", hard_limit))
    for recv, (_, proc, _) in running.items():   # left running only when interrupted
        C.kill_isolated(recv, proc)
    return out


# -- judging and the report ----------------------------------------------------------------

def label(r):
    return f"constrfl (K={r['K']})" if r["solver"] == "constrfl" else r["solver"]


def _inaccuracy(r):
    """Why the point of record ``r`` misses the criterion's accuracy ([] if it meets it)."""
    if np.isnan(r["violation"]):
        return ["no finite point"]
    return [f"{name} {value:.1e} > {ACCURACY:g}" for name, value in
            (("objective error", r["objective_error"]), ("violation", r["violation"]))
            if value > ACCURACY]


def judge(records, T):
    """Add ``objective_error``, ``success``, ``why`` (failure reasons) and, for constrfl,
    ``wrong`` (a wrong claim, or "") to every record, against the reference of the same
    problem: the tight Clarabel run where it solved, else Clarabel at its defaults (the
    reference runs themselves are dropped).  A peer's "solved" is a claim at its own
    default tolerances, so an inaccurate one is a failure, not a wrong claim."""
    ref = {r["problem"]: r for r in records if r["solver"] == "clarabel"}
    for r in records:
        if (r["solver"] == "reference" and r["claim"] == "optimal"
                and np.isfinite(r["objective"]) and r["violation"] <= ACCURACY):
            ref[r["problem"]] = r
    records = [r for r in records if r["solver"] != "reference"]
    for r in records:
        r["reference_solver"] = ref[r["problem"]]["solver"]
        f_star = ref[r["problem"]]["objective"]
        r["reference"] = ref[r["problem"]]["claim"] == "optimal" and np.isfinite(f_star)
        r["objective_error"] = (abs(r["objective"] - f_star) / max(1.0, abs(f_star))
                                if r["reference"] else np.nan)
        inaccurate = _inaccuracy(r)
        why = ([] if r["claim"] == "optimal" else [f"status {r['status']}"]) + inaccurate
        why += [f"optimal after {r['time']:.1f} s > T"] if r["claim"] == "optimal" \
            and r["time"] > T else []
        r["success"], r["why"] = not why, "; ".join(why)
        r["wrong"] = "" if r["solver"] != "constrfl" else (
            "optimal outside the criterion: " + "; ".join(inaccurate)
            if r["claim"] == "optimal" and inaccurate else
            "infeasible, but Clarabel solves it"
            if r["claim"] == "infeasible" and r["reference"] else "")
    return records


def shifted_geomean(values, shift=SHIFT):
    """``exp(mean(log(v + shift))) − shift`` (qpbenchmark's ``shgeom``)."""
    v = np.asarray(values, dtype=np.float64)
    return float(np.exp(np.mean(np.log(v + shift))) - shift) if v.size else np.nan


def summary(records, labels, T):
    """Per solver: successes, wrong claims, shifted geometric mean of time (a failure
    counts T) and, for constrfl, of rounds over its successes."""
    rows, means = [], {}
    for lab in labels:
        mine = [r for r in records if label(r) == lab]
        means[lab] = shifted_geomean([r["time"] if r["success"] else T for r in mine])
        rounds = [r["rounds"] for r in mine if r["success"] and r["rounds"] is not None]
        rows.append([lab, f"{sum(r['success'] for r in mine)}/{len(mine)}",
                     str(sum(bool(r["wrong"]) for r in mine)) if lab.startswith("constrfl")
                     else "–", C.fmt(means[lab], ".3g"),
                     None, C.fmt(shifted_geomean(rounds), ".3g") if rounds else "–"])
    best = np.nanmin(list(means.values()))
    for row in rows:
        row[4] = C.fmt(means[row[0]] / best, ".3g")
    return C.md_table(["solver", "solved", "wrong claims", "time sgm (s)", "× best",
                       "rounds sgm (solved)"], rows)


def per_problem(records, sizes):
    rows = [[r["problem"], *sizes[r["problem"]], label(r), r["status"],
             "yes" if r["success"] else "no", C.fmt(r["rounds"], "d"), C.fmt(r["time"], ".3g"),
             C.fmt(r["objective_error"], ".1e"), C.fmt(r["violation"], ".1e")]
            for r in records]
    return C.md_table(["problem", "n", "m", "solver", "status", "success", "rounds",
                       "time (s)", "objective error", "violation"], rows)


def failures(records):
    bad = [r for r in records if not r["success"]]
    if not bad:
        return "Every solve met the criterion.\n"
    return "\n".join(f"* {r['problem']}, {label(r)}: `{r['status']}` ({r['why']})"
                     + ("" if r["message"] == r["status"] else
                        f" — {' '.join(str(r['message']).split())[:300]}")
                     for r in bad) + "\n"


def wrong_claims(records):
    bad = [r for r in records if r["wrong"]]
    return ("None.\n" if not bad else
            "\n".join(f"* {r['problem']}, {label(r)}: {r['wrong']}" for r in bad) + "\n")


# -- main ------------------------------------------------------------------------------------

def problems(args):
    """``[(name, path, n, m)]``: the selected problems with n ≤ --max-n, by name."""
    folder = Path(args.data) / "maros_meszaros"
    files = {f.stem.upper(): f for f in sorted(folder.glob("*.mat"))}
    if not files:
        sys.exit(f"no Maros-Meszaros .mat files in {folder} (use --data or $CONSTRFL_DATA)")
    wanted = [p.upper() for p in args.problems or (QUICK if args.quick else files)]
    unknown = sorted(set(wanted) - set(files))
    if unknown:
        sys.exit(f"unknown problems {unknown}; available: {sorted(files)}")
    out = []
    for name in wanted:
        qp = load_maros_meszaros(files[name])
        if qp.n <= args.max_n:
            out.append((qp.name, str(files[name]), qp.n, qp.m))
    if not out:
        sys.exit(f"no selected problem has n ≤ {args.max_n}")
    return out


def solver_versions(chosen):
    """``({peer: version}, [skipped peers])`` for the chosen peers (Clarabel always: it
    is the reference)."""
    found, skipped = {}, []
    for name in [p for p in PEERS if p in chosen or p == "clarabel"]:
        try:
            found[name] = importlib.metadata.version(PEERS[name])
        except importlib.metadata.PackageNotFoundError:
            skipped.append(name)
    return found, skipped


def notes(args, T, versions, skipped, records):
    refs = sorted({r["problem"] for r in records if r["solver"] == "clarabel"
                   and not r["reference"]})
    defaults = sorted({r["problem"] for r in records if r["solver"] == "clarabel"
                       and r["reference_solver"] == "clarabel"})
    return [
        f"time limit T = {T:g} s a solve; constrfl `cf.solve(problem, tol=1e-6, "
        f"max_time=T)` with all other options at their defaults, K ∈ "
        f"{{{', '.join(map(str, args.clients))}}}",
        "peers at their defaults on the pooled QP, with the time limit where the API has "
        "one (Clarabel `time_limit`, OSQP `time_limit`, SCS `time_limit_secs`; ProxQP has "
        "none): " + ", ".join(f"{k} {v}" for k, v in versions.items())
        + (f"; skipped (not installed): {', '.join(skipped)}" if skipped else "")
        + "; a peer's \"solved\" is at its own default tolerances (e.g. OSQP eps_abs = "
        "eps_rel = 1e-3, Clarabel 1e-8): one that misses the criterion is a failure, "
        "not a wrong claim",
        "success: the solver's optimal status within T, relative objective error "
        f"|f − f*|/max(1, |f*|) ≤ {ACCURACY:g} against f* (f at the point of Clarabel with "
        f"its gap and feasibility tolerances at {REFERENCE_TOL:g}, an untimed reference "
        f"run not in the tables; where that run did not solve, Clarabel's at its defaults: "
        f"{', '.join(defaults) or 'none'}), and "
        f"max relative violation ≤ {ACCURACY:g} (per row of A, bound rows included: "
        "violation / max(1, |bound|))",
        "no reference (Clarabel did not solve): "
        + (", ".join(refs) + " — judged by status, time and violation only" if refs
           else "none"),
        f"time sgm: shifted geometric mean exp(mean(log(t + {SHIFT:g}))) − {SHIFT:g} over "
        "all problems, a failure counted at T (qpbenchmark's convention: "
        "qpbenchmark/shgeom.py, report.py: shift 10, time limit for unsolved); × best "
        "divides by the lowest; rounds sgm (same shift) over the problems constrfl solved",
        "each solve in its own spawned process with one BLAS thread, after an untimed "
        "warm-up solve of a 2-variable QP; times are wall time of the solve call "
        "(building the federation or the solver's input is not timed); a process "
        f"without an answer {GRACE:g} s past T is killed (status `killed`); "
        f"{args.jobs} at a time",
        f"data: {Path(args.data) / 'maros_meszaros'} (qpsolvers/maros_meszaros_qpbenchmark)",
        *args.note,
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=None, metavar="NAME",
                    help="only these problems (file stems, e.g. HS21 QAFIRO)")
    ap.add_argument("--max-n", type=int, default=1000,
                    help="only problems with at most this many variables (default 1000)")
    ap.add_argument("--clients", nargs="+", type=int, default=[1, 5],
                    help="numbers of clients K for constrfl (default 1 5)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds a solve (default 60; 10 with --quick)")
    ap.add_argument("--solvers", nargs="+", choices=SOLVERS, default=list(SOLVERS),
                    help="solvers to run (default all; Clarabel always runs: the reference)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="solves run concurrently, one process each (default 1)")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: {', '.join(QUICK)}")
    ap.add_argument("--data", default=C.data_dir(),
                    help="directory holding maros_meszaros/ (default $CONSTRFL_DATA or "
                         "../shared/data)")
    ap.add_argument("--note", action="append", default=[],
                    help="a line for the header")
    C.add_output_args(ap, "qp_benchmark.md")
    args = ap.parse_args(argv)
    T = args.time_limit or (10.0 if args.quick else 60.0)
    chosen = problems(args)
    versions, skipped = solver_versions(args.solvers)
    if "clarabel" in skipped:
        sys.exit("Clarabel (the reference) is not installed")
    peers = [p for p in PEERS if p in versions]
    Ks = args.clients if "constrfl" in args.solvers else []
    tasks = [dict(problem=name, path=path, solver=s, K=K, T=T) for name, path, _, _ in chosen
             for s, K in [("reference", None)] + [(p, None) for p in peers]
             + [("constrfl", K) for K in Ks]]
    C.one_thread_per_worker()
    print(f"qp_benchmark: {len(chosen)} problems, {len(tasks)} solves, T = {T:g} s, "
          f"jobs {args.jobs}", flush=True)
    t0 = time.perf_counter()
    outs = run_tasks(tasks, args.jobs, T + GRACE)
    records, interrupted = C.finished(outs, tasks)
    judged = {r["problem"] for r in records if r["solver"] == "clarabel"}
    records = judge([r for r in records if r["problem"] in judged], T)
    labels = peers + [f"constrfl (K={K})" for K in Ks]
    order = {name: i for i, (name, *_) in enumerate(chosen)}
    records.sort(key=lambda r: (order[r["problem"]], labels.index(label(r))))
    sizes = {name: (n, m) for name, _, n, m in chosen}
    text = (C.header("Maros–Meszaros benchmark: constrfl (federated) vs. QP solvers "
                     "(pooled)", time.perf_counter() - t0,
                     interrupted + notes(args, T, versions, skipped, records))
            + f"\n## Solved of {len(judged)} problems (n ≤ {args.max_n})\n\n"
            + summary(records, labels, T)
            + "\n## Wrong claims of constrfl\n\n" + wrong_claims(records)
            + "\n## Failures\n\n" + failures(records)
            + "\n## Per problem\n\n" + per_problem(records, sizes))
    C.write(C.output_path(args), text)


if __name__ == "__main__":
    main()
