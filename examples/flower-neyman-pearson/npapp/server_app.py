"""The ServerApp: solve over the Grid, save the result (and ``timing.json``: seconds and
rounds at every outer iteration), print it with its KKT residuals."""
import json
import os
import shutil
import time
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from constrfl.flower import run_server

from . import task

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    method = cfg["method"]
    if method == "fedproxal":
        options = dict(inner=cfg["inner"], max_outer=int(cfg["max-outer"]))
    else:
        options = dict(rounds=int(cfg["rounds"]), penalty="quadratic",
                       penalty_weight=float(cfg["penalty-weight"]))
    out = cfg["output-dir"] or str(task.sites_dir(cfg) / "result")
    t0, marks = time.perf_counter(), []

    def mark(record):                        # after every outer iteration (every round
        marks.append((time.perf_counter() - t0, record["rounds"]))   # for a baseline)

    res = run_server(grid, task.server_side(cfg), method, float(cfg["tol"]),
                     client_timeout=float(cfg["client-timeout"]),
                     resend_after=float(cfg["resend-after"]),
                     poll_interval=float(cfg["poll-interval"]), callback=mark, **options)
    partial = Path(out).with_name(Path(out).name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    res.save(partial)
    (partial / "timing.json").write_text(json.dumps({"marks": marks}))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(partial, out)                 # the directory appears complete, at once
    k = res.kkt
    print(f"constrfl {method}: {res.status} after {res.rounds} rounds ({res.time:.1f} s); "
          f"objective {res.objective:.10g}\n"
          f"  KKT: stationarity {k.stationarity:.2e}, feasibility {k.feasibility:.2e}, "
          f"complementarity {k.complementarity:.2e}, definition1 {k.definition1:.2e}\n"
          f"  result saved in {out}")
