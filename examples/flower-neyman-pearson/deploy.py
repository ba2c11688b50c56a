"""A scripted localhost deployment of the example: one SuperLink and one SuperNode per
site on 127.0.0.1, started and stopped by PID.

    python deploy.py [--sites 5] [--mode warm|warm-in-process|process|subprocess|simulation]
                     [--waits short|flwr|IDLE,REPLY,TASK,HOLD] [--task-poll SECONDS]
                     [--workdir DIR]
                     [--run-config 'tol=1e-4 inner="newton"'] [--restart SITE:N]
                     [--kill SITE:N]

1. splits the data into ``<workdir>/sites`` (split_data.py);
2. starts the SuperLink (``--insecure --disable-runtime-dependency-installation``) on a
   free port, then one SuperNode per site with ``--node-config 'site="site-<i>"
   data="<workdir>/sites/site-<i>.csv" state-dir=...'``, and how its ClientApps run:

   - ``warm`` (default): ``--isolation process`` and constrfl's warm SuperExec next to
     it (``python -m constrfl.flower.warm.superexec``): one long-lived process per site,
     each message run by flwr's ``run_clientapp`` in a forked child;
   - ``warm-in-process``: the same, each message run inside the warm process;
   - ``process`` (Flower's stock path): ``--isolation process`` and ``flower-superexec``,
     a new ``flwr-clientapp`` process per message;
   - ``subprocess``: Flower's default, the SuperNode starts its own ``flower-superexec``;

   with ``--waits short`` (default) the SuperLink is ``python -m
   constrfl.flower.warm.superlink`` (flower-superlink holding the asks for messages and
   replies until there is one, see :mod:`constrfl.flower.warm.holds`) and the SuperNode
   ``python -m constrfl.flower.warm.supernode`` (flower-supernode with its fixed 3 s / 0.5 s
   waits shortened, holding the SuperExec's asks for a task); with ``--waits flwr`` they
   are ``flower-superlink`` and ``flower-supernode``; four numbers set the SuperNode's
   idle and reply waits, the warm SuperExec's task poll and the holds (0: none);
3. writes a connection ``constrfl-local`` to ``$FLWR_HOME/config.toml`` (``FLWR_HOME``
   is ``<workdir>/flwr-home``) and runs ``flwr run . constrfl-local``;
4. waits for ``<workdir>/result/result.json`` (the ServerApp's ``res.save``), prints
   the result with its KKT residuals, and stops every process it started (SIGTERM to
   its process group, SIGKILL after 20 s).  A run that Flower reports finished without
   writing a result (``flwr ls --run-id``, every 15 s) raises at once with Flower's
   reason.  ``run.py`` is the same for a user: it waits for the run's final status.

``--mode simulation`` runs the same app in Flower's simulation instead (needs
``flwr[simulation]``, i.e. Ray): a SuperLink started with ``--simulation`` and no
SuperNodes; ``flwr run ... --federation-config 'num-supernodes=<sites>'``; the sites
then know themselves by ``partition-id`` and read their CSVs from ``sites-dir``.

``--restart SITE:N`` kills the SuperNode of SITE (SIGKILL to its process group: a crash;
in process isolation also its SuperExec) once its ClientApp has run N messages, and
starts a new one with the same node config: it registers under a new node id with an
empty ``context.state``; the ServerApp finds the site again and the site carries on
from its state directory.  ``--kill SITE:N`` kills it the same way and starts none: the
server waits ``client-timeout`` seconds (run config) and ends ``client_failure``.

Network side effects are off: ``FLWR_TELEMETRY_ENABLED=0``,
``FLWR_DISABLE_UPDATE_CHECK=1``, ``RAY_USAGE_STATS_ENABLED=0``, no runtime dependency
installation (constrfl and flwr must already be installed: ``pip install -e
"<repo>[flower]"``).  ``--task-poll`` sets ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` (how
often a SuperExec asks its SuperNode for a task; Flower's default 1 s).
``<workdir>/trace.txt`` records ``pid time site type`` per message (which process ran
it); ``<workdir>/cpu.json`` the CPU seconds of every process started (and their
children), by name.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import split_data  # noqa: E402
from npapp.task import site_names  # noqa: E402

QUIET = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
         "RAY_USAGE_STATS_ENABLED": "0"}
#: how the ClientApps run (see the module docstring); "process" is Flower's stock path
MODES = ("warm", "warm-in-process", "process", "subprocess", "simulation")
#: constrfl's warm SuperExec, per mode: the ClientApp task mode
WARM = {"warm": "fork", "warm-in-process": "in-process"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout=120.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s")


def workspace(workdir, prefix):
    """``(work, env)``: the work directory (default: a new temporary one) with its
    ``flwr-home`` and ``logs`` folders, and the environment of every command run there:
    ``FLWR_HOME`` and ``CONSTRFL_STATE_DIR`` inside it, network side effects off."""
    work = Path(workdir or tempfile.mkdtemp(prefix=prefix)).resolve()
    for d in ("flwr-home", "logs"):
        (work / d).mkdir(parents=True, exist_ok=True)
    return work, dict(os.environ, FLWR_HOME=str(work / "flwr-home"),
                      CONSTRFL_STATE_DIR=str(work / "state"), **QUIET)


class Processes:
    """The processes this script starts, each in its own process group, stopped by PID.
    ``echo``: called with each command line (``$ ... > log 2>&1 &``) before it starts."""

    def __init__(self, logs, env, echo=None):
        self.logs, self.env, self.started, self.echo = Path(logs), env, [], echo

    def start(self, name, argv):
        log = open(self.logs / f"{name}.log", "w")
        if self.echo:
            self.echo(f"$ {shlex.join(argv)} > {log.name} 2>&1 &")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                             start_new_session=True)
        self.started.append((name, p))
        return p

    def stop(self, grace=20.0):
        for _, p in reversed(self.started):
            if p.poll() is None:
                stop(p, signal.SIGTERM)                # the group of the PID we started
        end = time.monotonic() + grace
        for _, p in self.started:
            try:
                p.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for _, p in self.started:
            stop(p, signal.SIGKILL)                    # leftovers of the group


def deploy(workdir=None, n_sites=5, mode="warm", task_poll=None, run_config="",
           timeout=7200.0, data=None, verbose=True, restart=None, waits="short", kill=None):
    """Run the deployment; returns a dict (result path, run seconds, the trace, the
    workdir, when a SuperNode was restarted or killed, seconds until every SuperNode
    and SuperExec was up, CPU seconds by process).  ``restart=(site, n)``,
    ``kill=(site, n)``: see ``--restart``, ``--kill``.  Raises TimeoutError when no
    result appears within ``timeout``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if waits not in ("short", "flwr") and len(waits) != 4:
        raise ValueError(f"waits must be 'short', 'flwr' or (idle, reply, task, hold), "
                         f"got {waits!r}")
    if (restart or kill) and mode == "simulation":
        raise ValueError("restart and kill need SuperNodes (not a simulation)")
    work, env = workspace(workdir, "constrfl-np-deploy-")
    sites, logs, result, trace = work / "sites", work / "logs", work / "result", work / "trace.txt"
    split_data.split(sites, n_sites, data)
    env["CONSTRFL_NP_TRACE"] = str(trace)
    if task_poll is not None:
        env["FLWR_SUPEREXEC_TASK_POLL_INTERVAL"] = str(task_poll)
    procs = Processes(logs, env)
    say = print if verbose else (lambda *a, **k: None)
    site_waits = {"short": (), "flwr": None}.get(waits, waits)
    cpu_lost = {}                        # CPU seconds of the SuperNodes killed
    cpu_at_crash = None                  # CPU seconds of all processes then
    t_start = time.time()
    try:
        link = start_superlink(procs, mode == "simulation", site_waits)
        nodes = {} if mode == "simulation" else {
            name: start_site(procs, name, sites, work, link, mode, waits=site_waits)
            for name in site_names(n_sites)}
        up = time.time() - t_start
        say(f"SuperLink 127.0.0.1:{link}" + (" (simulation)" if mode == "simulation" else
                                             f" and {n_sites} SuperNodes ({mode}, "
                                             f"{waits} waits)")
            + f" started in {up:.1f} s: PIDs {[p.pid for _, p in procs.started]}")
        write_connection(env, "constrfl-local", link)
        t0 = time.time()
        run_id = start_run(env, "constrfl-local", sites, result, n_sites, run_config,
                           mode == "simulation")
        say(f"started run {run_id}")
        end, restarted, looked = time.monotonic() + timeout, None, time.monotonic()
        ran = 0                              # messages in the trace when last looked
        while not (result / "result.json").is_file():
            if time.monotonic() > end:
                raise TimeoutError(f"no result in {result} after {timeout:g} s "
                                   f"(logs in {logs})")
            messages = read_trace(trace)
            if len(messages) != ran:
                ran, looked = len(messages), time.monotonic()
            crash = restart or kill
            if crash and restarted is None and sum(
                    1 for t in messages if t[2] == crash[0]) >= crash[1]:
                cpu_at_crash = sum(cpu_seconds(p.pid) for _, p in procs.started)
                for name, p in procs.started:
                    if p in nodes[crash[0]]:
                        cpu_lost[f"{name} (killed)"] = cpu_seconds(p.pid)
                for p in nodes[crash[0]]:
                    stop(p, signal.SIGKILL)
                restarted = time.time()
                say(f"killed the SuperNode of {crash[0]} (PIDs "
                    f"{[p.pid for p in nodes[crash[0]]]})"
                    + ("; starting a new one" if restart else ""))
                if restart:
                    nodes[crash[0]] = start_site(procs, crash[0], sites, work, link, mode,
                                                 tag="-restarted", waits=site_waits)
            if time.monotonic() - looked > 15.0:     # no message for 15 s: a run that
                # failed writes no result (the status query takes seconds: not while
                # messages run, when it would delay a kill)
                looked = time.monotonic()
                status, details = run_status(run_id, "constrfl-local", env)
                if finished(status) and not (result / "result.json").is_file():
                    raise RuntimeError(f"run {run_id} {status}: {details} (logs in {logs})")
            time.sleep(0.2)
        ended = time.time()
        seconds = ended - t0
        cpu = dict(cpu_lost, **{name: cpu_seconds(p.pid) for name, p in procs.started})
        (work / "cpu.json").write_text(json.dumps(cpu, indent=1))
    finally:
        procs.stop()
        say(f"stopped PIDs {[p.pid for _, p in procs.started]}")
    return {"workdir": str(work), "result": str(result), "seconds": seconds,
            "trace": read_trace(trace), "mode": mode, "task_poll": task_poll,
            "waits": waits, "restarted": restarted, "startup": up, "cpu": cpu,
            "cpu_at_crash": cpu_at_crash, "ended": ended,
            "total_seconds": time.time() - t_start}


def cpu_seconds(session):
    """CPU seconds (user + system) of the processes of a session (the processes this
    script starts lead their own), with the children they reaped: ``/proc/<pid>/stat``.
    A process that already ended counts only if its parent reaped it."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == session:            # fields[0] is stat's third field
            total += sum(int(f) for f in fields[11:15])   # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


def start_superlink(procs, simulation=False, waits=None):
    """The SuperLink with ``--insecure --disable-runtime-dependency-installation`` on a
    free port of 127.0.0.1 (``--simulation``: Flower's simulation engine, no
    SuperNodes); returns the port once it listens.  ``waits``: as :func:`start_site`'s
    (None: ``flower-superlink``; else constrfl's, holding asks ``waits[3]`` s; a
    simulation's replies do not pass the handlers it holds: ``flower-superlink``)."""
    port = free_port()
    link = ["flower-superlink"] if waits is None or simulation else [
        sys.executable, "-m", "constrfl.flower.warm.superlink"] + (
        ["--hold", str(waits[3])] if waits else [])
    procs.start("superlink", link + ["--insecure", "--disable-runtime-dependency-installation",
                                     "--host", "127.0.0.1", "--port", str(port)]
                + (["--simulation"] if simulation else []))
    wait_for_port(port)
    return port


def write_connection(env, name, port):
    """``$FLWR_HOME/config.toml`` with one connection, ``name``, the default: the
    SuperLink on 127.0.0.1:``port``."""
    path = Path(env["FLWR_HOME"]) / "config.toml"
    path.write_text(f'[superlink]\ndefault = "{name}"\n\n[superlink.{name}]\n'
                    f'address = "127.0.0.1:{port}"\ninsecure = true\n')
    return path


def start_run(env, connection, sites, result, n_sites, run_config="", simulation=False,
              echo=None):
    """``flwr run . <connection> --run-config '<sites-dir, output-dir, num-sites>
    <run_config>' --format json`` (a simulation: with ``--federation-config
    num-supernodes=<n_sites>``); returns the run id.  ``echo``: called with the command
    line first.  Raises RuntimeError with what flwr printed when no run started."""
    overrides = (f'sites-dir="{sites}" output-dir="{result}" num-sites={n_sites} '
                 + run_config).strip()
    argv = ["flwr", "run", ".", connection, "--run-config", overrides, "--format", "json"]
    if simulation:
        argv += ["--federation-config", f"num-supernodes={n_sites}"]
    if echo:
        echo(f"$ {shlex.join(argv)}")
    out = subprocess.run(argv, env=env, cwd=HERE, capture_output=True, text=True,
                         timeout=600)
    try:
        return int(json.loads(out.stdout)["run-id"])
    except (ValueError, KeyError, TypeError):
        raise RuntimeError(f"flwr run failed (exit code {out.returncode}):\n{out.stdout}"
                           f"{out.stderr}") from None


def finished(status):
    """Whether a status of :func:`run_status` is final (``finished:...``)."""
    return (status or "").startswith("finished")


def run_status(run_id, connection, env):
    """``(status, details)`` of a run from ``flwr ls --run-id <id> <connection> --format
    json`` (``(None, what it printed)`` when that fails)."""
    out = subprocess.run(["flwr", "ls", "--run-id", str(run_id), connection, "--format",
                          "json"], env=env, cwd=HERE, text=True, capture_output=True)
    try:
        run = json.loads(out.stdout)["runs"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return None, (out.stdout + out.stderr).strip()
    return run["status"], run.get("status-details", "")


def start_site(procs, name, sites, work, link, mode, tag="", waits=None):
    """The SuperNode of site ``name`` (and its SuperExec in process isolation: Flower's
    ``flower-superexec`` in mode ``process``, constrfl's warm one in the warm modes).
    ``waits=(idle, reply, task, hold)``: the SuperNode is constrfl's with these waits,
    holding the SuperExec's asks ``hold`` s (and the warm SuperExec polls every ``task``
    seconds while tasks come); ``()``: constrfl's commands with their own defaults;
    None: ``flower-supernode``."""
    port = free_port()
    config = f'site="{name}" data="{sites / (name + ".csv")}" state-dir="{work / "state"}"'
    node = ["flower-supernode"] if waits is None else [
        sys.executable, "-m", "constrfl.flower.warm.supernode"] + (
        ["--idle-wait", str(waits[0]), "--reply-wait", str(waits[1]), "--hold",
         str(waits[3])] if waits else [])
    argv = node + ["--insecure", "--superlink", f"127.0.0.1:{link}", "--port", str(port),
                   "--node-config", config]
    isolated = mode == "process" or mode in WARM
    if isolated:
        argv += ["--isolation", "process"]
    started = [procs.start(f"supernode-{name}{tag}", argv)]
    if isolated:
        wait_for_port(port)
        exe = (["flower-superexec"] if mode == "process" else
               [sys.executable, "-m", "constrfl.flower.warm.superexec", "--task-mode", WARM[mode]]
               + (["--task-poll", str(waits[2])] if waits else []))
        started.append(procs.start(f"superexec-{name}{tag}", exe + [
            "--insecure", "--runtime-api-address", f"127.0.0.1:{port}"]))
    return started


def stop(p, sig):
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass


def read_trace(path):
    """``[(pid, unix time, site, message type)]`` of every message a ClientApp ran."""
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) == 4:                          # (a line being written: skipped)
            out.append((int(parts[0]), float(parts[1]), parts[2], parts[3]))
    return out


def show(result_dir):
    """Print a saved result with its KKT residuals."""
    from constrfl.result import load_result
    res = load_result(result_dir)
    k = res.kkt
    print(f"{res.method}: {res.status} ({res.message})\n  rounds {res.rounds}, "
          f"{res.time:.1f} s at the server, objective {res.objective:.10g}\n"
          f"  KKT residuals: stationarity {k.stationarity:.2e}, feasibility "
          f"{k.feasibility:.2e}, complementarity {k.complementarity:.2e}, "
          f"definition1 {k.definition1:.2e}\n  w = {res.w}")
    timing = Path(result_dir) / "timing.json"
    if timing.is_file():
        marks = json.loads(timing.read_text())["marks"]
        if len(marks) > 1 and marks[-1][1] > marks[0][1]:
            per = (marks[-1][0] - marks[0][0]) / (marks[-1][1] - marks[0][1])
            print(f"  {per:.2f} s per round after the first outer iteration")
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, default=5)
    ap.add_argument("--mode", choices=MODES, default="warm",
                    help="warm (default): constrfl's warm SuperExec, a forked child per "
                    "message; process: Flower's stock flower-superexec")
    ap.add_argument("--waits", default="short", metavar="short|flwr|IDLE,REPLY,TASK,HOLD",
                    help="short (default): constrfl's superlink, supernode and warm "
                    "SuperExec with their default waits (python -m constrfl.flower.warm.supernode "
                    "--help-waits); flwr: flower-superlink and flower-supernode (3 s / 0.5 s "
                    "waits, no holds); or four numbers: the SuperNode's idle and reply "
                    "waits, the SuperExec's task poll, the holds (0: none)")
    ap.add_argument("--task-poll", type=float, default=None,
                    help="FLWR_SUPEREXEC_TASK_POLL_INTERVAL in seconds (Flower: 1.0; the "
                    "warm SuperExec polls faster while tasks come, backing off to it)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--data", default=None, help="data root (default: ../shared/data)")
    ap.add_argument("--run-config", default="", help="overrides, e.g. 'tol=1e-4'")
    ap.add_argument("--timeout", type=float, default=7200.0)
    ap.add_argument("--restart", default=None, metavar="SITE:N",
                    help="kill SITE's SuperNode after it ran N messages, start a new one")
    ap.add_argument("--kill", default=None, metavar="SITE:N",
                    help="kill SITE's SuperNode after it ran N messages, for good")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # stop what we started
    restart, kill = [(x.rsplit(":", 1)[0], int(x.rsplit(":", 1)[1])) if x else None
                     for x in (a.restart, a.kill)]
    waits = (a.waits if a.waits in ("short", "flwr")
             else tuple(float(x) for x in a.waits.split(",")))
    out = deploy(a.workdir, a.sites, a.mode, a.task_poll, a.run_config, a.timeout, a.data,
                 restart=restart, waits=waits, kill=kill)
    msgs = [t for t in out["trace"] if not t[3].endswith("constrfl_hello")]
    print(f"{len(out['trace'])} messages ran in {len({t[0] for t in out['trace']})} "
          f"ClientApp processes; {out['seconds']:.0f} s from `flwr run` to the result; "
          f"{sum(out['cpu'].values()):.0f} CPU-s in all")
    show(out["result"])
    return 0 if msgs else 1


if __name__ == "__main__":
    sys.exit(main())
