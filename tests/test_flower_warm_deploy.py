"""Slow (``-m slow``: a SuperLink and SuperNodes on localhost ports): the example deployed
on Flower's stock path (``flower-superexec``: a ``flwr-clientapp`` process per message)
and on constrfl's warm one (both task modes, a SuperNode restart in the middle) gives
``cf.solve``'s answer bit for bit: the warm SuperExec's replies are the stock path's."""
import pytest

import constrfl as cf

pytest.importorskip("flwr")

from constrfl.result import load_result  # noqa: E402
from test_flower import assert_same  # noqa: E402
from test_flower_example import deploy, task  # noqa: E402

CAPPED = 'tol=1e-3 max-outer=1 inner="newton"'


@pytest.mark.slow
@pytest.mark.parametrize("mode, kwargs", [
    ("process", dict(waits="flwr", task_poll=0.05)),      # Flower's stock path
    ("warm", {}),
    ("warm-in-process", {}),
    ("warm", dict(restart=("site-1", 6))),
])
def test_a_deployment_gives_cf_solves_answer(tmp_path, mode, kwargs):
    out = deploy.deploy(tmp_path, 3, mode, run_config=CAPPED, verbose=False, timeout=1200,
                        **kwargs)
    expected = cf.solve(task.problem(tmp_path / "sites", 3, 0.2), inner="newton", tol=1e-3,
                        max_outer=1, secure=True)
    assert_same(expected, load_result(out["result"]))
    pids = {t[0] for t in out["trace"]}
    assert len(pids) == (3 if mode == "warm-in-process" and not kwargs else len(out["trace"]))
    assert bool(out["restarted"]) == ("restart" in kwargs)
