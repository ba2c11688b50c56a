"""The save format's type tags (issue 23): dataclasses are saved under the tags their
classes registered (:func:`constrfl.records.saved_as`), files of format version 2 (tagged
by class names) still load, without the solver state of their per-site protocol (a
resume is refused with the reason), and :mod:`constrfl.result` imports no solver.

The version-2 files in ``data/result-v2`` were written by the code of commit e72988d for
``np_problem(2, 0.4, rows=60)`` (:data:`FIXTURES`; ``admm-client-error``: client 1's
gradient raised at its 20th call, in the first subproblem's ADMM).
"""
import ast
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import constrfl as cf
from constrfl import records, result
from constrfl.solvers.admm import ADMMState
from constrfl.solvers.baselines import BaselineState
from constrfl.solvers.newton import NewtonState
from constrfl.solvers.proxal import OuterState
from builders import np_problem

DATA = Path(__file__).resolve().parent / "data" / "result-v2"
#: each fixture: the options it was solved with, its status, its solver state's classes
#: (outer, inner) and the options that resume it
FIXTURES = {
    "admm": (dict(inner="admm", max_outer=1), "max_iterations", (OuterState, ADMMState),
             dict(max_outer=100)),
    "newton": (dict(inner="newton", max_outer=1), "max_iterations",
               (OuterState, NewtonState), dict(max_outer=100)),
    "fedavg": (dict(method="fedavg", penalty="quadratic", rounds=2), "max_iterations",
               (BaselineState,), dict(rounds=4)),
    "admm-client-error": (dict(inner="admm"), "client_error", (OuterState, ADMMState), {}),
}


def problem():
    return np_problem(2, 0.4, rows=60)


def tags(path):
    """The ``$type`` tags of a saved result, with their counts."""
    found = {}

    def walk(x):
        if isinstance(x, dict):
            if "$type" in x:
                found[x["$type"]] = found.get(x["$type"], 0) + 1
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(json.loads((Path(path) / "result.json").read_text()))
    return found


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_version_2_files_load(name):
    options, status, classes, _ = FIXTURES[name]
    assert json.loads((DATA / name / "result.json").read_text())["version"] == 2
    res = cf.load_result(DATA / name)
    assert res.status == status and res.w.shape == (6,)
    assert res.settings["method"] == options.get("method", "fedproxal")
    assert isinstance(res.kkt, cf.KKT) and np.isfinite(res.kkt.stationarity)
    assert sorted(res.multipliers) == ["client-0", "client-1", "server"]
    assert all(isinstance(m, cf.Multipliers) for m in res.multipliers.values())
    assert res.state is None                       # the per-site protocol's: not resumed


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_version_2_files_are_not_resumed(name):
    """A version-2 file's state belongs to the protocol before sums: a resume is
    refused, saying why."""
    _, _, _, more = FIXTURES[name]
    with pytest.raises(ValueError, match="before format version 4"):
        cf.solve(problem(), resume=cf.load_result(DATA / name), **more)


def test_saved_under_registered_tags_whatever_the_class_names(tmp_path):
    res = cf.solve(problem(), inner="newton", max_outer=1)
    path = res.save(tmp_path / "r")
    assert json.loads((path / "result.json").read_text())["version"] == 4
    assert set(tags(path)) == {"outer-state", "newton-state", "multipliers", "kkt"}
    names = {cls: cls.__name__ for cls in (OuterState, NewtonState)}
    try:
        for cls in names:
            cls.__name__ = "Renamed"
        assert tags(res.save(tmp_path / "renamed")) == tags(path)
    finally:
        for cls, name in names.items():
            cls.__name__ = name


def test_unknown_and_unregistered_types_are_named(tmp_path):
    res = cf.solve(problem(), inner="admm", max_outer=1)
    path = res.save(tmp_path / "r")
    text = (path / "result.json").read_text()
    (path / "result.json").write_text(text.replace('"admm-state"', '"no-such-state"'))
    with pytest.raises(ValueError, match="unknown saved type tag 'no-such-state'"):
        cf.load_result(path)

    @dataclass
    class Unregistered:
        x: float
    res.state["solver"].inner = Unregistered(1.0)
    with pytest.raises(TypeError, match="Unregistered cannot be saved"):
        res.save(tmp_path / "s")
    with pytest.raises(ValueError, match="already .*OuterState's"):
        records.saved_as("outer-state")(Unregistered)


def test_records_are_a_leaf_and_result_imports_no_solver():
    """records imports nothing of the package, result neither the solvers nor the
    package's namespace, and both keep their public names."""
    def relative(module):
        tree = ast.parse(Path(module.__file__).read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}
    assert relative(records) == set()
    assert relative(result) <= {"records", "status", "plot", "methods"}
    assert cf.KKT is result.KKT is records.KKT
    assert cf.Multipliers is result.Multipliers is records.Multipliers


def test_a_fresh_process_knows_every_tag(tmp_path):
    """Importing constrfl.result alone registers the solvers' states."""
    for name, (options, *_) in FIXTURES.items():
        cf.solve(problem(), **dict(options, max_outer=1) if "rounds" not in options
                 else options).save(tmp_path / name)
    code = ("from constrfl.result import load_result\n"
            f"for name in {sorted(FIXTURES)!r}:\n"
            f"    assert load_result({str(tmp_path)!r} + '/' + name).state\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr


def _damage(path, how):
    """Damage a saved result in one of the ways a disk, a copy or a hand edit does."""
    jpath, npath = path / "result.json", path / "arrays.npz"
    record = json.loads(jpath.read_text())
    if how == "json cut short":
        jpath.write_text(jpath.read_text()[:100])
    elif how == "json empty":
        jpath.write_text("")
    elif how == "npz cut short":
        npath.write_bytes(npath.read_bytes()[:200])
    elif how == "npz missing":
        npath.unlink()
    elif how == "array missing":
        with np.load(npath) as npz:
            arrays = {k: v for k, v in npz.items() if k != "multipliers/server/ineq"}
        np.savez(npath, **arrays)
    elif how == "key missing":
        del record["bytes_up"]
        jpath.write_text(json.dumps(record))
    elif how == "list for an object":
        record["kkt"] = [1, 2]
        jpath.write_text(json.dumps(record))
    elif how == "unknown status":
        record["status"] = "weird"
        jpath.write_text(json.dumps(record))
    elif how == "unknown method":
        record["method"] = "fednothing"
        jpath.write_text(json.dumps(record))
    elif how == "not an object":
        jpath.write_text("[]")


@pytest.mark.parametrize("how, names, says", [
    ("json cut short", "result.json", "not readable JSON"),
    ("json empty", "result.json", "not readable JSON"),
    ("npz cut short", "arrays.npz", "not a readable archive"),
    ("npz missing", "arrays.npz", "missing"),
    ("array missing", "", "'multipliers/server/ineq' that result.json names is not in"),
    ("key missing", "result.json", "entries missing: bytes_up"),
    ("list for an object", "result.json", "kkt is not the KKT record"),
    ("unknown status", "result.json", "status 'weird' is not a constrfl status"),
    ("unknown method", "result.json", "method 'fednothing' is not a constrfl method"),
    ("not an object", "result.json", "holds a list"),
])
def test_a_damaged_file_is_one_clear_error_naming_it(tmp_path, how, names, says):
    """Every kind of damage is a DamagedResult (a ValueError) naming the file and what
    is wrong, never a raw JSONDecodeError, BadZipFile, KeyError or AttributeError."""
    res = cf.solve(problem(), inner="admm", max_outer=1)
    path = res.save(tmp_path / "r")
    _damage(path, how)
    with pytest.raises(result.DamagedResult) as err:
        cf.load_result(path)
    assert str(path / names) in str(err.value) and says in str(err.value), str(err.value)
