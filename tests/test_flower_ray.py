"""Flower's Ray simulation runs the same apps to the same answer (slow: Ray starts in
15-60 s; deselected by default, run with ``pytest -m slow``; skipped without ray)."""
import pytest

import constrfl as cf
from builders import np_problem

pytestmark = pytest.mark.slow

pytest.importorskip("flwr")
pytest.importorskip("ray")

from constrfl.flower import simulate  # noqa: E402
from test_flower import assert_same  # noqa: E402


def test_ray_simulation_equals_solve_bit_for_bit(monkeypatch):
    for var, value in {"RAY_USAGE_STATS_ENABLED": "0", "FLWR_TELEMETRY_ENABLED": "0",
                       "FLWR_DISABLE_UPDATE_CHECK": "1"}.items():
        monkeypatch.setenv(var, value)
    prob = np_problem(5, 0.4, server_separation=0.7)
    assert_same(cf.solve(prob, inner="newton", secure=True),     # a deployment's default
                simulate(prob, backend="ray", inner="newton"))
