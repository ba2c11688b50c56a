"""constrfl on Flower, end to end: the Neyman-Pearson example in-process, on the
in-memory Grid, in Flower's Ray simulation and as a localhost deployment (one SuperLink,
one SuperNode per site) on Flower's stock path and on constrfl's warm one; the cost of
each (seconds per round, start-up, CPU seconds), the final KKT residuals, and the
equality of every answer with the in-process one.  Every Flower run masks the sites'
uploads (secure aggregation, the default with 3 sites or more) but ``warm-plain``
(``secure=false``: what the masks cost on the warm path); the in-process references
are ``cf.solve`` with the same ``secure``.

    python validation/flower_deploy.py [--sites 5] [--tol 1e-4] [--skip-ray]
        [--modes warm,warm-plain,warm-in-process,warm-flwr-waits,process,subprocess,
                 warm-restart,warm-lost]
        [--full-modes warm,warm-plain] [--out validation/results/flower.md]

The deployments of ``--full-modes`` run the example to ``tol`` (end to end); the other
modes run its first two outer iterations (``max-outer=2``, ``tol=1e-3``), enough to
measure their cost per round.  Per-round costs are the slope of wall time against
rounds between the first and the last outer iteration; start-up is the rest of the run
(the intercept) and, apart, the seconds until every process was up.  CPU seconds:
every process a deployment started, with its children (``/proc``), from its start to
the result.  Takes 15-30 minutes, mostly the stock deployments.
"""
from __future__ import annotations

import argparse
import json
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
LOST_TIMEOUT = 30.0           # client-timeout of the warm-lost deployment
STOCK = 'pull-backoff=0'      # the ServerApp keeps flwr's object-pull waits
MODES = {   # name: deploy.deploy's arguments, run-config overrides, text
    "warm": (dict(mode="warm"), "", "constrfl's warm path (`deploy.py` default): "
             "`python -m constrfl.flower.warm.superlink` (asks held until there is an answer, "
             "API-specific middlewares on their API only), "
             "`python -m constrfl.flower.warm.supernode --isolation process` (flwr's waits "
             "shortened, task asks held) and `python -m constrfl.flower.warm.superexec` (a "
             "forked child per message, its first heartbeat an interval in)"),
    "warm-plain": (dict(mode="warm"), "secure=false", "as warm, without secure "
                   "aggregation (`secure=false`: each site's upload readable)"),
    "warm-in-process": (dict(mode="warm-in-process"), "", "as warm, each message run "
                        "inside the warm process (`--task-mode in-process`)"),
    "warm-flwr-waits": (dict(mode="warm", waits="flwr"), STOCK, "the warm SuperExec "
                        "next to the stock `flower-supernode --isolation process` and "
                        "`flower-superlink` (flwr's 3 s / 0.5 s / 1 s waits, no holds)"),
    "process": (dict(mode="process", waits="flwr", task_poll=0.05), STOCK,
                "Flower's stock path: `flower-supernode --isolation process` and "
                "`flower-superexec`, `FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.05`"),
    "subprocess": (dict(mode="subprocess", waits="flwr"), STOCK, "Flower's default: "
                   "`flower-supernode` (`--isolation subprocess`, it starts its own "
                   "`flower-superexec`, polling every 1 s)"),
    "warm-restart": (dict(mode="warm", restart=("site-2", 8)), "", "warm, the SuperNode "
                     "and SuperExec of site-2 killed (SIGKILL) after its 8th message and "
                     "started again (new node id, empty context.state)"),
    # (killed after the first message of the capped solve's second outer iteration,
    # whatever its number: main() takes it from the in-process reference)
    "warm-lost": (dict(mode="warm", kill=("site-2", None)), f"client-timeout={LOST_TIMEOUT}",
                  f"warm, the SuperNode and SuperExec of site-2 killed after its first "
                  f"message of the second outer iteration, for good, "
                  f"`client-timeout={LOST_TIMEOUT:g}`"),
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
    """Bit for bit: w, the multipliers ``b`` holds (a deployment's result holds only the
    server's: each site keeps its own), rounds and bytes."""
    return (a.w.tobytes() == b.w.tobytes() and set(b.multipliers) <= set(a.multipliers)
            and all(a.multipliers[o].ineq.tobytes() == b.multipliers[o].ineq.tobytes()
                    and a.multipliers[o].eq.tobytes() == b.multipliers[o].eq.tobytes()
                    for o in b.multipliers)
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
    ap.add_argument("--full-modes", default="warm,warm-plain")
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
    full_opts = dict(inner="newton", tol=a.tol, secure=True)
    capped_opts = dict(inner="newton", secure=True, **CAPPED)
    rows, notes = [], []
    load0 = os.getloadavg()

    # -- in-process and in-memory Grid ------------------------------------------------
    from constrfl.flower.warm.superexec import warm_up
    warm_up()             # numba's cache filled first: no deployment compiles the kernels
    cf.solve(prob, **capped_opts)
    plain, m, total = timed(cf.solve, problem=prob, **dict(full_opts, secure=False))
    rows.append(("in-process (`cf.solve`, `secure=False`)", plain, m.per_round(), total,
                 None, "reference without masks"))
    ref, m, total = timed(cf.solve, problem=prob, **full_opts)
    rows.append(("in-process (`cf.solve`, `secure=True`)", ref, m.per_round(), total, None,
                 "reference" if ref.w.tobytes() == plain.w.tobytes() else "NOT w of secure=False"))
    refs = {True: (ref, cf.solve(prob, **capped_opts)),
            False: (plain, cf.solve(prob, **dict(capped_opts, secure=False)))}
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
    processes, costs, full_modes, per_round = [], [], a.full_modes.split(","), {}
    for name in [n for n in a.modes.split(",") if n]:
        kwargs, extra, desc = MODES[name]
        if "kill" in kwargs:        # the second outer iteration's first message
            kwargs = dict(kwargs, kill=(kwargs["kill"][0],
                                        refs[True][1].history[0]["rounds"] + 1))
        full = name in full_modes
        cfg = (f"tol={a.tol} inner=\"newton\"" if full
               else f"tol={CAPPED['tol']} max-outer={CAPPED['max_outer']} inner=\"newton\"")
        print(f"deployment {name} ({'to tol' if full else 'capped'}) ...", flush=True)
        out = deploy.deploy(work / f"deploy-{name}", a.sites, run_config=f"{cfg} {extra}",
                            verbose=False, **kwargs)
        res = load_result(out["result"])
        marks = json.loads((Path(out["result"]) / "timing.json").read_text())["marks"]
        per = per_round[name] = slope(marks)
        start = marks[0][0] - marks[0][1] * per if per else None
        msgs, cpu = out["trace"], sum(out["cpu"].values())
        processes.append((name, len(msgs), len({t[0] for t in msgs})))
        costs.append((name, out["startup"], out["seconds"], out["total_seconds"], cpu,
                      res.rounds, out["cpu"]))
        expected = refs["secure=false" not in extra][0 if full else 1]
        if "restart" in kwargs:
            site, n = kwargs["restart"]
            notes.append(f"{name}: the SuperNode of {site} was killed after its {n}th "
                         f"message and started again; the solve ended {res.status} after "
                         f"{res.rounds} rounds, {'bit for bit' if same(expected, res) else 'NOT'}"
                         f" equal to the uninterrupted in-process solve.")
        if "kill" in kwargs:
            site, n = kwargs["kill"]
            waited = out["ended"] - out["restarted"]
            burn = (cpu - out["cpu_at_crash"]) / waited
            partial = cf.solve(prob, **dict(capped_opts, max_outer=res.outer_iterations))
            kept = res.w.tobytes() == partial.w.tobytes()
            notes.append(f"{name}: the SuperNode of {site} was killed after its {n}th "
                         f"message for good; the solve ended {res.status} "
                         f"({res.message}) {waited:.0f} s after the kill (client-timeout "
                         f"{LOST_TIMEOUT:g} s), every process together using {burn:.2f} of "
                         f"a core meanwhile; the result keeps the "
                         f"last completed outer iterate ({res.outer_iterations}), "
                         f"{'bit for bit' if kept else 'NOT'} the in-process one.")
            rows.append((f"deployment, {desc}", res, per, out["seconds"], start,
                         "client_failure, the last outer iterate bit for bit"
                         if res.status == "client_failure" and kept else False))
            continue
        rows.append((f"deployment, {desc}" + ("" if full else " (first 2 outer iterations)"),
                     res, per, out["seconds"], start, same(expected, res)))
        print(f"  {res.status}, {res.rounds} rounds, {per:.2f} s/round, {cpu:.0f} CPU-s, "
              f"{out['total_seconds']:.0f} s, same: {rows[-1][-1]}, {len(msgs)} messages in "
              f"{len({t[0] for t in msgs})} ClientApp processes", flush=True)

    if per_round.get("warm") and per_round.get("warm-plain"):
        notes.append(f"secure aggregation on the warm path: {per_round['warm']:.3g} s a round "
                     f"against {per_round['warm-plain']:.3g} s without "
                     f"({per_round['warm'] / per_round['warm-plain']:.2f}x), one round more "
                     f"(the key agreement: {ref.rounds} rounds against {plain.rounds}).")

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
              "\"same as in-process\": `w`, every party's multipliers, rounds and bytes "
              "equal those of `cf.solve` with the same options, bit for bit (the capped "
              "deployments against `cf.solve(..., max_outer=2, tol=1e-3)`).  Seconds per "
              "round: the slope of wall time against rounds between the first and the "
              "last outer iteration; start-up: the rest (Ray's start, the first "
              "ClientApp processes, the sites' discovery).", ""]
    if costs:
        lines += ["Cost of each deployment: seconds until every process was up, from `flwr "
                  "run` to the result, in all; CPU seconds of every process started (the "
                  "SuperLink with its ServerApp, the SuperNodes, the SuperExecs with their "
                  "ClientApp processes) from the start to the result, in all and per "
                  "round.", "",
                  "| mode | processes up s | run s | total s | CPU-s | rounds | "
                  "CPU-s per round | CPU-s: SuperLink + ServerApp / SuperNodes / SuperExecs "
                  "+ ClientApps |", "|---|---|---|---|---|---|---|---|"]
        for name, up, run, total, cpu, rounds, by in costs:
            part = [sum(v for k, v in by.items() if k.startswith(p))
                    for p in ("superlink", "supernode", "superexec")]
            lines.append(f"| {name} | {up:.1f} | {run:.0f} | {total:.0f} | {cpu:.0f} | "
                         f"{rounds} | {cpu / rounds:.2f} | "
                         + " / ".join(f"{x:.0f}" for x in part) + " |")
        lines.append("")
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
