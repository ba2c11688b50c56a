"""The benchmark of the "fast by default" targets: rounds, wall and CPU time and the
final KKT residuals of ``fedproxal`` with pure defaults and with ``inner="admm"`` (its
defaults), against cvxpy/Clarabel on the pooled problem timed in the same run:

* Neyman-Pearson (30) on breast-cancer-wisconsin, n = 20 (two stratified splits) and
  n = 10; on adult (ridge 1e-3), n = 20;
* NP on synthetic data: 1000 clients × 20 rows, d = 20; 200 clients × 50 rows, d = 300;
  sparse, d = 5,000 (1% nonzeros), 10 clients × 500 rows, ridge 1e-2;
* the LCQP of Appendix E.2, n = 10, d = 500, m = 5;
* ``FairClassifier(max_disparity=0.05)`` on adult, 5 clients (CPU time of ``fit``).

    python validation/bench.py [--data DIR] [--repeats 3] [--max-time 300]
    python validation/bench.py --quick         # smoke run: breast-cancer n = 10, 1 repeat
    python validation/bench.py --highdim [--max-time 300] [--update-results]

``--highdim`` runs issue 20's high-dimensional rows instead and writes
``bench_highdim.md``: NP dense d = 1,000 / 2,000 / 5,000 (20 clients x 200 rows, ridge
1e-3) with the defaults, ``inner="newton-cg"`` and ``private=False``; NP dense d = 2,000 /
5,000 with L1 1e-3 (the defaults, ``inner="admm"`` and ``private=False``); NP sparse
d = 20,000 / 100,000 (0.1% nonzeros, 10 x 500 rows) with ridge 1e-2 (the defaults,
newton-cg and ``private=False``) and L1 1e-3 (the defaults and ``private=False``); NP
sparse d = 5,000 (1% nonzeros, 10 x 500 rows) with L1 1e-3; NP sparse d = 10⁶ (0.01%
nonzeros, 20 x 5,000 rows) with L1 1e-3; ``NeymanPearsonClassifier(0.3)`` on sparse X
(3,000 x 2,000); Clarabel on each pooled problem.  ``--cases`` runs those whose name
contains a given text.  Every call runs in its own spawned process (peak
memory of its own; killed 30 s past its time limit).  ``--highdim --quick``: one tiny
row, in this process (the test's smoke run).

Writes ``bench.md`` into ``--out-dir`` (default ``validation/out/``, not committed);
``--update-results`` replaces the committed ``validation/results/bench.md`` (the README's
results table).  Times are medians over ``--repeats`` runs; a run longer than 20 s is
done once (``n=1``); a solve is cut at ``--max-time`` seconds (status ``time_limit``).
Clarabel is skipped where cvxpy's exponential cones would take minutes (the large
synthetic cases).  The machine is shared: the header records the load average, and
the CPU times are the ones to compare.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C                                                # noqa: E402
import constrfl as cf                                             # noqa: E402
from constrfl import prox                                         # noqa: E402
from constrfl.exactsum import RING_BYTES                          # noqa: E402
from constrfl.problems import lcqp, neyman_pearson                # noqa: E402
from constrfl.problems.datasets import (load_adult,               # noqa: E402
                                        load_breast_cancer_wisconsin, make_classification)
from constrfl.problems.partition import stratified_split         # noqa: E402

SLOW = 20.0
SOLVERS = {"defaults": dict(), 'inner="admm"': dict(inner="admm")}


def _synthetic(n, rows, d, regularizer=None):
    data = make_classification(n_samples=n * rows, n_features=d - 1, seed=0)
    return neyman_pearson(data.X, data.y, stratified_split(data.y, n, seed=0), 0.2,
                          regularizer=regularizer)


def _sparse(n=10, rows=500, d=5000, density=0.01, regularizer=None):
    rng = np.random.default_rng(0)
    X = sp.random(n * rows, d - 1, density=density, random_state=rng, format="csr")
    X.data = rng.standard_normal(X.nnz)
    coef = np.zeros(d - 1)
    coef[rng.choice(d - 1, 50, replace=False)] = 3 * rng.standard_normal(50)
    y = (X @ coef + 0.5 * rng.standard_normal(n * rows) > 0).astype(int)
    X = sp.hstack([X, np.ones((n * rows, 1))], format="csr")
    return neyman_pearson(X, y, stratified_split(y, n, seed=0), 0.3,
                          regularizer=regularizer or prox.SquaredL2(1e-2))


def cases(data, quick=False):
    """(name, problem or None, build, reference?) per case."""
    bcw = load_breast_cancer_wisconsin(data / "breast-cancer-wisconsin")

    def np_bcw(n, seed):
        return neyman_pearson(bcw.X, bcw.y, stratified_split(bcw.y, n, seed=seed), 0.2)

    yield "NP breast-cancer-wisconsin, n=10", np_bcw(10, 0), True
    if quick:
        return
    yield "NP breast-cancer-wisconsin, n=20 (split 0)", np_bcw(20, 0), True
    yield "NP breast-cancer-wisconsin, n=20 (split 5)", np_bcw(20, 5), True
    adult = load_adult(data / "adult")
    # Unregularized NP on adult has no minimizer: five one-hot columns occur only in
    # class 0, so their weights run to -inf; a small ridge makes it well posed.
    yield ("NP adult (ridge 1e-3), n=20",
           neyman_pearson(adult.X, adult.y, stratified_split(adult.y, 20, seed=0), 0.2,
                          regularizer=prox.SquaredL2(1e-3)), True)
    yield "LCQP n=10, d=500, m=5", lcqp(10, 500, 5, seed=0), True
    yield "NP synthetic, 1000 clients x 20 rows, d=20", _synthetic(1000, 20, 20), False
    yield "NP synthetic, 200 clients x 50 rows, d=300", _synthetic(200, 50, 300), False
    yield "NP synthetic sparse, d=5000 (1% nonzeros), 10 x 500 rows", _sparse(), False


def fair_adult(data, opts, max_time):
    """FairClassifier(max_disparity=0.05) on adult split over 5 clients."""
    from constrfl.estimators import FairClassifier
    adult = load_adult(data / "adult")
    ids = stratified_split(adult.y, 5, seed=0)
    est = FairClassifier(max_disparity=0.05, solver_options=dict(opts, max_time=max_time),
                         on_failure="warn")
    est.fit(adult.X, adult.y, sensitive_features=adult.sensitive, client_ids=ids)
    return est.result_



# -- the high-dimensional rows (issue 20, --highdim) ------------------------------------------

HD_FILE = "bench_highdim.md"
HD_DENSE = (1000, 2000, 5000)               # 20 clients x 200 rows, ridge 1e-3
HD_DENSE_L1 = (2000, 5000)                  # the same with L1 1e-3 (the Hessian's sum, or the ADMM)
HD_SPARSE = (20000, 100000)                 # 10 clients x 500 rows, 0.1% nonzeros
HD_SPARSE_L1 = 5000                         # 10 x 500 rows at 1%, L1 1e-3 (issue 40)
HD_HUGE = 1_000_000                         # 20 x 5,000 rows at 0.01%, L1 1e-3 (issue 40)
#: no Clarabel row above this d: on the d = 10⁶ case cvxpy/Clarabel asked for 78 GB
#: (docs/benchmarks.md), and the machine has 24
HD_CLARABEL_MAX_DIM = 100_000
HD_REGULARIZERS = {"ridge 1e-2": ("l2", 1e-2), "L1 1e-3": ("l1", 1e-3)}
HD_GRACE = 30.0                             # seconds past --max-time before a kill


def _regularizer(spec):
    kind, lam = spec
    return {"l2": prox.SquaredL2, "l1": prox.L1}[kind](lam)


def _estimator_data():
    """X (3,000 x 2,000, 1% nonzeros, standard normal values), y from a 50-sparse linear
    model plus noise, 5 clients of 600 rows (issue 20's sparse estimator case)."""
    rng = np.random.default_rng(0)
    n, d = 3000, 2000
    X = sp.random(n, d, density=0.01, random_state=rng, format="csr")
    X.data = rng.standard_normal(X.nnz)
    coef = np.zeros(d)
    coef[rng.choice(d, 50, replace=False)] = 3 * rng.standard_normal(50)
    y = (X @ coef + 0.5 * rng.standard_normal(n) > 0).astype(int)
    return X, y, np.repeat(np.arange(5), n // 5)


def hd_problem(build):
    """The problem of a high-dimensional case from its (picklable) description."""
    kind = build[0]
    if kind == "dense":                     # ("dense", n, rows, d[, regularizer spec])
        spec = build[4] if len(build) > 4 else ("l2", 1e-3)
        return _synthetic(*build[1:4], regularizer=_regularizer(spec))
    if kind == "sparse":        # ("sparse", d, regularizer spec[, density[, clients, rows]])
        density = build[3] if len(build) > 3 else 0.001
        n, rows = build[4:6] if len(build) > 4 else (10, 500)
        return _sparse(n, rows, build[1], density, regularizer=_regularizer(build[2]))
    if kind == "estimator":                 # the problem NeymanPearsonClassifier solves
        captured = {}
        original = cf.problems.neyman_pearson

        def capture(*args, **kwargs):
            captured["problem"] = original(*args, **kwargs)
            raise _Captured
        cf.problems.neyman_pearson = capture
        try:
            X, y, ids = _estimator_data()
            cf.NeymanPearsonClassifier(0.3).fit(X, y, client_ids=ids)
        except _Captured:
            return captured["problem"]
        finally:
            cf.problems.neyman_pearson = original
    raise ValueError(f"unknown case {build!r}")


class _Captured(Exception):
    pass


def _upload(res, clients):
    """(mean, max) bytes up per client a round: the whole solve's mean, and the largest
    of the outer iterations' means (from the cumulative counts in ``res.history``)."""
    mean = res.bytes_up / max(res.rounds, 1) / clients
    rounds, up = [0], [0]
    for rec in res.history:
        rounds.append(rec["rounds"])
        up.append(rec["bytes_up"])
    per = [(u1 - u0) / (r1 - r0) / clients for r0, r1, u0, u1
           in zip(rounds, rounds[1:], up, up[1:]) if r1 > r0]
    return mean, max(per, default=float("nan"))


def _warm_up(task):
    """An untimed solve of two tiny problems (dense and sparse rows) with the task's
    solver, so that the timed call pays no first-call costs (imports, numba's cache);
    for constrfl also the sparse one with ``inner="newton-basis"`` and L1, whose
    kernels (the sparse Hessian's pattern, a working set's submatrix) ``auto`` does not
    reach at that size."""
    from constrfl.groundtruth import TIGHT
    for tiny in (_synthetic(2, 20, 5), _sparse(2, 30, 80, 0.1)):
        if task["solver"] == "clarabel":
            cf.certify(tiny, tiny.start_point(), **TIGHT, time_limit=10.0)
        else:
            cf.solve(tiny, tol=1e-6, max_time=10.0, **task["opts"])
    if task["solver"] != "clarabel" and "inner" not in task["opts"]:
        cf.solve(_sparse(2, 30, 400, 0.02, regularizer=prox.L1(1e-3)), tol=1e-6,
                 max_time=10.0, inner="newton-basis", private=False)


def hd_run(task):
    """One measured call (in its own process, see common.run_isolated): build the case
    (not timed), then ``cf.solve`` / the estimator's ``fit`` / ``cf.certify`` (cvxpy and
    Clarabel on the pooled problem, build included) with wall, CPU and peak memory."""
    from constrfl.groundtruth import TIGHT
    T = task["T"]
    _warm_up(task)
    if task["build"][0] == "estimator" and task["solver"] == "constrfl":
        X, y, ids = _estimator_data()
        problem = None
    else:
        problem = hd_problem(task["build"])
    before = C.peak_rss_mb()
    t, c = time.perf_counter(), time.process_time()
    if task["solver"] == "clarabel":
        cert = cf.certify(problem, problem.start_point(), **TIGHT, time_limit=T)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        return dict(status=cert.reference_status, wall=wall, cpu=cpu,
                    peak_mb=C.peak_rss_mb(), build_mb=before,
                    stationarity=cert.reference_kkt.stationarity, message="")
    if problem is None:
        est = cf.NeymanPearsonClassifier(0.3, on_failure="warn",
                                         solver_options=dict(task["opts"], max_time=T))
        est.fit(X, y, client_ids=ids)
        res = est.result_
    else:
        res = cf.solve(problem, tol=1e-6, max_time=T, **task["opts"])
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    clients = max(len(res.multipliers) - ("server" in res.multipliers), 1)
    up, up_max = _upload(res, clients)
    return dict(status=res.status, wall=wall, cpu=cpu, peak_mb=C.peak_rss_mb(),
                build_mb=before, rounds=res.rounds, outer=res.outer_iterations,
                up=up, up_max=up_max, inner=res.settings.get("inner"),
                stationarity=res.kkt.stationarity, message=res.message, dim=res.w.size)


def hd_failure(task, status, message, elapsed=None):
    """The record of a call that gave no answer (an error, a killed or dead process)."""
    return dict(status=status, message=message, wall=elapsed)


def hd_cases(quick=False):
    """``[(case, build, d, [(label, opts)])]``: the rows of issue 20's item 4, with the
    previous default (``inner="newton-cg"``) beside the defaults where it is another
    solve."""
    defaults, cg = ("defaults", {}), ('inner="newton-cg"', {"inner": "newton-cg"})
    shown = ("private=False", {"private": False})
    if quick:
        return [("NP dense d=20, 4 clients x 30 rows, ridge 1e-3 (smoke)",
                 ("dense", 4, 30, 20), 20, [defaults])]
    out = [(f"NP dense d={d:,}, 20 x 200 rows, ridge 1e-3", ("dense", 20, 200, d), d,
            [defaults, cg, shown]) for d in HD_DENSE]
    out += [(f"NP dense d={d:,}, 20 x 200 rows, L1 1e-3", ("dense", 20, 200, d, ("l1", 1e-3)),
             d, [defaults, ('inner="admm"', {"inner": "admm"}), shown]) for d in HD_DENSE_L1]
    for d in HD_SPARSE:
        for reg, spec in HD_REGULARIZERS.items():
            out.append((f"NP sparse d={d:,} (0.1% nonzeros), 10 x 500 rows, {reg}",
                        ("sparse", d, spec), d,
                        [defaults] + ([cg] if spec[0] == "l2" else []) + [shown]))
    d = HD_SPARSE_L1
    out.append((f"NP sparse d={d:,} (1% nonzeros), 10 x 500 rows, L1 1e-3",
                ("sparse", d, ("l1", 1e-3), 0.01), d, [defaults, shown]))
    d = HD_HUGE
    out.append((f"NP sparse d={d:,} (0.01% nonzeros), 20 x 5,000 rows, L1 1e-3",
                ("sparse", d, ("l1", 1e-3), 1e-4, 20, 5000), d, [defaults]))
    out.append(("NeymanPearsonClassifier(0.3), sparse X 3,000 x 2,000 (1%), 5 x 600 rows",
                ("estimator",), 2001, [defaults, shown]))
    return out


def _auto(build, **options):
    """The inner solver ``inner="auto"`` picks for a case with ``options`` (None for the
    estimator)."""
    from constrfl.settings import settings_for
    if build[0] == "estimator":
        return None
    return settings_for("fedproxal", options, hd_problem(build)).inner


def hd_row(case, label, r, ref):
    """The table row of record ``r`` (``ref``: Clarabel's record of the case, or None)."""
    f = C.fmt
    inner = f" ({r['inner']})" if r.get("inner") else ""
    if r.get("up") is not None:
        up = (f"{r['up'] / 1e3:,.0f} / {r['up_max'] / 1e3:,.0f} "
              f"({r['up'] / RING_BYTES / r['dim']:.2g}·d)")
    else:
        up = ""
    answered = ("optimal", "optimal_inaccurate")     # cvxpy's statuses with a point
    if label.startswith("cvxpy"):
        ratio = "1.0" if r["status"] in answered else ""
    elif ref is None:
        ratio = "–"
    elif ref["status"] in answered:
        ratio = "–" if not r.get("wall") else (
            f"{r['wall'] / ref['wall']:.2g}" if r["status"] == "optimal" else
            f"≥ {r['wall'] / ref['wall']:.2g} (unsolved)")    # stopped: a lower bound
        ratio += "" if ref["status"] == "optimal" else f" (Clarabel {ref['status']})"
    else:
        ratio = f"Clarabel failed: {ref['status']}"
    peak = (f"{r['peak_mb']:,.0f} ({r['build_mb']:,.0f})" if r.get("build_mb") is not None
            else f(r.get("peak_mb"), ",.0f"))
    return [case, label + inner, r["status"], f(r.get("rounds"), "d"), f(r.get("outer"), "d"),
            up, f(r.get("wall"), ".2f"), f(r.get("cpu"), ".2f"), peak,
            f(r.get("stationarity"), ".1e"), ratio]


def highdim(args):
    """Run the high-dimensional rows, each call in its own process (``--in-process``:
    here), and write ``bench_highdim.md``."""
    T, TC = args.max_time, args.clarabel_max_time or args.max_time
    wanted = None if args.cases is None else args.cases.split("|")
    cases = [c for c in hd_cases(args.quick)
             if wanted is None or any(text in c[0] for text in wanted)]
    if not cases:
        raise SystemExit(f"no high-dimensional case contains {args.cases!r}")
    C.one_thread_per_worker()
    t0 = time.perf_counter()
    rows, notes, records = [], [], []

    def run(task, limit):
        if args.in_process:
            try:
                return hd_run(task)
            except Exception as err:        # noqa: BLE001 - recorded, not hidden
                return hd_failure(task, *C.error_record(err))
        return C.run_isolated(hd_run, task, limit, hd_failure)

    with C.interruptible(records, "calls"):
        for case, build, d, solvers in cases:
            ref = None
            if d > HD_CLARABEL_MAX_DIM and not args.no_clarabel:
                rows.append([case, "cvxpy/Clarabel (pooled)", "not run", *[""] * 8])
                notes.append(f"{case}: no Clarabel row above d = {HD_CLARABEL_MAX_DIM:,} "
                             "(on this case cvxpy/Clarabel asked for 78 GB; the machine "
                             "has 24)")
            elif not args.no_clarabel:
                ref = run(dict(build=build, solver="clarabel", T=TC), TC + HD_GRACE)
                records.append(ref)
                rows.append(hd_row(case, "cvxpy/Clarabel (pooled)", ref, None))
                print(" | ".join(rows[-1]), flush=True)
            auto = _auto(build)
            for label, opts in solvers:
                same = (opts.get("inner") == auto or
                        (opts.get("private") is False and _auto(build, **opts) == auto))
                if same and label != "defaults":
                    rows.append([case, label, "same solve as defaults", *[""] * 8])
                    notes.append(f"{case}: {label} is the solve of the defaults row "
                                 f"(`inner=\"auto\"` picks {auto} there), not run twice")
                    continue
                r = run(dict(build=build, solver="constrfl", opts=opts, T=T), T + HD_GRACE)
                records.append(r)
                rows.append(hd_row(case, label, r, ref))
                print(" | ".join(rows[-1]), flush=True)
                if r["status"] != "optimal":
                    notes.append(f"{case}, {label}: `{r['status']}`: "
                                 f"{' '.join(str(r.get('message', '')).split())[:300]}")
            if ref is not None and ref["status"] != "optimal":
                notes.append(f"{case}, Clarabel: `{ref['status']}`"
                             + (f": {' '.join(str(ref['message']).split())[:300]}"
                                if ref.get("message") else ""))
    how = ("every call in this process (--in-process: peak memory is the process's)"
           if args.in_process else
           "every call (ours and Clarabel's) in its own spawned process with one BLAS "
           f"thread, killed {HD_GRACE:g} s past its time limit (status `killed`), after "
           "an untimed warm-up solve of two tiny problems with the same solver (for "
           "constrfl a third: the sparse one with L1 and `inner=\"newton-basis\"`)")
    head = ([f"cases: only those whose name contains {' or '.join(map(repr, wanted))} "
             "(`--cases`)"]
            if args.cases else []) + [
        f"time limits: ours `max_time` = {T:g} s; Clarabel `time_limit` = {TC:g} s"
        + (" (cut below ours to keep the run short)" if TC < T else "")
        + f"; {how}",
        "problems: Neyman-Pearson (30) via `constrfl.problems.neyman_pearson`, "
        "`stratified_split` over the clients, tol = 1e-6 (ε₁ = ε₂), all other options at "
        "their defaults; dense: `make_classification(n_samples=4000, n_features=d-1, "
        "seed=0)`, 20 clients x 200 rows, max_class1_loss 0.2, `prox.SquaredL2(1e-3)` "
        "(or `prox.L1(1e-3)` where the case says L1); "
        "sparse: bench.py's `_sparse()` (standard normal values at the density the case "
        "names, labels "
        "from a 50-sparse linear model plus noise, an intercept column), 10 clients x 500 "
        "rows unless the case says otherwise, max_class1_loss 0.3 (as `_sparse()`), "
        "`prox.SquaredL2(1e-2)` or "
        "`prox.L1(1e-3)`; the estimator: `cf.NeymanPearsonClassifier(0.3).fit(X, y, "
        "client_ids=ids)` with its defaults (alpha 1e-2, intercept), its Clarabel row "
        "certifies the problem the estimator builds",
        "columns: wall and CPU s of the call alone (building the data and the problem "
        "not timed; Clarabel's includes cvxpy's compilation, via "
        "`cf.certify(problem, problem.start_point())` with certify's tight tolerances); "
        "'up' is KB up per client a round: the solve's mean (bytes_up / rounds / "
        "clients) / the largest mean of one outer iteration (from `res.history`; "
        "newton-basis's basis rounds fall in the first), and the mean in entries of the "
        "exact sum (32 bytes each; a disclosed float of `private=False` counts 8 bytes) as "
        "a multiple of d; 'defaults' sends only sums, 'private=False' also the parties' "
        "compact Hessians (newton-basis where `auto` picks it); "
        "peak MB is the process's `ru_maxrss` at the end (in parentheses: at the start of "
        "the timed call, i.e. Python, the data and the problem); stationarity is the "
        "final KKT stationarity (Clarabel: of its point, recomputed by `constrfl.residuals`); "
        "'x Clarabel' the ratio of wall times in the same run",
        "rounds are deterministic; times are noisy: 2 cores shared with other jobs (see "
        "the load averages)",
        *notes, *args.note]
    title = ("Benchmark, high-dimensional rows (issue 20): fedproxal vs. cvxpy/Clarabel "
             "on the pooled problem")
    columns = ["case", "solver (inner)", "status", "rounds", "outer",
               "up KB: mean / max (entries·d)",
               "wall s", "CPU s", "peak MB (start)", "stationarity", "x Clarabel"]
    text = C.header(title, time.perf_counter() - t0, head) + "\n" + C.md_table(columns, rows)
    C.write(C.output_path(args), text)
    return rows


def timed(fn, repeats):
    """(result, median wall, median CPU, runs)."""
    walls, cpus = [], []
    while True:
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
        if len(walls) >= repeats or walls[0] >= SLOW:
            return out, statistics.median(walls), statistics.median(cpus), len(walls)


def row(name, label, res, wall, cpu, runs, ref_cpu):
    up = res.bytes_up / max(res.rounds, 1) / RING_BYTES       # entries of the exact sum
    n = max(len(res.multipliers) - ("server" in res.multipliers), 1)
    return (name, label, res.status, str(res.rounds), str(res.outer_iterations),
            f"{up / n:.0f}", f"{wall:.2f}", f"{cpu:.2f}", str(runs),
            f"{res.kkt.stationarity:.1e}", f"{res.kkt.definition1:.1e}",
            f"{cpu / ref_cpu:.1f}" if ref_cpu else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=C.data_dir(),
                    help="directory holding the UCI data folders "
                         "(default $CONSTRFL_DATA or ../shared/data)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs per solver; the median time is reported (default 3)")
    ap.add_argument("--max-time", type=float, default=300.0,
                    help="seconds after which a solve stops with 'time_limit' [default 300]")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: NP breast-cancer-wisconsin n = 10 only, one repeat")
    ap.add_argument("--highdim", action="store_true",
                    help="run the high-dimensional rows instead (issue 20), writing "
                         f"{HD_FILE}; with --quick a tiny smoke row in this process")
    ap.add_argument("--clarabel-max-time", type=float, default=None,
                    help="--highdim: Clarabel's time limit (default --max-time)")
    ap.add_argument("--in-process", action="store_true",
                    help="--highdim: run every call here instead of a spawned process "
                         "each (no kill at the time limit; implied by --quick)")
    ap.add_argument("--no-clarabel", action="store_true",
                    help="--highdim: skip the Clarabel rows")
    ap.add_argument("--cases", default=None, metavar="TEXT[|TEXT...]",
                    help="--highdim: only the cases whose name contains one of the TEXTs")
    ap.add_argument("--note", action="append", default=[],
                    help="--highdim: a line for the header")
    C.add_output_args(ap, "bench.md")
    args = ap.parse_args(argv)
    if args.highdim:
        args.output_name = HD_FILE
        args.in_process = args.in_process or args.quick
        return highdim(args)
    if args.quick:
        args.repeats = 1

    load = os.getloadavg()[0]
    rows = []
    for name, problem, reference in cases(args.data, args.quick):
        ref_cpu = None
        if reference:
            ref, wall, ref_cpu, k = timed(
                lambda: cf.certify(problem, problem.start_point()), args.repeats)
            rows.append((name, "cvxpy/Clarabel (pooled)", ref.reference_status, "", "", "",
                         f"{wall:.2f}", f"{ref_cpu:.2f}", str(k),
                         f"{ref.reference_kkt.stationarity:.1e}",
                         f"{ref.reference_kkt.definition1:.1e}", "1.0"))
            print(f"{name}: Clarabel {ref_cpu:.3f}s CPU", flush=True)
        for label, opts in SOLVERS.items():
            res, wall, cpu, k = timed(lambda: cf.solve(problem, tol=1e-6,
                                                       max_time=args.max_time, **opts),
                                      args.repeats)
            rows.append(row(name, f"{label} ({res.settings['inner']})", res, wall, cpu, k,
                            ref_cpu))
            print("  " + " | ".join(rows[-1][1:]), flush=True)
    if not args.quick:
        name = "FairClassifier(max_disparity=0.05), adult, 5 clients"
        for label, opts in SOLVERS.items():
            res, wall, cpu, k = timed(lambda: fair_adult(args.data, opts, args.max_time),
                                      args.repeats)
            rows.append(row(name, f"{label} ({res.settings['inner']})", res, wall, cpu, k,
                            None))
            print("  " + " | ".join(rows[-1][1:]), flush=True)

    lines = ["# Benchmark: fedproxal (pure defaults and inner=\"admm\") vs. cvxpy/Clarabel",
             "", f"Command: `{C.command_line()}`; {time.strftime('%Y-%m-%d')}, "
             f"{os.cpu_count()} cores, load average {load:.2f} at the start (a shared "
             "machine: other jobs ran at the same time; compare CPU times).  tol = 1e-6 "
             "(ε₁ = ε₂); times are medians over n runs; 'up' is the entries (of the exact sum, 32 bytes each) a client "
             "uploads per round on average; 'x Clarabel' the ratio of CPU times on the "
             "same case in the same run (cvxpy's compilation included).", "",
             "| case | solver (inner) | status | rounds | outer | up | wall (s) | CPU (s) "
             "| n | stationarity | Definition 1 | x Clarabel |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    C.write(C.output_path(args), "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
