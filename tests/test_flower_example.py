"""The example app (examples/flower-neyman-pearson) on the in-memory Grid: its
ClientApp builds each site from the site's own CSV named in the node config, its
ServerApp solves and saves the result; the answer is cf.solve's on the same CSVs,
bit for bit."""
import sys
import tomllib
from pathlib import Path

import pytest

import constrfl as cf

pytest.importorskip("flwr")

from flwr.app import Context, RecordDict  # noqa: E402

from constrfl.flower.grid import LocalGrid, task_identity  # noqa: E402
from constrfl.result import load_result  # noqa: E402
from test_flower import assert_same  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flower-neyman-pearson"


@pytest.fixture(scope="module")
def example():
    sys.path.insert(0, str(EXAMPLE))
    try:
        import split_data
        from npapp import client_app, server_app, task
        yield split_data, client_app, server_app, task
    finally:
        sys.path.remove(str(EXAMPLE))


def test_example_apps_solve_the_split_data_like_cf_solve(example, tmp_path):
    split_data, client_app, server_app, task = example
    split_data.split(tmp_path / "sites", 5)
    config = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    run_config = dict(config["tool"]["flwr"]["app"]["config"], tol=1e-4,
                      **{"sites-dir": str(tmp_path / "sites"),
                         "output-dir": str(tmp_path / "result"), "poll-interval": 0.001})
    nodes = [({"site": s, "data": str(tmp_path / "sites" / f"{s}.csv"),
               "state-dir": str(tmp_path / "state")}, lambda: client_app.app)
             for s in task.site_names(5)]
    grid = LocalGrid(nodes, run_config=run_config)
    with task_identity():
        server_app.app(grid, Context(run_id=1, node_id=0, node_config={},
                                     state=RecordDict(), run_config=run_config))
    got = load_result(tmp_path / "result")
    assert (tmp_path / "result" / "timing.json").is_file()
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == sorted(
        f"{s}.state.{i}" for s in task.site_names(5) for i in (0, 1))
    expected = cf.solve(task.problem(tmp_path / "sites", 5, 0.2), inner="newton", tol=1e-4)
    assert expected.status == "optimal"
    assert_same(expected, got)
