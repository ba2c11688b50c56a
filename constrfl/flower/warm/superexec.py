"""A warm SuperExec: one long-lived process per site that runs every ClientApp task with
flwr's own ``run_clientapp``, imports paid once.

    python -m constrfl.flower.warm.superexec [--task-mode fork|in-process] [--preload MOD]...
                                        [--warm-up MOD:FUNC] [--task-poll 0.2]
                                        [--pull-backoff 0.02]
                                        <flower-superexec arguments>

Start it where ``flower-superexec`` would go, next to ``flower-supernode --isolation
process``::

    flower-supernode --insecure --superlink 127.0.0.1:9092 --isolation process \\
        --port 9094 --node-config '...' &
    python -m constrfl.flower.warm.superexec --insecure --runtime-api-address 127.0.0.1:9094

It is Flower's own ``flower-superexec`` (its argument parsing, its ``run_superexec``
loop that acquires tasks from the SuperNode, its plugin), with one change: the executor
that ``flower-superexec`` would create (``SubprocessExecutor``: ``Popen(["flwr-clientapp",
...])`` per task, which imports flwr's stack, numpy, scipy, numba and constrfl anew
every message) is wrapped by :class:`WarmExecutor`, which runs a ClientApp task

* ``fork`` (default): in a ``fork()``-ed child of this warm process, which calls flwr's
  ``run_clientapp`` with the task's token and exits; a crash or a leak in the app dies
  with the child, as with Flower's own process per task;
* ``in-process``: in this process, one task after the other; the ClientApp module and
  what it caches (constrfl's client, its factorizations) stay loaded between messages.
  Faster; an app that crashes the interpreter takes the warm process with it, and a
  new FAB whose app module has the same name as a loaded one is not re-imported
  (restart the warm process after changing the app).

Other task types go to Flower's executor unchanged.  Paid once, before the first
task: ``--preload`` imports modules (default: ``constrfl.flower``, which imports flwr's
ClientApp runtime, numpy, scipy and numba); ``--warm-up`` calls a function (default
:func:`warm_up`: tiny solves that load constrfl's compiled numba kernels, so that a
forked child finds them loaded; ``none``: nothing).

Waits: ``--task-poll`` (0.2): seconds between task polls while tasks come (the last one
started less than 5 s ago), then backing off to ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``
(Flower's poll, 1 s by default): quick in a solve, nearly free when idle.
``--pull-backoff``: a task's first retry when its message is not all stored yet (the
SuperNode hands out the task before it has pulled the message; flwr waits 1 s, see
:data:`constrfl.flower.warm.waits.FIXED`); 0 keeps flwr's.

On a flwr outside :data:`constrfl.flower.warm.pinned.TESTED` it says so and runs
``flower-superexec`` with the same arguments instead.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import shutil
import signal
import sys
import tempfile
import traceback
from pathlib import Path

from . import waits

__all__ = ["WarmExecutor", "TaskEnded", "InstallOnce", "first_beat_later", "run_task",
           "warm_up", "main"]

COMMAND = "constrfl.flower.warm.superexec"
MODES = ("fork", "in-process")


class TaskEnded(Exception):
    """``flwr_exit`` called by ``run_clientapp`` at the end of a task (exit code)."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


class InstallOnce:
    """flwr's ``install_from_fab(content, skip_prompt=True)`` (which every task calls:
    it extracts the FAB into a temporary directory, verifies its files' hashes and,
    the app being installed already, returns the installed directory) done once per
    FAB: bytes installed before by a task of this SuperExec (a marker in ``root`` named
    by their SHA-256 holds the path) give that path again while it exists.  The same
    bytes verify the same, and flwr reuses the installed directory anyway; what is
    saved is extracting and verifying the same zip for every message.  ``root`` is
    shared by the forked children (a file each, replaced atomically)."""

    def __init__(self, root):
        self.root = Path(root)

    def wrap(self, install):
        def install_once(fab_file, install_dir=None, skip_prompt=False):
            if not (isinstance(fab_file, bytes) and install_dir is None and skip_prompt):
                return install(fab_file, install_dir, skip_prompt)
            marker = self.root / hashlib.sha256(fab_file).hexdigest()
            try:
                path = Path(marker.read_text())
                if path.is_dir():
                    return path
            except OSError:
                pass
            path = install(fab_file, install_dir, skip_prompt)
            part = marker.with_name(f"{marker.name}.{os.getpid()}")
            part.write_text(str(path))
            os.replace(part, marker)
            return path
        return install_once


def first_beat_later(make_heartbeat_fn):
    """flwr's ``make_task_heartbeat_fn_http`` whose function skips its first call: a
    task's ``HeartbeatSender`` then sends its first heartbeat one interval after the start
    (``(30 - 5)·(0.8 ± 0.1)`` s, flwr's) instead of at once, a request less for every
    message.  The SuperNode counts a task alive for 30 s from its claim and 60 s from its
    start (``claim_task``, ``activate_task``), so the first beat is still in time."""
    def make(client):
        beat, first = make_heartbeat_fn(client), True

        def heartbeat():
            nonlocal first
            if first:
                first = False
                return True
            return beat()
        return heartbeat
    return make


@contextlib.contextmanager
def _task_hooks(installs=None):
    """For the duration of one ``run_clientapp`` call: its signal-handler registration
    only collects the task's exit handlers, and its ``flwr_exit`` runs those (last
    registered first) and raises :class:`TaskEnded` instead of ending the process.
    Flower's own ``flwr_exit`` would also run the SuperExec's exit handlers and start a
    thread that ``os._exit``-s the process five seconds later.  Its heartbeats start
    one interval in (:func:`first_beat_later`).  ``installs``: an :class:`InstallOnce`
    for its ``install_from_fab``."""
    from flwr.supernode.runtime import run_clientapp as module
    handlers = []

    def register(event_type, exit_message=None, grpc_servers=None, bckg_threads=None,
                 exit_handlers=None):
        handlers.extend(exit_handlers or [])

    def task_exit(code, *args, **kwargs):
        for handler in reversed(handlers):
            try:
                handler()
            except Exception:        # as flwr's trigger_exit_handlers: ignored
                pass
        raise TaskEnded(int(code))

    names = ("register_signal_handlers", "flwr_exit", "install_from_fab",
             "make_task_heartbeat_fn_http")
    saved = [getattr(module, name) for name in names]
    module.register_signal_handlers, module.flwr_exit = register, task_exit
    module.make_task_heartbeat_fn_http = first_beat_later(module.make_task_heartbeat_fn_http)
    if installs is not None:
        module.install_from_fab = installs.wrap(module.install_from_fab)
    try:
        yield
    finally:
        for name, value in zip(names, saved):
            setattr(module, name, value)


def run_task(spec, parent_pid=None, installs=None):
    """Run the ClientApp task of ``spec`` (flwr's ``ExecutionSpec``) with flwr's
    ``run_clientapp``, as ``flwr-clientapp --token ...`` would; returns its exit code
    (0: the reply and the task's output were pushed; Flower's codes otherwise).
    ``installs``: an :class:`InstallOnce` (None: flwr installs the FAB every task)."""
    from flwr.supercore.tls import validate_and_resolve_root_certificates
    from flwr.supernode.runtime.run_clientapp import run_clientapp
    with _task_hooks(installs):
        try:
            run_clientapp(runtime_api_address=spec.runtime_api_address, token=spec.token,
                          insecure=spec.insecure,
                          certificates=validate_and_resolve_root_certificates(
                              spec.root_certificates_path, spec.insecure),
                          parent_pid=parent_pid,
                          runtime_dependency_install=spec.runtime_dependency_install)
        except TaskEnded as end:
            return end.code
    return 0                                 # (run_clientapp always ends in flwr_exit)


class WarmExecutor:
    """Flower's ``Executor`` protocol: ClientApp tasks run here (``fork`` or
    ``in-process``), any other task type by ``stock`` (Flower's executor)."""

    def __init__(self, stock, mode="fork", polls=None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.stock, self.mode, self.children, self.pid = stock, mode, set(), os.getpid()
        self.polls = polls                   # a waits.Backoff, told when work comes
        self.codes = []                      # exit codes of the tasks, in order
        self.installs = None                 # InstallOnce, from the first ClientApp task

    def _busy(self):
        if self.polls is not None:
            self.polls.touch()

    def get_eligible_capacity(self, supported_task_types, **kwargs):
        return self.stock.get_eligible_capacity(supported_task_types, **kwargs)

    def wait_for_capacity(self, task_type=None, **kwargs):
        return self.stock.wait_for_capacity(task_type, **kwargs)

    def launch(self, spec):
        from flwr.supercore.constant import TaskType
        from flwr.supercore.superexec.executor import LaunchResult
        if spec.task_type != TaskType.CLIENT_APP:
            return self.stock.launch(spec)
        self._busy()
        if self.installs is None:
            self.installs = InstallOnce(tempfile.mkdtemp(prefix="constrfl-superexec-"))
        if self.mode == "in-process":
            self.codes.append(run_task(spec, installs=self.installs))
            self._busy()
            return LaunchResult.accepted()
        try:
            pid = os.fork()
        except OSError as err:
            return LaunchResult.failed(f"fork() failed: {err}")
        if pid == 0:                         # the child: one task, then _exit
            code = 1
            try:
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
                    signal.signal(sig, signal.SIG_DFL)   # not the SuperExec's handlers
                code = run_task(spec, parent_pid=spec.parent_pid, installs=self.installs)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        self.children.add(pid)
        return LaunchResult.accepted()

    def reconcile(self):
        """Reap the children that ended (between task polls)."""
        for pid in list(self.children):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if done:
                self.children.discard(pid)
                self.codes.append(os.waitstatus_to_exitcode(status))
                self._busy()
        self.stock.reconcile()

    def close(self):
        if os.getpid() == self.pid:          # (never in a child)
            self.reconcile()
            self.stock.close()
            if self.installs is not None:
                shutil.rmtree(self.installs.root, ignore_errors=True)


def warm_up():
    """Solve two tiny problems (Neyman-Pearson with both inner solvers and secure
    aggregation, a deployment's default; an LCQP): loads the compiled numba kernels of
    constrfl's common functions, the masks' among them, into this process (from numba's
    cache, or compiling them), so that forked children start with them."""
    import constrfl as cf
    from constrfl.problems import lcqp, neyman_pearson
    from constrfl.problems.datasets import make_classification
    from constrfl.problems.partition import stratified_split
    data = make_classification(n_samples=200, n_features=4, seed=0)
    problem = neyman_pearson(data.X, data.y, stratified_split(data.y, 3, seed=0), 0.4)
    for inner in ("newton", "admm"):
        cf.solve(problem, inner=inner, max_outer=1, secure=True)
    cf.solve(lcqp(n_clients=2, dim=4, rows_per_client=1), inner="newton", max_outer=1)


def _parser():
    ap = waits.command_parser(COMMAND, "with one warm process per site")
    ap.add_argument("--task-mode", choices=MODES, default="fork",
                    help="fork (default): each ClientApp task in a forked child; "
                    "in-process: in this process")
    ap.add_argument("--preload", action="append", default=None, metavar="MODULE",
                    help="import MODULE before the first task (repeatable; default "
                    "constrfl.flower)")
    ap.add_argument("--warm-up", default=f"{COMMAND}:warm_up", metavar="MOD:FUNC",
                    help="call FUNC of MOD before the first task (default: load "
                    "constrfl's compiled kernels; none: nothing)")
    ap.add_argument("--task-poll", type=float, default=waits.SITE_POLL,
                    help="seconds between task polls while tasks come (then "
                    "FLWR_SUPEREXEC_TASK_POLL_INTERVAL, Flower's, 1 s by default)")
    return ap


def main(argv=None):
    parsed = waits.command_args(_parser(), argv, COMMAND, "--help-warm")
    if parsed is None:                      # an untested flwr: Flower's own command
        return None
    a, flwr_args = parsed
    for name in a.preload or ["constrfl.flower"]:
        importlib.import_module(name)
    if a.warm_up != "none":
        module, _, func = a.warm_up.partition(":")
        getattr(importlib.import_module(module), func)()
    polls = waits.adapt_task_polls(a.task_poll)
    from flwr.supercore.cli.flower_superexec import flower_superexec
    from flwr.supercore.constant import ExecutorType
    from flwr.supercore.superexec import run_superexec as loop
    make = loop.get_executor

    def get_executor(executor_type, *args, **kwargs):
        stock = make(executor_type, *args, **kwargs)
        if executor_type != ExecutorType.SUBPROCESS:
            print(f"constrfl: --executor {executor_type}: Flower's executor, not warm",
                  file=sys.stderr, flush=True)
            return stock
        return WarmExecutor(stock, a.task_mode, polls)

    loop.get_executor = get_executor         # the loop's name, in this process only
    waits.run_as_flower(COMMAND, flower_superexec, flwr_args,
                        f"warm SuperExec (ClientApp tasks: {a.task_mode}), PID {os.getpid()}")


if __name__ == "__main__":
    sys.exit(main())
