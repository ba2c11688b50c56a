"""Acceptance 2: fedproxal and cproxal at tol=1e-6 against cvxpy/Clarabel on the pooled
problem: relative objective gap ≤ 1e-6, ‖w − w*‖∞ ≤ 1e-4, stationarity and
feasibility ≤ 1e-6 (recomputed at the returned point)."""
import functools

import numpy as np
import pytest

import constrfl as cf
from constrfl import prox
from builders import lcqp_problem, np_problem

BOX = prox.Box(np.r_[np.full(5, -0.5), -np.inf], np.r_[np.full(5, 0.5), np.inf])

CASES = {
    # (a) LCQP of docs/algorithms.md §6: n=5, d=50, 2 equality rows per client
    "lcqp": lcqp_problem,
    # (b) logistic NP, a constraint per client and a global constraint at the server
    "np_local_and_global": lambda: np_problem(5, 0.4, server_separation=0.7),
    # (c) nonsmooth regularizers together with inequality constraints
    "np_l1": lambda: np_problem(5, 0.5, regularizer=prox.L1(0.02)),
    "np_box": lambda: np_problem(5, 0.5, regularizer=BOX),
    "np_ridge": lambda: np_problem(5, 0.4, regularizer=prox.SquaredL2(0.05)),
    # (d) one client and twenty clients
    "np_1_client": lambda: np_problem(1, 0.5, server_separation=0.7),
    "np_20_clients": lambda: np_problem(20, 0.4, rows=800),
}


@functools.lru_cache(maxsize=None)
def problem(case):
    return CASES[case]()


@functools.lru_cache(maxsize=None)
def reference(case):
    """cvxpy/Clarabel on the pooled problem (independent of our solver)."""
    p = problem(case)
    cert = cf.certify(p, np.zeros(p.dim))
    assert cert.reference_status == "optimal"
    return cert


SOLVERS = {"fedproxal-admm": dict(method="fedproxal", inner="admm"),
           "fedproxal-newton": dict(method="fedproxal", inner="newton"),   # = the default here
           "fedproxal-newton-cg": dict(method="fedproxal", inner="newton-cg"),
           "cproxal": dict(method="cproxal")}
NONSMOOTH = ("np_l1", "np_box")          # Newton-CG needs a smooth regularizer


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_cvxpy(case, solver):
    p = problem(case)
    if solver.endswith("-cg") and case in NONSMOOTH:
        with pytest.raises(ValueError, match="'newton-cg' needs a smooth regularizer"):
            cf.solve(p, **SOLVERS[solver])
        return
    res = cf.solve(p, tol=1e-6, **SOLVERS[solver])
    assert res.status == "optimal", res.message
    ref = reference(case)
    F_ref = ref.reference_objective
    assert abs(res.objective - F_ref) / abs(F_ref) <= 1e-6
    assert np.max(np.abs(res.w - ref.reference_w)) <= 1e-4
    assert res.kkt.stationarity <= 1e-6
    assert res.kkt.feasibility <= 1e-6
    # res.kkt is what cf.kkt computes from scratch at the returned point
    again = cf.kkt(p, res.w, res.multipliers)
    assert again == res.kkt
    if solver.startswith("fedproxal"):
        assert res.rounds > 0 and res.bytes_up > 0 and res.bytes_down > 0
    else:
        assert res.rounds == 0


def test_cases_exercise_what_they_claim():
    """Guard the instances: the constraints (and kinks/bounds) are active at the optimum."""
    mult = reference("np_local_and_global").reference_multipliers
    assert mult["server"].ineq[0] > 0.1
    assert sum(m.ineq.max(initial=0) > 0.1 for k, m in mult.items() if k != "server") >= 2
    assert reference("np_1_client").reference_multipliers["server"].ineq[0] > 0.1
    assert np.sum(np.abs(reference("np_l1").reference_w) < 1e-7) >= 1
    assert np.sum(np.abs(np.abs(reference("np_box").reference_w[:5]) - 0.5) < 1e-7) >= 1
    assert np.abs(reference("lcqp").reference_multipliers["client-0"].eq).max() > 1e-3
    ridge = reference("np_ridge").reference_multipliers
    assert sum(m.ineq.max(initial=0) > 0.1 for m in ridge.values()) >= 2


def test_certificate_reports_both_points():
    p = problem("np_l1")
    res = cf.solve(p, method="cproxal", tol=1e-6)
    cert = cf.certify(p, res)
    assert cert.kkt == res.kkt
    assert cert.reference_kkt.stationarity <= 1e-6
    assert cert.objective_gap == pytest.approx(
        abs(res.objective - cert.reference_objective) / abs(cert.reference_objective))
    assert cert.w_distance <= 1e-4
    # our multipliers agree with cvxpy's duals in the same sign convention (measured
    # 2.9e-5 at tol 1e-6 with active multipliers ≈ 0.5; a sign flip would give ≈ 1)
    assert cert.multiplier_distance <= 1e-4
    text = str(cert)
    assert "stationarity" in text and "cvxpy" in text


@pytest.mark.parametrize("method", ["fedproxal", "cproxal"])
def test_norm_ball_constraints_from_squared_norm(method):
    """‖w − c‖ ≤ r₁ at one client and ‖w‖ ≤ r₀ at the server, written as
    ``fn.SquaredNorm(b=c) - r₁²`` and ``fn.SquaredNorm() - r₀²``; certified by cvxpy,
    whose form is cp.sum_squares.  Both bind: the data pull w toward 10·e₀, the balls
    (centres 0 and 2·e₁, radii 1.5 and 1.2) meet in a lens whose point furthest along
    e₀ lies on both spheres, while each ball alone would give a point outside the other."""
    rng = np.random.default_rng(3)
    d = 6
    w_star = np.r_[10.0, 0.3 * rng.standard_normal(d - 1)]
    clients = []
    for i in range(3):
        X = rng.standard_normal((30, d))
        clients.append(cf.Client(objective=cf.functions.LeastSquares(X, X @ w_star),
                                 name=f"c{i}"))
    center = 2.0 * np.eye(d)[1]
    clients[1] = cf.Client(objective=clients[1].objective, name="c1",
                           constraints=[cf.functions.SquaredNorm(b=center) - 1.2 ** 2])
    server = cf.Server(constraints=[cf.functions.SquaredNorm() - 1.5 ** 2])
    prob = cf.Problem(clients, server=server)
    res = cf.solve(prob, method=method, tol=1e-6)
    assert res.status == "optimal", res.message
    cert = cf.certify(prob, res)
    assert cert.reference_status == "optimal"
    assert cert.objective_gap <= 1e-6, str(cert)
    assert cert.kkt.stationarity <= 1e-6 and cert.kkt.feasibility <= 1e-6
    assert cert.kkt.complementarity <= 1e-6
    mult = cert.reference_multipliers
    assert mult["server"].ineq[0] > 1e-2 and mult["c1"].ineq[0] > 1e-2   # both bind
    assert np.linalg.norm(res.w) == pytest.approx(1.5, abs=1e-6)


def test_certificate_verdict_and_short_repr():
    p = problem("np_l1")
    res = cf.solve(p, method="cproxal", tol=1e-6)
    cert = cf.certify(p, res)
    assert cert.ok and cert.reference_projection == 0.0
    text = repr(cert)
    assert text.startswith("Certificate(ok=True, objective_gap=") and len(text) < 160
    assert "ok: True" in str(cert) and "stationarity" in str(cert)
    strict = cf.certify(p, res, kkt_tol=1e-12)                # our residuals are ~1e-7
    assert not strict.ok and repr(strict).startswith("Certificate(ok=False")
    far = cf.certify(p, np.zeros(p.dim))
    assert not far.ok and far.objective_gap > 1e-2
    with pytest.raises(ValueError, match="certify: gap_tol must be a positive number"):
        cf.certify(p, res, gap_tol=0.0)


def test_reference_point_outside_an_indicator_is_projected():
    """SCS stops 8.5e-6 outside the L1 ball here, so P = inf at its point; certify
    projects it onto the ball and reports how far it moved."""
    from constrfl.problems import norm_ball_logistic
    p = norm_ball_logistic(ball="l1", radius=1.0, seed=0)
    res = cf.solve(p, method="cproxal", tol=1e-6)
    cert = cf.certify(p, res, solver="SCS")
    assert 1e-7 < cert.reference_projection < 1e-4
    assert np.isfinite(cert.reference_objective)
    assert np.abs(cert.reference_w).sum() <= 1.0 * (1 + 1e-12)
    assert cert.objective_gap <= 1e-4                         # SCS's own accuracy
    assert "projected onto dom P" in str(cert)
