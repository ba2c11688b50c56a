"""The core never imports Flower: ``import constrfl`` (and a solve) leaves flwr and
``constrfl.flower`` unloaded, with or without flwr installed (this test needs no flwr)."""
import subprocess
import sys

CODE = """
import sys
import constrfl, constrfl.api, constrfl.federation, constrfl.problems, constrfl.solvers.baselines

def loaded():
    return sorted(m for m in sys.modules
                  if m.split(".")[0] == "flwr" or m.startswith("constrfl.flower"))

assert not loaded(), loaded()
r = constrfl.solve(constrfl.problems.lcqp(n_clients=2, dim=4, rows_per_client=1),
                   inner="newton")
assert r.status == "optimal", r.status
assert not loaded(), loaded()
"""


def test_core_never_imports_flwr():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
