"""How building a problem and solving it grow with the number of clients (issue "A
fresh install passes its own tests", item 6): Neyman-Pearson on synthetic data, d = 20,
10 rows a client (``make_classification``, the template with ``stratified_split``), at
1,000, 10,000 and 100,000 clients: the seconds to build the problem (the template) and
to solve it (defaults, tol 1e-6), its rounds and the process's peak memory.  Each size
runs in its own process (its own peak memory).

    python validation/build_scale.py [--clients 1000 10000 100000] [--update-results]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C                                                # noqa: E402


def run(task):
    """Build and solve one size (in its own process); a record of the numbers."""
    import constrfl as cf
    from constrfl.problems import neyman_pearson
    from constrfl.problems.datasets import make_classification
    from constrfl.problems.partition import stratified_split
    n = task["clients"]
    data = make_classification(n_samples=10 * n, n_features=19, seed=0)
    ids = stratified_split(data.y, n, seed=0)
    t = time.perf_counter()
    problem = neyman_pearson(data.X, data.y, ids, 0.2)
    build = time.perf_counter() - t
    t = time.perf_counter()
    res = cf.solve(problem, max_time=task["max_time"])
    solve = time.perf_counter() - t
    return dict(clients=n, build=build, solve=solve, status=res.status, rounds=res.rounds,
                peak_mb=C.peak_rss_mb())


def failed(task, status, message, elapsed=None):
    """The record of a size whose process failed or was killed."""
    return dict(clients=task["clients"], status=status, message=message)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--max-time", type=float, default=900.0)
    ap.add_argument("--note", action="append", default=[])
    C.add_output_args(ap, "build_scale.md")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = []
    for n in args.clients:
        r = C.run_isolated(run, dict(clients=n, max_time=args.max_time),
                           args.max_time + 600, failed)
        print(r, flush=True)
        rows.append([f"{n:,}", C.fmt(r.get("build"), ".2f"), C.fmt(r.get("solve"), ".1f"),
                     C.fmt(r.get("build") / r["solve"] if r.get("solve") else None, ".3f"),
                     r["status"], C.fmt(r.get("rounds"), "d"), C.fmt(r.get("peak_mb"), ",.0f")])
    head = ["NP, synthetic (make_classification, d = 20), 10 rows a client, "
            "stratified_split, max_class1_loss 0.2; the solve with cf.solve's defaults "
            "(tol 1e-6); each size in its own process", *args.note]
    text = (C.header("Building a problem and solving it, by the number of clients",
                     time.perf_counter() - t0, head) + "\n"
            + C.md_table(["clients", "build s", "solve s", "build / solve", "status",
                          "rounds", "peak MB"], rows))
    C.write(C.output_path(args), text)


if __name__ == "__main__":
    main()
