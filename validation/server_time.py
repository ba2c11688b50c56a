"""The server's work in a round (issue 19's target: ≤ 10 ms for n ≤ 250 with a Box or
L1): every Maros–Meszaros QP with n ≤ ``--max-n``, federated over K clients as in
qp_benchmark.py, solved in process with ``cf.solve(problem, tol=1e-6,
max_time=--time-limit)``.  The server's time is the solve's wall time less the time
spent inside ``Federation.broadcast`` (the parties' handlers and the in-process
transport); divided by the rounds it is the server's work in a round: the outer loop,
the Newton steps with their exact box step, the sums of the replies.  One BLAS thread;
an untimed first solve of each problem compiles what it needs.

    python validation/server_time.py                 # n ≤ 250, K = 5, 20 s a solve
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C                                                # noqa: E402

C.one_thread_per_worker()                   # before numpy loads its BLAS
import numpy as np                                                # noqa: E402

import constrfl as cf                                             # noqa: E402
from constrfl.federation import base                              # noqa: E402
from constrfl.problems import federated_qp                        # noqa: E402
from constrfl.problems.datasets import load_maros_meszaros        # noqa: E402

TARGET_MS = 10.0


class BroadcastClock:
    """Seconds spent inside ``Federation.broadcast`` while installed."""

    def __init__(self):
        self.inside, self._original = 0.0, base.Federation.broadcast

    def __enter__(self):
        original = self._original

        def timed(fed, *args, **kwargs):
            start = time.perf_counter()
            try:
                return original(fed, *args, **kwargs)
            finally:
                self.inside += time.perf_counter() - start
        base.Federation.broadcast = timed
        return self

    def __exit__(self, *exc):
        base.Federation.broadcast = self._original


def measure(qp, K, T):
    problem = federated_qp(qp.P, qp.q, qp.A, qp.l, qp.u, qp.r, n_clients=K, name=qp.name)
    cf.solve(problem, tol=1e-6, max_time=min(T, 5.0))             # compile, untimed
    with BroadcastClock() as clock:
        start = time.perf_counter()
        res = cf.solve(problem, tol=1e-6, max_time=T)
        total = time.perf_counter() - start
    rounds = max(res.rounds, 1)
    return dict(name=qp.name, n=qp.n, status=res.status, rounds=res.rounds,
                total=total, server_ms=1e3 * (total - clock.inside) / rounds,
                parties_ms=1e3 * clock.inside / rounds)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-n", type=int, default=250)
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--data", default=C.data_dir())
    C.add_output_args(ap, "server_time.md")
    args = ap.parse_args(argv)
    out = C.output_path(args)
    files = sorted((Path(args.data) / "maros_meszaros").glob("*.mat"))
    if not files:
        sys.exit(f"no Maros-Meszaros .mat files in {args.data}/maros_meszaros")
    t0, rows = time.perf_counter(), []
    for path in files:
        qp = load_maros_meszaros(path)
        if qp.n > args.max_n:
            continue
        r = measure(qp, args.clients, args.time_limit)
        rows.append(r)
        print(f"{r['name']:10s} n={r['n']:4d} {r['status']:18s} rounds={r['rounds']:6d} "
              f"server {r['server_ms']:6.2f} ms/round", flush=True)
    over = [r for r in rows if r["server_ms"] > TARGET_MS]
    server = np.array([r["server_ms"] for r in rows])
    notes = [f"K = {args.clients} clients, n ≤ {args.max_n}, time limit "
             f"{args.time_limit:g} s a solve, one BLAS thread, in process",
             f"server's work in a round: median {np.median(server):.2f} ms, largest "
             f"{server.max():.2f} ms; above {TARGET_MS:g} ms: "
             + (", ".join(r["name"] for r in over) or "none")]
    table = C.md_table(["problem", "n", "status", "rounds", "time (s)",
                        "server (ms/round)", "parties + transport (ms/round)"],
                       [(r["name"], r["n"], r["status"], r["rounds"], f"{r['total']:.2f}",
                         f"{r['server_ms']:.2f}", f"{r['parties_ms']:.2f}") for r in rows])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(C.header("The server's work in a round (Maros–Meszaros, in process)",
                            time.perf_counter() - t0, notes) + "\n" + table)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
