"""constrfl on Flower, end to end: the Neyman-Pearson example in-process, on the
in-memory Grid, in Flower's Ray simulation and as a localhost deployment (one SuperLink,
one SuperNode per site) in each ClientApp isolation mode; the per-round cost of each,
the final KKT residuals, and the equality of every answer with the in-process one.

    python validation/flower_deploy.py [--sites 5] [--tol 1e-4] [--skip-ray]
        [--modes subprocess,subprocess-fast,process-fast,process-fast-restart]
        [--full-mode process-fast]
        [--out validation/results/flower.md]

The deployment of ``--full-mode`` runs the example to ``tol`` (end to end); the other
modes run its first two outer iterations (``max-outer=2``, ``tol=1e-3``), enough to
measure their cost per round.  Per-round costs are the slope of wall time against
rounds between the first and the last outer iteration (start-up excluded; start-up is
reported apart).  Takes 15-90 minutes, mostly the deployments (every message starts a
ClientApp process).
"""
from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "flower-neyman-pearson"
sys.path.insert(0, str(EXAMPLE))
for var, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
                   "RAY_USAGE_STATS_ENABLED": "0"}.items():
    os.environ.setdefault(var, value)

import numpy as np  # noqa: E402

import constrfl as cf  # noqa: E402
import deploy  # noqa: E402
import split_data  # noqa: E402
from constrfl.result import load_result  # noqa: E402
from npapp import task  # noqa: E402

R = 0.2                      # the example's max-class1-loss
CAPPED = dict(tol=1e-3, max_outer=2)
MODES = {   # name: (SuperNode isolation, FLWR_SUPEREXEC_TASK_POLL_INTERVAL, restart, text)
    "subprocess": ("subprocess", None, None, "`--isolation subprocess` (Flower's default: "
                   "the SuperNode starts its SuperExec), SuperExec polling every 1 s"),
    "subprocess-fast": ("subprocess", 0.05, None, "`--isolation subprocess`, "
                        "`FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.05`"),
    "process-fast": ("process", 0.05, None, "`--isolation process` and an external "
                     "`flower-superexec` per SuperNode, "
                     "`FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.05`"),
    "process-fast-restart": ("process", 0.05, ("site-2", 8), "as above, the SuperNode of "
                             "site-2 killed (SIGKILL) after its 8th message and started "
                             "again (new node id, empty context.state)"),
}


class Marks:
    """A solve callback noting (seconds since start, rounds) after every outer iteration."""

    def __init__(self):
        self.t0, self.marks = time.perf_counter(), []

    def __call__(self, record):
        self.marks.append((time.perf_counter() - self.t0, record["rounds"]))

    def per_round(self):
        return slope(self.marks)


def slope(marks):
    """Seconds per round between the first and the last mark (None if < 2 marks)."""
    if len(marks) < 2 or marks[-1][1] == marks[0][1]:
        return None
    return (marks[-1][0] - marks[0][0]) / (marks[-1][1] - marks[0][1])


def same(a, b):
    """Bit for bit: w, multipliers, rounds and bytes."""
    return (a.w.tobytes() == b.w.tobytes()
            and all(a.multipliers[o].ineq.tobytes() == b.multipliers[o].ineq.tobytes()
                    and a.multipliers[o].eq.tobytes() == b.multipliers[o].eq.tobytes()
                    for o in a.multipliers)
            and (a.rounds, a.bytes_up, a.bytes_down) == (b.rounds, b.bytes_up, b.bytes_down))


def timed(fn, **kw):
    marks = Marks()
    res = fn(callback=marks, **kw)
    return res, marks, time.perf_counter() - marks.t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, default=5)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--full-mode", default="process-fast")
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", default=str(ROOT / "validation" / "results" / "flower.md"))
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # stop what we started
    import flwr
    work = Path(a.workdir or tempfile.mkdtemp(prefix="constrfl-flower-validation-"))
    sites = work / "sites"
    source, _, _ = split_data.split(sites, a.sites)
    prob = task.problem(sites, a.sites, R)
    full_opts = dict(inner="newton", tol=a.tol)
    capped_opts = dict(inner="newton", **CAPPED)
    rows, notes = [], []
    load0 = os.getloadavg()

    # -- in-process and in-memory Grid ------------------------------------------------
    cf.solve(prob, **capped_opts)                          # compile the kernels first
    ref, m, total = timed(cf.solve, problem=prob, **full_opts)
    ref_capped = cf.solve(prob, **capped_opts)
    rows.append(("in-process (`cf.solve`)", ref, m.per_round(), total, None, "reference"))
    print(f"in-process: {ref.status}, {ref.rounds} rounds, {m.per_round():.2e} s/round")
    from constrfl.flower import simulate
    res, m, total = timed(simulate, problem=prob, **full_opts)
    rows.append(("in-memory Grid (`simulate`)", res, m.per_round(), total,
                 total - m.marks[-1][0] + m.marks[0][0] if m.marks else None, same(ref, res)))
    print(f"in-memory Grid: {res.status}, {m.per_round():.2e} s/round, same: {same(ref, res)}")

    # -- Ray ---------------------------------------------------------------------------
    if not a.skip_ray:
        try:
            import ray  # noqa: F401
        except ImportError:
            notes.append("Ray simulation skipped: ray is not installed "
                         "(`pip install 'flwr[simulation]'`).")
        else:
            res, m, total = timed(simulate, problem=prob, backend="ray", **full_opts)
            start = m.marks[0][0] - m.marks[0][1] * m.per_round() if m.marks else None
            rows.append(("Ray simulation (`simulate(backend='ray')`)", res, m.per_round(),
                         total, start, same(ref, res)))
            print(f"Ray: {res.status}, {m.per_round():.3f} s/round, same: {same(ref, res)}")

    # -- localhost deployments ------------------------------------------------------------
    processes = []
    for name in [n for n in a.modes.split(",") if n]:
        isolation, poll, restart, desc = MODES[name]
        full = name == a.full_mode
        cfg = (f"tol={a.tol} inner=\"newton\"" if full
               else f"tol={CAPPED['tol']} max-outer={CAPPED['max_outer']} inner=\"newton\"")
        print(f"deployment {name} ({'to tol' if full else 'capped'}) ...", flush=True)
        t = time.time()
        out = deploy.deploy(work / f"deploy-{name}", a.sites, isolation, poll, cfg,
                            verbose=False, restart=restart)
        res = load_result(out["result"])
        marks = __import__("json").loads((Path(out["result"]) / "timing.json").read_text())
        per = slope(marks["marks"])
        start = marks["marks"][0][0] - marks["marks"][0][1] * per if per else None
        msgs = out["trace"]
        processes.append((name, len(msgs), len({t[0] for t in msgs})))
        if restart:
            notes.append(f"{name}: the SuperNode of {restart[0]} was killed after its "
                         f"{restart[1]}th message and started again; the solve ended "
                         f"{res.status} after {res.rounds} rounds, "
                         f"{'bit for bit' if same(ref_capped, res) else 'NOT'} equal to "
                         f"the uninterrupted in-process solve.")
        rows.append((f"deployment, {desc}" + ("" if full else " (first 2 outer iterations)"),
                     res, per, out["seconds"], start, same(ref if full else ref_capped, res)))
        print(f"  {res.status}, {res.rounds} rounds, {per:.2f} s/round, {time.time() - t:.0f} s"
              f", same: {rows[-1][-1]}, {len(msgs)} messages in "
              f"{len({t[0] for t in msgs})} ClientApp processes", flush=True)

    # -- the report -------------------------------------------------------------------------
    load1 = os.getloadavg()
    lines = [
        "# constrfl on Flower: the Neyman-Pearson example end to end",
        "",
        f"Written by `validation/flower_deploy.py` on {time.strftime('%Y-%m-%d %H:%M')}: "
        f"flwr {flwr.__version__}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {load0[0]:.1f} at the start and "
        f"{load1[0]:.1f} at the end (a shared machine: the timings are noisy).",
        "",
        f"Problem: Neyman-Pearson (30) on {source}, {a.sites} sites (stratified), the "
        f"server holding a stratified 15% for the global constraint; r = {R}; "
        f"`fedproxal` with `inner=\"newton\"`, tol {a.tol:g}.",
        "",
        "| backend / mode | status | rounds | s per round | start-up s | total s | "
        "stationarity | feasibility | complementarity | same as in-process |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, res, per, total, start, eq in rows:
        k = res.kkt
        lines.append(
            f"| {label} | {res.status} | {res.rounds} | "
            f"{'–' if per is None else f'{per:.3g}'} | "
            f"{'–' if start is None else f'{start:.3g}'} | {total:.3g} | "
            f"{k.stationarity:.2e} | {k.feasibility:.2e} | {k.complementarity:.2e} | "
            f"{eq if isinstance(eq, str) else ('yes, bit for bit' if eq else 'NO')} |")
    lines += ["",
              "\"same as in-process\": `w`, every owner's multipliers, rounds and bytes "
              "equal those of `cf.solve` with the same options, bit for bit (the capped "
              "deployments against `cf.solve(..., max_outer=2, tol=1e-3)`).  Seconds per "
              "round: the slope of wall time against rounds between the first and the "
              "last outer iteration; start-up: the rest (Ray's start, the first "
              "ClientApp processes, the sites' discovery).", ""]
    if processes:
        lines += ["ClientApp processes (from the example's trace mod: the PID that ran "
                  "each message):", ""]
        lines += [f"- {n}: {msgs} messages ran in {procs} processes" for n, msgs, procs
                  in processes]
        lines.append("")
    lines += notes
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}")
    bad = [label for label, _, _, _, _, eq in rows if eq is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
