"""cf.certify's verdict: the gap bound a default "optimal" implies, the failed tests
named, bool(cert) == cert.ok, and "infeasible" compared with cvxpy's status."""
import dataclasses

import numpy as np
import pytest

import constrfl as cf
from constrfl import functions as fn
from constrfl.problems import neyman_pearson
from constrfl.problems.datasets import make_classification
from constrfl.problems.partition import stratified_split


@pytest.fixture(scope="module")
def np300():
    """Neyman-Pearson on 300 rows over 3 clients: a default solve ends "optimal" with
    Definition 1 at 7e-7 and a relative objective gap of 1.5e-6 to Clarabel, more than
    the old fixed gap_tol of 1e-6."""
    data = make_classification(n_samples=300, seed=2)
    ids = stratified_split(data.y, 3, seed=2)
    return neyman_pearson(data.X, data.y, ids, 0.2)


def l1(multipliers):
    return sum(np.abs(m.ineq).sum() + np.abs(m.eq).sum() for m in multipliers.values())


def test_a_default_optimal_solve_is_certified(np300):
    res = cf.solve(np300, method="cproxal")
    assert res.status == "optimal"
    cert = cf.certify(np300, res)
    assert cert.objective_gap > 1e-6                  # beyond the old default gap_tol
    assert cert.ok and bool(cert) and cert.failures == [], str(cert)
    # the bound of certify.gap_bound, from the certificate's own fields
    lam, lam_ref = l1(res.multipliers), l1(cert.reference_multipliers)
    allowed = 1e-6 * (np.abs(res.w - cert.reference_w).sum() + max(lam, lam_ref))
    assert abs(cert.objective - cert.reference_objective) <= allowed + 2e-9
    assert cert.gap_bound < 1e-5                       # not vacuous


@pytest.mark.parametrize("tol", [1e-2, 1e-3, 1e-4])
def test_the_gap_bound_holds_for_looser_solves(np300, tol):
    """The bound is derived, not fitted: every (tol, tol)-optimal point satisfies it."""
    res = cf.solve(np300, method="cproxal", tol=tol)
    assert res.status == "optimal"
    cert = cf.certify(np300, res, kkt_tol=tol)
    assert cert.objective_gap <= cert.gap_bound, str(cert)
    assert cert.ok


def test_failures_are_named_and_bool_is_ok(np300):
    res = cf.solve(np300, method="cproxal")
    strict = cf.certify(np300, res, kkt_tol=1e-12, gap_tol=1e-12)
    assert not strict.ok and not strict
    assert [f.split()[0] for f in strict.failures] == ["objective", "stationarity",
                                                       "feasibility/complementarity"]
    assert "objective gap" in repr(strict) and "(gap_tol)" in repr(strict)
    assert "failed: objective gap" in str(strict) and "stationarity" in str(strict)
    # a point off the solution at the objective's scale fails the derived gap test
    shifted = cf.certify(np300, res.w * 0.9, res.multipliers)
    assert any(f.startswith("objective gap") and "bound from kkt_tol" in f
               for f in shifted.failures)
    assert not shifted


def two_sided():
    """w₁ ≤ −1 at client a and w₁ ≥ 1 at client b: infeasible."""
    c = [fn.Affine(np.array([1.0, 0.0]), 1.0), fn.Affine(np.array([-1.0, 0.0]), 1.0)]
    return cf.Problem([cf.Client(objective=fn.Quadratic(np.eye(2)), constraints=c[:1],
                                 name="a"),
                       cf.Client(constraints=c[1:], name="b")])


def test_infeasible_is_compared_with_cvxpys_status():
    p = two_sided()
    res = cf.solve(p, method="cproxal", beta=10.0)
    assert res.status == "infeasible"
    cert = cf.certify(p, res)                          # used to raise RuntimeError
    assert cert.reference_status == "infeasible" and cert.ok and cert
    assert "cvxpy: infeasible" in str(cert)
    claim = cf.certify(p, res.w)                       # a bare point claims a solution
    assert not claim.ok and claim.failures[0] == "cvxpy status 'infeasible', not 'optimal'"


def test_a_wrong_infeasible_claim_fails(np300):
    res = cf.solve(np300, method="cproxal")
    wrong = dataclasses.replace(res, status="infeasible")
    cert = cf.certify(np300, wrong)
    assert not cert.ok and cert.failures == ["constrfl says infeasible, cvxpy 'optimal'"]
