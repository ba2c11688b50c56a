"""The ServerApp: solve over the Grid, save the result, print it with its KKT residuals."""
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
    res = run_server(grid, task.server_side(cfg), method, float(cfg["tol"]), output_dir=out,
                     client_timeout=float(cfg["client-timeout"]),
                     resend_after=float(cfg["resend-after"]),
                     poll_interval=float(cfg["poll-interval"]), **options)
    k = res.kkt
    print(f"constrfl {method}: {res.status} after {res.rounds} rounds ({res.time:.1f} s); "
          f"objective {res.objective:.10g}\n"
          f"  KKT: stationarity {k.stationarity:.2e}, feasibility {k.feasibility:.2e}, "
          f"complementarity {k.complementarity:.2e}, definition1 {k.definition1:.2e}\n"
          f"  result saved in {out}")
