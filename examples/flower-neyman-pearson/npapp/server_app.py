"""The ServerApp: solve over the Grid, save the result (and ``timing.json``: seconds and
rounds at every outer iteration; ``run_config.json``: the run config it solved with),
print it with its KKT residuals.

A solve that did not end as asked (``task.accepted_statuses``: ``optimal`` for
fedproxal; e.g. ``client_error``, ``client_failure``, ``max_iterations``) raises after
the result is saved: Flower then reports the run ``finished:failed`` with the reason
(``flwr ls --run-id <id>``), instead of ``finished:completed``.

In Flower's simulation the ServerApp first checks that the federation has ``num-sites``
SuperNodes (Flower's default is 2; the example has 5) and raises at once if not, naming
the command that fixes it: otherwise the solve would wait ``client-timeout`` for sites
that do not exist, then end ``client_failure``.

``pull-backoff`` (run config, seconds; 0 keeps flwr's waits): the first retry when a
site's reply is pulled before all of it has arrived at the SuperLink (flwr: 1 s), and a
reply that never arrives whole is given up after ``resend-after`` seconds (flwr: when
the SuperLink's push session expires, 180 s) and asked again
(:func:`constrfl.flower.warm.waits.shorten_object_pulls`, in the ServerApp's process, on a
tested flwr)."""
import json
import os
import shutil
import time
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from constrfl.flower import run_server
from constrfl.flower.warm import waits

from . import task

app = ServerApp()


def check_simulation_size(grid, n_sites, wait=60.0):
    """In Flower's simulation (an ``InMemoryGrid``) all SuperNodes are registered as the
    run starts, so their number is final: raise unless it is ``n_sites``.  A deployment's
    SuperNodes may join at any time; there is nothing to check."""
    try:
        from flwr.superlink.grid import InMemoryGrid     # flwr 1.41, 1.42
    except ImportError:
        return
    if not isinstance(grid, InMemoryGrid):
        return
    end, seen = time.monotonic() + wait, None
    while time.monotonic() < end:        # registered right after the ServerApp starts
        n = len(list(grid.get_node_ids()))
        if n and n == seen:
            break
        seen = n
        time.sleep(0.5)
    if seen != n_sites:
        raise ValueError(
            f"the simulation has {seen} SuperNodes but num-sites = {n_sites}: run "
            f"`flwr run . --federation-config \"num-supernodes={n_sites}\"` (or split the "
            f"data for {seen} sites and pass --run-config 'num-sites={seen}')")


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    method, tol, options = task.solve_options(cfg)
    if float(cfg.get("pull-backoff", 0)) > 0:
        waits.shorten_object_pulls(float(cfg["pull-backoff"]), max_time=min(
            float(cfg["resend-after"]), float(cfg["client-timeout"])))
    check_simulation_size(grid, int(cfg["num-sites"]))
    out = cfg["output-dir"] or str(task.sites_dir(cfg) / "results" / str(context.run_id))
    t0, marks = time.perf_counter(), []

    def mark(record):                        # after every outer iteration (every round
        marks.append((time.perf_counter() - t0, record["rounds"]))   # for a baseline)

    res = run_server(grid, task.server_side(cfg), method, tol,
                     client_timeout=float(cfg["client-timeout"]),
                     resend_after=float(cfg["resend-after"]),
                     poll_interval=float(cfg["poll-interval"]), callback=mark, **options)
    partial = Path(out).with_name(Path(out).name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    res.save(partial)
    (partial / "timing.json").write_text(json.dumps({"marks": marks}))
    (partial / "run_config.json").write_text(json.dumps(dict(cfg), indent=1))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(partial, out)                 # the directory appears complete, at once
    if not cfg["output-dir"]:                # results/latest: the newest run's
        task.point_latest(Path(out))
    k = res.kkt
    print(f"constrfl {method}: {res.status} after {res.rounds} rounds ({res.time:.1f} s); "
          f"objective {res.objective:.10g}\n"
          f"  KKT: stationarity {k.stationarity:.2e}, feasibility {k.feasibility:.2e}, "
          f"complementarity {k.complementarity:.2e}, definition1 {k.definition1:.2e}\n"
          f"  result saved in {out}")
    if res.status not in task.accepted_statuses(method):
        raise RuntimeError(f"constrfl {method} ended {res.status}: {res.message} "
                           f"(result saved in {out})")
