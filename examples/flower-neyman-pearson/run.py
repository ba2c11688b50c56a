"""`flwr run .` with the processes it needs: start them, run, wait for the end, print the
run's final status, stop everything started; the exit code says whether the run worked.

    python run.py simulation [--sites 5] [--run-config 'tol=1e-4'] [--check]
    python run.py deployment [--sites 5] [--run-config 'tol=1e-4'] [--check]
                             [--workdir DIR] [--timeout SECONDS]

``simulation``: Flower's simulation engine (needs ``flwr[simulation]``, i.e. Ray):
``flower-superlink --simulation`` and ``flwr run . --federation-config
num-supernodes=<sites>``.  ``deployment``: a SuperLink and one ``flower-supernode`` per
site on 127.0.0.1, each site reading only its own CSV (``--node-config``).

What it does, printing each command before running it (``$ ...``):

1. ``python split_data.py``: the sites' CSVs into ``<workdir>/sites``;
2. ``flower-superlink --insecure --disable-runtime-dependency-installation`` on a free
   port (and the SuperNodes), in its own process group; a connection ``np-<engine>`` in
   ``$FLWR_HOME/config.toml`` (``FLWR_HOME=<workdir>/flwr-home``: yours is not touched);
3. ``flwr run . np-<engine> --run-config '...' --format json`` (the run id), then
   ``flwr log <id> np-<engine> --stream`` (the ServerApp prints the result there);
4. ``flwr ls --run-id <id> np-<engine> --format json`` until the status is
   ``finished:...``, and prints it with Flower's reason when it failed;
5. with ``--check``, solves the same problem with ``cf.solve`` in this process and says
   whether the run's answer is the same bit for bit (point, multipliers, counters);
6. stops every process it started (SIGTERM to each process group, SIGKILL after 20 s),
   also on an error, Ctrl-C or SIGTERM.

Exit code: 0 when the run ended ``finished:completed`` (the ServerApp raises, so Flower
reports ``finished:failed``, when the solve did not end ``optimal``; see
``npapp/server_app.py``) and, with ``--check``, the answer is the in-process one; 1
otherwise; 2 when the run did not finish within ``--timeout`` (it is stopped with
``flwr stop``).
"""
from __future__ import annotations

import argparse
import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from deploy import (Processes, finished, run_status, show, start_run,  # noqa: E402
                    start_site, start_superlink, workspace, write_connection)
from npapp.task import site_names  # noqa: E402

ENGINES = ("simulation", "deployment")


def say(*args):
    print(*args, flush=True)


def command(argv, env, **kwargs):
    """Run a command (printed first, as a user would type it) and return its result."""
    say(f"$ {shlex.join(argv)}")
    return subprocess.run(argv, env=env, cwd=HERE, text=True, **kwargs)


def same_answer(a, b):
    """What differs between two results ([] when they are the same bit for bit)."""
    diff = [name for name, x, y in [
        ("status", a.status, b.status), ("w", a.w.tobytes(), b.w.tobytes()),
        ("rounds", a.rounds, b.rounds), ("bytes", (a.bytes_up, a.bytes_down),
                                         (b.bytes_up, b.bytes_down)),
        ("parties", list(a.multipliers), list(b.multipliers))] if x != y]
    if "parties" not in diff:
        diff += [f"multipliers of {o}" for o in a.multipliers
                 if (a.multipliers[o].ineq.tobytes(), a.multipliers[o].eq.tobytes())
                 != (b.multipliers[o].ineq.tobytes(), b.multipliers[o].eq.tobytes())]
    return diff


def check(result_dir):
    """Solve the run's problem with ``cf.solve`` here; print whether the answers agree."""
    import constrfl as cf
    from constrfl.result import load_result
    from npapp import task
    got = load_result(result_dir)
    cfg = json.loads((Path(result_dir) / "run_config.json").read_text())
    method, tol, options = task.solve_options(cfg)
    expected = cf.solve(task.problem(task.sites_dir(cfg), int(cfg["num-sites"]),
                                     float(cfg["max-class1-loss"])), method, tol, **options)
    diff = same_answer(expected, got)
    say(f"cf.solve in this process: {expected.status} after {expected.rounds} rounds; "
        + ("the run's answer is the same, bit for bit" if not diff
           else "the run's answer differs: " + ", ".join(diff)))
    return not diff


def run(engine, n_sites=5, run_config="", workdir=None, timeout=3600.0, data=None,
        verify=False):
    """Start, run, wait, report, stop; returns the exit code (see the module docstring)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    work, env = workspace(workdir, "constrfl-np-run-")
    sites, logs, result = work / "sites", work / "logs", work / "result"
    split = command([sys.executable, "split_data.py", "--sites", str(n_sites), "--out",
                     str(sites)] + (["--data", str(data)] if data else []), env)
    if split.returncode:
        return 1
    procs, connection = Processes(logs, env, echo=say), f"np-{engine}"
    try:
        link = start_superlink(procs, engine == "simulation")
        if engine == "deployment":
            for name in site_names(n_sites):
                start_site(procs, name, sites, work, link, "subprocess")
        say(f"started PIDs {[p.pid for _, p in procs.started]} (logs in {logs})")
        config = write_connection(env, connection, link)
        say(f"(connection {connection} = 127.0.0.1:{link} in {config})")
        try:
            run_id = start_run(env, connection, sites, result, n_sites, run_config,
                               engine == "simulation", echo=say)
        except RuntimeError as err:
            say(err)
            return 1
        say(f"run {run_id} started")
        end = time.monotonic() + timeout
        say(f"$ flwr log {run_id} {connection} --stream")
        stream = subprocess.Popen(["flwr", "log", str(run_id), connection, "--stream"],
                                  env=env, cwd=HERE)
        status, details, looked, streaming = None, "", time.monotonic(), True
        while time.monotonic() < end:         # the stream ends with the run; the status
            ended = streaming and stream.poll() is not None            # decides
            streaming = streaming and not ended
            if ended or time.monotonic() - looked > (30.0 if streaming else 5.0):
                looked = time.monotonic()
                status, details = run_status(run_id, connection, env)
                if finished(status):
                    break
            time.sleep(0.5)
        try:
            stream.wait(timeout=10.0)             # the last lines of the log
        except subprocess.TimeoutExpired:
            stream.terminate()
            stream.wait()
        say(f"$ flwr ls --run-id {run_id} {connection} --format json")
        if not finished(status):
            say(f"run {run_id}: not finished after {timeout:g} s (status {status}); "
                f"stopping it: flwr stop {run_id} {connection}")
            subprocess.run(["flwr", "stop", str(run_id), connection], env=env, cwd=HERE,
                           capture_output=True)
            return 2
        say(f"run {run_id}: {status}" + (f"\n  {details}" if details and details != "N/A"
                                          else ""))
        ok = status == "finished:completed"
        if (result / "result.json").is_file():
            show(result)
            if verify:
                ok = check(result) and ok
        elif ok:
            say(f"no result in {result}")
            ok = False
        return 0 if ok else 1
    finally:
        procs.stop()
        say(f"stopped PIDs {[p.pid for _, p in procs.started]} (logs in {logs})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("engine", choices=ENGINES)
    ap.add_argument("--sites", type=int, default=5)
    ap.add_argument("--run-config", default="", help="overrides, e.g. 'tol=1e-4'")
    ap.add_argument("--check", action="store_true",
                    help="compare the answer with cf.solve's in this process, bit for bit")
    ap.add_argument("--workdir", default=None, help="default: a new temporary directory")
    ap.add_argument("--data", default=None, help="data root (default: ../shared/data)")
    ap.add_argument("--timeout", type=float, default=3600.0)
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # stop what we started
    return run(a.engine, a.sites, a.run_config, a.workdir, a.timeout, a.data, a.check)


if __name__ == "__main__":
    sys.exit(main())
