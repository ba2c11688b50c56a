"""Shared helpers of the validation scripts (table1.py, table2.py, lcqp_e2.py; the
output options also bench.py and compare_baselines.py).

* :func:`add_output_args`, :func:`output_path`: every script writes to ``--out-dir``
  (default ``validation/out/``, not committed), or with ``--update-results`` to the
  committed ``validation/results/``, or to the file ``--out``.
* :func:`solver_variants`: the methods each script runs: ``fedproxal`` with each inner
  solver (``inner="admm"``, ``inner="newton"``) and ``cproxal``, restricted by
  ``--methods``.
* :func:`run_case`: one solve, never raising: a solver error becomes a record.
* :func:`run_cases` (via :func:`run_all`): run cases serially or in ``--jobs`` worker processes.
* :func:`interruptible`, :func:`one_thread_per_worker`: what every scheduler of solves
  does (also qp_benchmark.py's, one process per solve).
* :func:`run_isolated`, :func:`peak_rss_mb`: one call in its own spawned process, killed
  past a hard limit, with its peak memory (bench.py --highdim).
* :func:`header`, :func:`md_table`, :func:`fmt`, :func:`mean_std`: the markdown.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import platform
import shlex
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "validation" / "results"      # committed: cited by the README
OUT = ROOT / "validation" / "out"              # default output, ignored by git
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The paper's settings (its §5.1, §5.2, E.2; docs/algorithms.md §6), reported next to ours.
PAPER_SETTINGS = "β = 300, ρᵢ = 0.01 (fixed), s̄ = 10⁻³ with τ_k = s̄/(k+1)², q = 0.9, ε₁ = ε₂ = 10⁻³"
REPORTED_DEFAULTS = ("beta", "rho", "adaptive_rho", "s_bar", "tau_decay", "tau_rel", "max_outer",
                     "max_inner", "local_max_iter", "local_solver", "inner")


# -- data ---------------------------------------------------------------------------------

def add_output_args(parser, filename):
    """--out-dir, --update-results and --out (one of them): where the script writes
    ``filename``; read back by :func:`output_path`."""
    group = parser.add_argument_group("output (one of)").add_mutually_exclusive_group()
    group.add_argument("--out-dir", type=Path, default=OUT, metavar="DIR",
                       help=f"write {filename} (and any figure) into DIR "
                            "(default: validation/out/, not committed)")
    group.add_argument("--update-results", action="store_true",
                       help=f"write validation/results/{filename}, the committed results "
                            "the README cites")
    group.add_argument("--out", type=Path, default=None, metavar="FILE",
                       help="write the markdown to FILE instead")
    parser.set_defaults(output_name=filename)
    return parser


def output_path(args):
    """The markdown file chosen by :func:`add_output_args`."""
    if args.out is not None:
        return args.out
    return (RESULTS if args.update_results else args.out_dir) / args.output_name


def add_common_args(parser, seeds, filename, ridge=False):
    """--quick, --seeds, --clients, --jobs, --data, --methods, --budget, --note, the
    output options of :func:`add_output_args` for ``filename``, and with ``ridge``
    --ridge (read back by :func:`ridge_regularizer`)."""
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: a small subset of the cases (< 2 min)")
    parser.add_argument("--seeds", type=int, default=None,
                        help=f"number of seeds/trials (default {seeds}; 2 with --quick)")
    parser.add_argument("--clients", nargs="+", type=int, default=None,
                        help="numbers of clients n to run (default: the paper's)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="worker processes (default 1; >1 runs cases concurrently, "
                             "one BLAS thread each, so per-solve times are measured under load)")
    parser.add_argument("--data", default=None,
                        help="directory holding the UCI data folders "
                             "(default $CONSTRFL_DATA or ../shared/data)")
    parser.add_argument("--methods", nargs="+", default=None,
                        help="run only these rows, e.g. 'fedproxal[newton]' cproxal "
                             "(labels as in the tables)")
    parser.add_argument("--budget", type=float, default=None,
                        help="wall-time budget per solve in seconds, checked after every "
                             "outer iteration (default: none; table2/lcqp_e2 --quick: 10/15 s); "
                             "a stopped solve is "
                             "recorded as such with its last iterate")
    parser.add_argument("--note", action="append", default=[],
                        help="a line for the header (e.g. why a part was run with fewer seeds)")
    if ridge:
        parser.add_argument("--ridge", type=float, default=None,
                            help="add P(w) = (λ/2)‖w‖²: a strongly convex objective, so a "
                                 "minimizer exists (adult and monks-1 have none without it)")
    return add_output_args(parser, filename)


def ridge_regularizer(lam):
    """``prox.SquaredL2(lam)`` for ``--ridge lam``, None without it."""
    from constrfl import prox
    return prox.SquaredL2(lam) if lam else None


def run_notes(args):
    """Header lines on how the cases were run (workers, time budget)."""
    out = [f"worker processes: {args.jobs}" + (
        " (cases run concurrently; per-solve times are measured under that load)"
        if args.jobs > 1 else "")]
    if args.budget is not None:
        out.append(f"per-solve wall-time budget: {args.budget:g} s (checked after each outer "
                   "iteration; a stopped solve is reported with status `stopped: time "
                   "budget` and the values of its last outer iteration)")
    return out


def data_dir(arg=None):
    return Path(arg or os.environ.get("CONSTRFL_DATA") or (ROOT.parent / "shared" / "data"))


# -- solver variants ----------------------------------------------------------------------

def solver_variants():
    """``[(label, method, extra_kwargs)]``: fedproxal with each inner solver, and
    cproxal (restricted by ``--methods``)."""
    out = [("fedproxal[admm]", "fedproxal", {"inner": "admm"}),
           ("fedproxal[newton]", "fedproxal", {"inner": "newton"}),
           ("cproxal", "cproxal", {})]
    chosen = os.environ.get("CONSTRFL_VALIDATION_METHODS")
    if chosen:
        out = [v for v in out if v[0] in chosen.split(",")]
    return out


def select_methods(args):
    """Apply ``--methods`` (kept in the environment, so spawned workers see it too)."""
    if args.methods:
        os.environ["CONSTRFL_VALIDATION_METHODS"] = ",".join(args.methods)
        labels = [v[0] for v in solver_variants()]
        if not labels:
            raise SystemExit(f"--methods {args.methods}: none of them exists here")
        return [f"methods restricted by `--methods` to {labels}"]
    return []


def settings_text(options):
    """Our settings: the script's explicit options, then cf.solve's defaults."""
    from constrfl.settings import ADMMSettings, NewtonSettings
    d = {**ADMMSettings().to_dict(), **NewtonSettings().to_dict(), "inner": "auto"}
    shown = ", ".join(f"{k} = {v!r}" for k, v in options.items())
    dflt = ", ".join(f"{k} = {d[k]!r}" for k in REPORTED_DEFAULTS if k in d and k not in options)
    return (f"ours: {shown}; everything else `cf.solve`'s defaults ({dflt}). "
            f"Same options for every method. The paper: {PAPER_SETTINGS}.")


class BudgetExceeded(Exception):
    """Raised from the solve callback when a solve passes its time budget."""


def run_case(problem, label, method, options, budget=None, **extra):
    """Solve; return ``(result or None, record)``. Never raises: an exception becomes a
    record with ``status = "error: <type>: <message>"``. With ``budget`` (seconds of wall
    time), the solve is stopped after the first outer iteration that ends past it; the
    record then has status ``"stopped: time budget"`` and the values of that last outer
    iteration, and the result is a namespace with ``w`` and ``objective`` only."""
    import types
    import constrfl as cf
    t0, c0 = time.perf_counter(), time.process_time()
    last = {}

    def callback(state):
        last.clear()
        last.update(state)
        if budget is not None and time.perf_counter() - t0 > budget:
            raise BudgetExceeded

    try:
        res = cf.solve(problem, method=method, callback=callback, **options, **extra)
    except BudgetExceeded:
        t, cpu = time.perf_counter() - t0, time.process_time() - c0
        rec = dict(label=label, status="stopped: time budget",
                   message=f"stopped after {last['k'] + 1} outer iterations ({t:.0f} s > "
                           f"budget {budget:g} s), last stationarity "
                           f"{last['stationarity']:.2e}, Def. 1 {last['definition1']:.2e}",
                   objective=last["objective"], stationarity=last["stationarity"],
                   feasibility=last["feasibility"], complementarity=last["complementarity"],
                   definition1=last["definition1"], rounds=last["rounds"],
                   outer=last["k"] + 1, time=t, cpu=cpu)
        return types.SimpleNamespace(w=last["w"], objective=last["objective"]), rec
    except Exception as err:            # noqa: BLE001 - recorded, not hidden
        tb = traceback.format_exc(limit=3).strip().splitlines()[-1]
        return None, dict(label=label, status=f"error: {type(err).__name__}: {err}",
                          message=tb, time=time.perf_counter() - t0,
                          cpu=time.process_time() - c0)
    cpu = time.process_time() - c0
    k = res.kkt
    return res, dict(label=label, status=res.status, message=res.message,
                     objective=res.objective, stationarity=k.stationarity,
                     feasibility=k.feasibility, complementarity=k.complementarity,
                     definition1=k.definition1, rounds=res.rounds,
                     outer=res.outer_iterations, inner=res.inner_iterations, time=res.time,
                     cpu=cpu)


def certify_case(problem, res):
    """cvxpy reference (dict), never raising."""
    import constrfl as cf
    from constrfl.result import SolveResult
    target = res if isinstance(res, SolveResult) else getattr(res, "w", res)
    try:
        cert = cf.certify(problem, target)
    except Exception as err:            # noqa: BLE001
        return dict(status=f"error: {type(err).__name__}: {err}")
    return dict(status=cert.reference_status, objective=cert.reference_objective,
                w=cert.reference_w, time=cert.reference_time,
                stationarity=cert.reference_kkt.stationarity,
                feasibility=cert.reference_kkt.feasibility)


def _init_worker():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


@contextlib.contextmanager
def interruptible(out, noun="cases"):
    """Run the body with SIGTERM raising KeyboardInterrupt; on either, say how many of
    ``out`` finished (the others are ``None``) and carry on, so that the caller can still
    write what was measured; see :func:`finished`."""
    import signal

    def _term(signum, frame):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, _term)
    try:
        yield
    except KeyboardInterrupt:
        print(f"interrupted: {sum(o is not None for o in out)} of {len(out)} {noun} "
              "finished; writing those", flush=True)
    finally:
        signal.signal(signal.SIGTERM, old)


def one_thread_per_worker():
    """One BLAS (and numba) thread in every process spawned from now on: they inherit
    the environment, which this process read when it started."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS"):
        os.environ[var] = "1"


def run_all(fn, cases, jobs=1, describe=str):
    """``[fn(case) for case in cases]``, in ``jobs`` spawned processes when jobs > 1,
    printing one progress line per finished case. Results come back in case order.
    On Ctrl-C or SIGTERM the finished cases are kept (unfinished ones are ``None``), so
    the caller can still write what was measured; see :func:`finished`."""
    t0 = time.perf_counter()
    out = [None] * len(cases)
    with interruptible(out, "cases"):
        if jobs <= 1:
            for i, c in enumerate(cases):
                out[i] = fn(c)
                _progress(i, len(cases), t0, describe(c), out[i])
        else:
            _run_pool(fn, cases, jobs, describe, out, t0)
    return out


def _run_pool(fn, cases, jobs, describe, out, t0):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    one_thread_per_worker()
    pool = ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"),
                               initializer=_init_worker)
    try:
        futs = {pool.submit(fn, c): i for i, c in enumerate(cases)}
        for n, f in enumerate(as_completed(futs)):
            i = futs[f]
            out[i] = f.result()
            _progress(n, len(cases), t0, describe(cases[i]), out[i])
    except KeyboardInterrupt:
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def run_cases(name, run_one, cases, args, options, describe):
    """Announce, run (:func:`run_all`) and collect one script's cases; exits when none
    finished.  Returns ``(outs, interrupted_notes, wall_seconds)``."""
    print(f"{name}: {len(cases)} cases, methods {[v[0] for v in solver_variants()]}, "
          f"options {options}, jobs {args.jobs}", flush=True)
    t0 = time.perf_counter()
    outs = run_all(run_one, cases, args.jobs, describe)
    wall = time.perf_counter() - t0
    outs, interrupted = finished(outs, cases)
    if not outs:
        sys.exit("no case finished; nothing written")
    return outs, interrupted, wall


def finished(outs, cases):
    """The finished results and, if some are missing, a header note saying so."""
    done = [o for o in outs if o is not None]
    note = ([] if len(done) == len(cases) else
            [f"**interrupted: only {len(done)} of {len(cases)} cases finished**; the table "
             "holds those"])
    return done, note


def _progress(i, n, t0, what, result):
    recs = result.get("runs", []) if isinstance(result, dict) else []
    tail = "; ".join(f"{r['label']} {r['status']} {r.get('time', float('nan')):.1f}s "
                     f"(cpu {r.get('cpu', float('nan')):.1f}s)" for r in recs)
    print(f"[{i + 1}/{n} {time.perf_counter() - t0:7.1f}s] {what}: {tail}", flush=True)


# -- one measured call in its own process (bench.py --highdim) -----------------------------

def peak_rss_mb():
    """This process's peak resident set size so far, in MB (``ru_maxrss``: KB on Linux,
    bytes on macOS)."""
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 ** 2 if sys.platform == "darwin" else 1024.0)


def error_record(err):
    """``(status, message)`` of an exception a measured call raised: its type, its text
    and where it was raised."""
    where = traceback.extract_tb(err.__traceback__)[-1]
    return (f"error: {type(err).__name__}",
            f"{err} (at {Path(where.filename).name}:{where.lineno})")


def _isolated(fn, task, failure, conn):
    _init_worker()
    try:
        record = fn(task)
    except Exception as err:            # noqa: BLE001 - recorded, not hidden
        record = failure(task, *error_record(err))
    conn.send(record)
    conn.close()


def start_isolated(fn, task, failure):
    """Start ``fn(task)`` in a fresh spawned process: ``(connection, process)``; an
    exception in ``fn`` comes back as ``failure(task, status, message)``.  ``fn`` and
    ``failure`` must be importable by name (module level)."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_isolated, args=(fn, task, failure, send), daemon=True)
    proc.start()
    send.close()
    return recv, proc


def receive_isolated(recv, proc, task, failure, started):
    """The record of a process of :func:`start_isolated` that has answered or ended
    (``failure(task, "error: worker died", …)`` when it ended without an answer)."""
    try:
        record = recv.recv()
    except EOFError:                    # the process ended without an answer
        record = None
    proc.join()
    recv.close()
    return record or failure(task, "error: worker died", f"exit code {proc.exitcode}",
                             time.perf_counter() - started)


def kill_isolated(recv, proc):
    proc.kill()
    proc.join()
    recv.close()


def run_isolated(fn, task, hard_limit, failure):
    """``fn(task)`` in its own process (:func:`start_isolated`), so that its peak memory
    is its own and a call that hangs (or builds something huge) can be killed: after
    ``hard_limit`` seconds without an answer the record is ``failure(task, "killed",
    …)``.  Ctrl-C kills the process and propagates."""
    started = time.perf_counter()
    recv, proc = start_isolated(fn, task, failure)
    try:
        answered = recv.poll(hard_limit)
    except BaseException:
        kill_isolated(recv, proc)
        raise
    if not answered:
        kill_isolated(recv, proc)
        return failure(task, "killed", f"no answer within the hard limit of {hard_limit:g} s",
                       hard_limit)
    return receive_isolated(recv, proc, task, failure, started)


# -- markdown -----------------------------------------------------------------------------

def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def command_line():
    argv = [Path(sys.argv[0]).resolve().relative_to(ROOT).as_posix()
            if Path(sys.argv[0]).resolve().is_relative_to(ROOT) else sys.argv[0]]
    return "python " + " ".join(shlex.quote(a) for a in argv + sys.argv[1:])


def header(title, wall_time, notes=()):
    """Title, then :func:`provenance`."""
    return f"# {title}\n\n" + provenance(wall_time, notes)


def provenance(wall_time, notes=()):
    """Exact command, machine, versions, date, wall time, then ``notes`` (a bullet list)."""
    import numpy
    import scipy
    try:
        import cvxpy
        cvx = cvxpy.__version__
    except ImportError:
        cvx = "absent"
    import constrfl
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines = [
        "Generated by the script; numbers are as measured (no hand edits).",
        "",
        f"* command: `{command_line()}` (from the repository root)",
        f"* date: {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}",
        f"* machine: {platform.node() or '?'}, {_cpu_model()}, nproc = {ncpu}, "
        f"{platform.system()} {platform.release()}",
        f"* Python {platform.python_version()}, numpy {numpy.__version__}, "
        f"scipy {scipy.__version__}, cvxpy {cvx}, constrfl "
        f"{getattr(constrfl, '__version__', '?')}",
        f"* total wall time of the script: {wall_time:.1f} s; load average at the start "
        f"{LOAD_AT_IMPORT} and at the end {_loadavg()} (the machine may be shared: other "
        "processes inflate the times)",
    ]
    lines += [f"* {n}" for n in notes]
    return "\n".join(lines) + "\n"


SECTION = "<!-- section: {} -->"
END = "<!-- end of section -->"


def merge_sections(path, top, sections, order):
    """Write ``top`` and the named ``sections`` to ``path``, keeping the sections of an
    existing file that this run did not produce (each section carries its own
    provenance), in ``order``."""
    import re
    path = Path(path)
    kept = {}
    if path.exists():
        text = path.read_text()
        for m in re.finditer(r"<!-- section: (.+?) -->\n(.*?)<!-- end of section -->\n",
                             text, re.S):
            kept[m.group(1)] = m.group(2)
    kept.update(sections)
    body = [top]
    for name in list(order) + [k for k in kept if k not in order]:
        if name in kept:
            body.append(SECTION.format(name) + "\n" + kept[name] + END + "\n")
    write(path, "\n".join(body))


def _loadavg():
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


LOAD_AT_IMPORT = _loadavg()


def fmt(x, spec=".3g"):
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    try:
        if x != x:                      # nan
            return "–"
    except TypeError:
        return str(x)
    return format(x, spec)


def mean_std(values, spec=".4g"):
    """``"mean ± std"`` (population std) over the finite values, '–' if none."""
    import numpy as np
    v = np.array([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return "–"
    if v.size == 1:
        return format(v[0], spec)
    return f"{format(v.mean(), spec)} ± {format(v.std(), '.2g')}"


def stat(values, how):
    """max / mean / min of the finite values (nan if none)."""
    import numpy as np
    v = np.array([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return float("nan")
    return float(getattr(np, how)(v))


def optimal_cell(records):
    """``"k/N"`` optimal runs, with the number of solver errors if any."""
    ok = sum(r["status"] == "optimal" for r in records)
    errors = sum(r["status"].startswith("error") for r in records)
    return f"{ok}/{len(records)}" + (f" ({errors} errors)" if errors else "")


def mean_max(values):
    """``"mean / max"`` in ``.1e``, or ``–`` when no value was measured."""
    if all(x is None for x in values):
        return "–"
    return f"{fmt(stat(values, 'mean'), '.1e')} / {fmt(stat(values, 'max'), '.1e')}"


def md_table(columns, rows):
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def failures_section(records):
    """Markdown list of the runs that did not end "optimal" (``records``: dicts with
    ``case`` and ``label``, ``status``, ``message``)."""
    bad = [r for r in records if r["status"] != "optimal"]
    if not bad:
        return "All runs ended with status `optimal`.\n"
    lines = [f"{len(bad)} of {len(records)} runs did not end `optimal`:", ""]
    lines += [f"* {r['case']}, {r['label']}: `{r['status']}` — {r.get('message', '')}"
              for r in bad]
    return "\n".join(lines) + "\n"


def write(path, text):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}", flush=True)
