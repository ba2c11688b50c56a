"""The example app (examples/flower-neyman-pearson).

Fast (the default suite; skipped without flwr): on the in-memory Grid its ClientApp
builds each site from the site's own CSV named in the node config and its ServerApp
solves and saves the result, cf.solve's answer bit for bit; a solve that does not end
optimal makes the ServerApp raise (Flower then reports the run finished:failed); a
simulation with the wrong number of SuperNodes fails at once; Flower's own runtime
dependency installer succeeds on the app, offline.

Slow (``-m slow``: SuperLinks, SuperNodes, Ray): the commands of docs/flower.md, run
as written from a copy of the example (``FLWR_HOME`` and ``TMPDIR`` in a temporary
directory, the managed SuperLink on free ports), and ``run.py`` in both engines; each
ends optimal with cf.solve's answer bit for bit, a failing run exits non-zero saying
why, and nothing is left running.
"""
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest

import constrfl as cf

pytest.importorskip("flwr")

from flwr.app import Context, RecordDict  # noqa: E402

from constrfl.flower.grid import LocalGrid  # noqa: E402
from constrfl.result import load_result  # noqa: E402
from test_flower import assert_same  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "flower-neyman-pearson"
DOC = ROOT / "docs" / "flower.md"
CONFIG = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
HAS_RAY = importlib.util.find_spec("ray") is not None


def from_example(*names):
    """The example's modules (its folder is on ``sys.path`` only while importing)."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        return [importlib.import_module(name) for name in names]
    finally:
        sys.path.remove(str(EXAMPLE))


deploy, task = from_example("deploy", "npapp.task")   # free ports, QUIET; the problem


@pytest.fixture(scope="module")
def example():
    return from_example("split_data", "npapp.client_app", "npapp.server_app", "npapp.task")


def solve_in_memory(example, tmp_path, n_sites, faults=None, **config):
    """The data split for ``n_sites`` into ``tmp_path/sites``, then the example's
    ServerApp and one ClientApp per site (node config ``site``, ``data``, ``state-dir``)
    on the in-memory Grid (with ``faults``, see LocalGrid), with the app's run config
    updated by ``config``."""
    split_data, client_app, server_app, _ = example
    split_data.split(tmp_path / "sites", n_sites)
    run_config = dict(CONFIG, **{"num-sites": n_sites, "sites-dir": str(tmp_path / "sites"),
                                 "output-dir": str(tmp_path / "result"),
                                 "poll-interval": 0.001,
                                 "pull-backoff": 0}, **config)   # flwr's, in this process
    nodes = [({"site": s, "data": str(tmp_path / "sites" / f"{s}.csv"),
               "state-dir": str(tmp_path / "state")}, lambda: client_app.app)
             for s in task.site_names(n_sites)]
    grid = LocalGrid(nodes, run_config=run_config, faults=faults)
    server_app.app(grid, Context(run_id=1, node_id=0, node_config={},
                                 state=RecordDict(), run_config=run_config))


def test_example_apps_solve_the_split_data_like_cf_solve(example, tmp_path):
    solve_in_memory(example, tmp_path, 5, tol=1e-4)
    got = load_result(tmp_path / "result")
    assert (tmp_path / "result" / "timing.json").is_file()
    assert json.loads((tmp_path / "result" / "run_config.json").read_text())["tol"] == 1e-4
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == sorted(
        f"{s}{kind}.state.{i}" for s in task.site_names(5) for i in (0, 1)
        for kind in ("", ".secure"))        # the site's state, its secure sum's keys
    expected = cf.solve(task.problem(tmp_path / "sites", 5, 0.2), inner="newton", tol=1e-4,
                        secure=True)
    assert expected.status == "optimal"
    assert_same(expected, got)


def test_a_solve_that_is_not_optimal_fails_the_run_after_saving(example, tmp_path):
    """Flower reports a run finished:failed only when the ServerApp raises."""
    with pytest.raises(RuntimeError, match="constrfl fedproxal ended max_iterations"):
        solve_in_memory(example, tmp_path, 3, tol=1e-8, **{"max-outer": 1})
    got = load_result(tmp_path / "result")                     # saved before raising
    expected = cf.solve(task.problem(tmp_path / "sites", 3, 0.2), inner="newton", tol=1e-8,
                        max_outer=1, secure=True)
    assert expected.status == "max_iterations"
    assert_same(expected, got)


def test_a_simulation_with_another_number_of_supernodes_fails_at_once(example, tmp_path):
    """Flower's default simulation has 2 SuperNodes; the example has 5 sites.  Without
    the check the ServerApp would wait client-timeout (120 s) for sites 2-4.  The Grid
    of Flower's simulation is an InMemoryGrid whose nodes are all registered at the
    start; here one that reports two nodes."""
    from flwr.superlink.grid import InMemoryGrid
    split_data, _, server_app, _ = example
    split_data.split(tmp_path / "sites", 5)
    run_config = dict(CONFIG, **{"sites-dir": str(tmp_path / "sites"),
                                 "output-dir": str(tmp_path / "result")})

    class TwoNodes(InMemoryGrid):
        def __init__(self):
            pass

        def get_node_ids(self):
            return [11, 12]

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="the simulation has 2 SuperNodes but num-sites = 5"
                       ) as err:
        server_app.app(TwoNodes(), Context(run_id=1, node_id=0, node_config={},
                                           state=RecordDict(), run_config=run_config))
    assert time.perf_counter() - t0 < 10
    assert '--federation-config "num-supernodes=5"' in str(err.value)
    assert not (tmp_path / "result").exists()


def test_flowers_dependency_installer_succeeds_offline(tmp_path):
    """What a SuperLink does before each run (dependency installation is on by
    default): flwr's own installer, `uv sync` into a new venv, with uv kept offline.
    With constrfl[flower] listed, it failed ("no versions of constrfl[flower]")."""
    app = tmp_path / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, FLWR_HOME=str(tmp_path / "home"), UV_OFFLINE="1", **deploy.QUIET)
    code = ("import sys; from flwr.supercore.superexec.dependency_installer import "
            "install_app_dependencies as install; print(install(sys.argv[1], run_id=7))")
    out = subprocess.run([sys.executable, "-c", code, str(app)], env=env, text=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    venv = Path(out.stdout.strip().splitlines()[-1])
    installed = list(venv.glob("lib/python*/site-packages/*.dist-info"))
    assert venv.is_dir() and installed == []          # nothing installed in front of ours


# -- slow: the commands themselves ------------------------------------------------------


def doc_block(name):
    """The bash block that follows ``<!-- run: name -->`` in docs/flower.md."""
    m = re.search(rf"<!-- run: {name} -->\n```bash\n(.*?)```", DOC.read_text(), re.S)
    assert m, f"no block '{name}' in docs/flower.md"
    return m.group(1)


def copy_example(tmp_path):
    """The example's files as a fresh clone has them (tracked and new, no caches)."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                            "examples/flower-neyman-pearson"], cwd=ROOT, text=True,
                           capture_output=True, check=True).stdout.split()
    repo = tmp_path / "repo"
    for f in files:
        if (ROOT / f).is_file():
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, repo / f)
    return repo


def processes_with(*texts):
    """PIDs of live processes whose command line or environment contains one of
    ``texts`` (paths)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if any(str(t).encode() in (proc / f).read_bytes() for t in texts
                       for f in ("cmdline", "environ")):
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def stop_what_we_started(*paths, grace=0.0):
    """The processes carrying this test's temporary directories (its FLWR_HOME, its
    TMPDIR) still alive ``grace`` seconds from now get SIGTERM, then SIGKILL, by PID: the
    managed SuperLink that `flwr run .` starts in the background, and anything else left
    behind.  Returns their PIDs."""
    end = time.monotonic() + grace
    while (pids := processes_with(*paths)) and time.monotonic() < end:
        time.sleep(1.0)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(3)
    return pids


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def expected_answer(sites, config=CONFIG):
    """cf.solve on the CSVs with the app's defaults, stated here (not read from the app)."""
    assert (config["method"], config["inner"], config["tol"], config["max-outer"],
            config["secure"]) == ("fedproxal", "newton", 1e-6, 200, True)
    res = cf.solve(task.problem(sites, 5, config["max-class1-loss"]), "fedproxal", 1e-6,
                   inner="newton", max_outer=200, secure=True)
    assert res.status == "optimal"
    return res


def run_block(name, repo, env, timeout):
    t0 = time.monotonic()
    out = subprocess.run(["bash", "-e", "-c", doc_block(name)], cwd=repo, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    print(f"{name}: {time.monotonic() - t0:.0f} s\n{out.stdout}")
    assert out.returncode == 0, out.stdout
    return out.stdout


def statuses(text):
    """The runs' statuses in the JSON that ``flwr ls --format json`` printed."""
    start = text.index('{\n  "success"')
    return [r["status"] for r in json.JSONDecoder().raw_decode(text[start:])[0]["runs"]]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_RAY, reason="Flower's simulation engine needs flwr[simulation]")
def test_doc_flwr_run_on_the_simulation_engine(tmp_path):
    """`flwr run .` against Flower's default `local` connection: a managed SuperLink that
    runs the simulation engine, started by flwr in the background with runtime
    dependency installation on (Flower's default)."""
    repo = copy_example(tmp_path)
    short = Path(tempfile.mkdtemp(prefix="np-", dir="/tmp"))   # Ray puts its sockets in
    #                                            $TMPDIR: AF_UNIX paths have <= 107 bytes
    env = dict(os.environ, FLWR_HOME=str(tmp_path / "home"), TMPDIR=str(short),
               FLWR_LOCAL_SUPERLINK_HTTP_API_PORT=str(deploy.free_port()),
               FLWR_LOCAL_CONTROL_API_PORT=str(deploy.free_port()), **deploy.QUIET)
    env.pop("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", None)
    app = repo / "examples" / "flower-neyman-pearson"
    try:
        out = run_block("simulation", repo, env, timeout=900)
        # then as a user who forgets --federation-config: Flower's 2 SuperNodes
        t0 = time.monotonic()
        forgot = subprocess.run(["flwr", "run", ".", "--stream"], cwd=app, env=env,
                                text=True, capture_output=True, timeout=900)
        seconds = time.monotonic() - t0
        listed = subprocess.run(["flwr", "ls", "--format", "json"], cwd=app, env=env,
                                text=True, capture_output=True, timeout=300).stdout
        sites = short / "constrfl-np-sites"
        assert_same(expected_answer(sites), load_result(sites / "results" / "latest"))
    finally:
        started = stop_what_we_started(tmp_path, short)
        shutil.rmtree(short, ignore_errors=True)
    assert started, "flwr run . started no SuperLink in the background"
    assert "constrfl fedproxal: optimal" in out
    assert statuses(out) == ["finished:completed"]
    assert processes_with(tmp_path, short) == []
    runs = json.loads(listed)["runs"]
    failed = [r for r in runs if r["status"] == "finished:failed"]
    assert len(runs) == 2 and len(failed) == 1, listed
    assert ('the simulation has 2 SuperNodes but num-sites = 5: run `flwr run . '
            '--federation-config "num-supernodes=5"`') in failed[0]["status-details"]
    assert "the simulation has 2 SuperNodes" in forgot.stdout + forgot.stderr
    assert seconds < 240                       # not Ray's start + client-timeout


@pytest.mark.slow
def test_doc_flwr_run_on_a_localhost_deployment(tmp_path):
    """The SuperLink and five SuperNodes started by hand on Flower's default ports, as
    documented; the block stops them itself (kill $(jobs -p))."""
    busy = [p for p in (8000, *range(9094, 9099)) if listening(p)]
    if busy:
        pytest.skip(f"ports {busy} are in use here (the documented commands use them)")
    repo = copy_example(tmp_path)
    sites = tmp_path / "np-sites"
    env = dict(os.environ, FLWR_HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path),
               **deploy.QUIET)
    try:
        out = run_block("deployment", repo, env, timeout=3000)
    finally:
        left = stop_what_we_started(tmp_path, grace=30.0)
    assert left == [], f"left running: {left}"
    assert "constrfl fedproxal: optimal" in out
    assert statuses(out) == ["finished:completed"]
    assert_same(expected_answer(sites), load_result(sites / "results" / "latest"))


def run_py(repo, tmp_path, *args, timeout=3000):
    work = tmp_path / "work"
    env = dict(os.environ, **deploy.QUIET)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "run.py", *args, "--workdir", str(work)],
                         cwd=repo / "examples" / "flower-neyman-pearson", env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    print(f"run.py {' '.join(args)}: exit {out.returncode}, "
          f"{time.monotonic() - t0:.0f} s\n{out.stdout}")
    left = stop_what_we_started(work, grace=10.0)
    assert left == [], f"run.py left running: {left}"
    return out, work


@pytest.mark.slow
@pytest.mark.parametrize("engine", [
    pytest.param("simulation", marks=pytest.mark.skipif(not HAS_RAY, reason="needs Ray")),
    "deployment"])
def test_run_py_ends_optimal_with_cf_solves_answer(engine, tmp_path):
    out, work = run_py(copy_example(tmp_path), tmp_path, engine, "--check")
    assert out.returncode == 0
    assert "finished:completed" in out.stdout
    assert "the run's answer is the same, bit for bit" in out.stdout
    assert_same(expected_answer(work / "sites"), load_result(work / "result"))


@pytest.mark.slow
def test_run_py_says_when_a_run_fails(tmp_path):
    """A run whose ServerApp fails (here: an unknown method) is reported with Flower's
    reason and a non-zero exit code, within seconds, and everything is stopped."""
    t0 = time.monotonic()
    out, _ = run_py(copy_example(tmp_path), tmp_path, "deployment",
                    "--run-config", 'method="fedbogus"', timeout=600)
    assert out.returncode == 1
    assert re.search(r"run \d+: finished:failed\n  ServerApp failed with exception: .*fedbogus",
                     out.stdout), out.stdout
    assert time.monotonic() - t0 < 300
