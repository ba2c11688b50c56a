"""validation/qp_benchmark.py judges every solver against the tight Clarabel reference
where it solved, else against Clarabel at its defaults (on GOULDQP3 the default run's
point is 1.07e-5 (relative) above the optimum, which made a correct answer look wrong)."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "validation"))
import qp_benchmark as Q  # noqa: E402


def rec(solver, objective, claim="optimal", violation=0.0, K=None):
    return dict(problem="P", solver=solver, K=K, claim=claim, status=claim,
                objective=objective, violation=violation, time=0.1, rounds=None,
                message=claim)


def test_the_tight_reference_judges_when_it_solved():
    out = Q.judge([rec("reference", 2.0627840), rec("clarabel", 2.0628060),
                   rec("proxqp", 2.0627840), rec("constrfl", 2.0627844, K=5)], 60.0)
    by = {r["solver"]: r for r in out}
    assert "reference" not in by                          # not a row of the tables
    assert not by["clarabel"]["success"] and by["clarabel"]["objective_error"] > 1e-5
    assert by["proxqp"]["success"] and by["constrfl"]["success"]
    assert by["constrfl"]["wrong"] == "" and by["constrfl"]["reference_solver"] == "reference"


def test_clarabel_at_its_defaults_judges_when_the_reference_did_not_solve():
    for ref in (rec("reference", np.nan, claim="other"), rec("reference", 1.0, violation=1e-3)):
        out = Q.judge([ref, rec("clarabel", 2.0), rec("constrfl", 2.1, K=5)], 60.0)
        by = {r["solver"]: r for r in out}
        assert by["constrfl"]["reference_solver"] == "clarabel"
        assert by["constrfl"]["wrong"].startswith("optimal outside the criterion")
