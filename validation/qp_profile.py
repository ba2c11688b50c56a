"""Profiles of Maros–Meszaros problems (issue 19: "each miss explained with a profile"):
each named QP, federated as in qp_benchmark.py over K clients, solved in process by
``cf.solve(problem, tol=1e-6, max_time=T)`` under cProfile, after an untimed solve that
compiles what it needs.  Per problem: how the solve ended, where its time went (the
server's work against the time inside ``Federation.broadcast``, i.e. the parties'
handlers and the in-process transport, and the functions with the most own time), and
the last outer iterations (β, η, residuals, whether the subproblem met its τ_k, the
largest absolute wⱼ).  One BLAS thread.

    python validation/qp_profile.py QGROW22 CVXQP3_M          # K = 5, 60 s
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C                                                # noqa: E402

C.one_thread_per_worker()                   # before numpy loads its BLAS
import numpy as np                                                # noqa: E402

import constrfl as cf                                             # noqa: E402
from constrfl.problems import federated_qp                        # noqa: E402
from constrfl.problems.datasets import load_maros_meszaros        # noqa: E402
from server_time import BroadcastClock                            # noqa: E402

TOP = 6          # functions listed by own time
LAST = 4         # outer iterations listed


def profile(qp, K, T):
    problem = federated_qp(qp.P, qp.q, qp.A, qp.l, qp.u, qp.r, n_clients=K, name=qp.name)
    cf.solve(problem, tol=1e-6, max_time=min(T, 5.0))             # compile, untimed
    profiler = cProfile.Profile()
    with BroadcastClock() as clock:
        start = time.perf_counter()
        profiler.enable()
        res = cf.solve(problem, tol=1e-6, max_time=T)
        profiler.disable()
        total = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats
    own = sorted(((v[2], f"{Path(k[0]).name}:{k[1]}({k[2]})", v[1]) for k, v in stats.items()),
                 reverse=True)[:TOP]
    profiled = sum(v[2] for v in stats.values())
    return dict(name=qp.name, n=qp.n, m=qp.A.shape[0], res=res, total=total,
                inside=clock.inside, own=own, profiled=profiled)


def section(p):
    res, rounds = p["res"], max(p["res"].rounds, 1)
    lines = [f"## {p['name']} (n = {p['n']}, m = {p['m']})", "",
             f"* status `{res.status}` after {res.rounds} rounds, {p['total']:.1f} s: "
             f"{res.message}",
             f"* time: the server {p['total'] - p['inside']:.1f} s "
             f"({1e3 * (p['total'] - p['inside']) / rounds:.1f} ms a round), inside "
             f"broadcast (the parties and the transport) {p['inside']:.1f} s "
             f"({1e3 * p['inside'] / rounds:.1f} ms a round)",
             "* most own time (cProfile; the percentages are of the profiled total "
             f"{p['profiled']:.1f} s):", ""]
    lines += [f"  - {name}: {t:.2f} s ({100 * t / p['profiled']:.0f}%), {calls} calls"
              for t, name, calls in p["own"]]
    rows = [(h["k"], f"{h['beta']:.0e}", f"{h.get('eta', h['beta']):.0e}",
             f"{h['tau']:.1e}", "yes" if h["inner_converged"] else "no",
             h["inner_iterations"], h["rounds"], f"{h['stationarity']:.2e}",
             f"{h['definition1']:.2e}", f"{h['w_norm']:.2e}") for h in res.history[-LAST:]]
    columns = ["outer k", "β", "η", "τ_k", "met τ_k", "inner steps", "rounds",
               "stationarity", "Definition 1", "largest wⱼ (abs.)"]
    lines += ["", C.md_table(columns, rows) if rows else "(no outer iteration ended)", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problems", nargs="+", metavar="NAME")
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--data", default=C.data_dir())
    ap.add_argument("--note", action="append", default=[])
    C.add_output_args(ap, "qp_profile.md")
    args = ap.parse_args(argv)
    t0, sections = time.perf_counter(), []
    for name in args.problems:
        path = Path(args.data) / "maros_meszaros" / f"{name}.mat"
        if not path.exists():
            sys.exit(f"no {path}")
        p = profile(load_maros_meszaros(path), args.clients, args.time_limit)
        print(f"{name:10s} {p['res'].status:18s} rounds={p['res'].rounds:6d} "
              f"{p['total']:6.1f} s", flush=True)
        sections.append(section(p))
    notes = [f"K = {args.clients} clients, time limit {args.time_limit:g} s a solve, "
             "one BLAS thread, in process, under cProfile (which slows Python-heavy "
             "code)", *args.note]
    C.write(C.output_path(args), C.header("Profiles of Maros–Meszaros problems",
                                          time.perf_counter() - t0, notes)
            + "\n" + "\n".join(sections))


if __name__ == "__main__":
    main()
