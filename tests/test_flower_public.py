"""constrfl.flower uses Flower's public modules only (flwr.app, flwr.clientapp,
flwr.serverapp, flwr.simulation): a flwr release that moves its runtime's modules
leaves the ServerApp, the ClientApp, the codec, the in-memory grid and ``simulate``
working.  Only the warm runtime (constrfl.flower.warm, pinned to the tested flwr
versions) reaches inside flwr.
"""
import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("flwr")

import constrfl.flower  # noqa: E402

PUBLIC = ("flwr", "flwr.app", "flwr.clientapp", "flwr.serverapp", "flwr.simulation")
PACKAGE = Path(constrfl.flower.__file__).parent


def public(module):
    return module in PUBLIC or module.startswith(tuple(m + "." for m in PUBLIC[1:]))


def flwr_imports(path):
    """The flwr modules a source file imports (``import`` and ``from ... import``)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "flwr")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "flwr":
            yield node.module


def test_the_flower_backend_imports_only_public_flwr_modules():
    files = list(PACKAGE.glob("*.py"))
    assert {p.stem for p in files} >= {"client", "codec", "grid", "server", "simulate"}
    found = {p.name: sorted(set(flwr_imports(p))) for p in files}
    assert any(found.values())                    # the check sees the imports
    assert {f: [m for m in ms if not public(m)] for f, ms in found.items()} == \
        {f: [] for f in found}


def test_the_check_would_see_an_internal_import():
    assert not public("flwr.common.constant") and not public("flwr.supercore.run")
    assert public("flwr.serverapp.strategy") and public("flwr.app")


HIDDEN = textwrap.dedent("""
    import builtins, sys
    import numpy as np
    import flwr.app, flwr.clientapp, flwr.serverapp   # flwr's own imports happen here
    PUBLIC = {public!r}

    def public(name):
        return name in PUBLIC or name.startswith(tuple(m + "." for m in PUBLIC[1:]))

    real, refused = builtins.__import__, []

    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        importer = (globals or {{}}).get("__name__", "")
        if level == 0 and name.split(".")[0] == "flwr" and not public(name) \\
                and importer.startswith("constrfl"):
            refused.append((importer, name))
            raise ModuleNotFoundError(f"{{name}} is hidden", name=name)
        return real(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded
    try:                                   # the guard refuses what constrfl imports
        exec("from flwr.common.constant import ErrorCode", {{"__name__": "constrfl.x"}})
    except ModuleNotFoundError:
        pass
    assert refused == [("constrfl.x", "flwr.common.constant")], refused
    refused.clear()
    sys.modules["flwr.common.constant"] = None          # as if flwr had moved them
    sys.modules["flwr.supercore.task_identity"] = None

    import constrfl as cf
    from constrfl.flower import simulate
    sys.path.insert(0, {tests!r})
    from builders import np_problem
    problem = np_problem(5, 0.4, server_separation=0.7)
    got = simulate(problem, tol=1e-4)
    want = cf.solve(problem, tol=1e-4, secure=True)
    assert not refused, refused
    assert got.status == want.status == "optimal", (got.status, want.status)
    assert np.array_equal(got.w, want.w) and got.rounds == want.rounds
    assert not [m for m in sys.modules if m.startswith("constrfl.flower.warm")]
    print("ok", got.rounds)
""")


def test_simulate_runs_with_flwr_internals_hidden():
    """In a fresh process: every import of a non-public flwr module made by constrfl's
    code raises ModuleNotFoundError, and two of the internal modules the backend used to
    import are removed outright; ``simulate(backend="inmemory")`` still gives
    ``cf.solve``'s answer bit for bit (the guard is first shown to refuse such an
    import)."""
    script = HIDDEN.format(public=PUBLIC, tests=str(Path(__file__).parent))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[0] == "ok"
