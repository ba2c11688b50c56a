"""Relative tolerances (issue 19, item 3): the scales S₁, S₂ of the KKT residuals and
``eps_rel``, OSQP's ε_abs + ε_rel·max‖terms‖."""
import numpy as np
import pytest

import constrfl as cf
from constrfl import functions as fn
from builders import np_problem


def small_qp():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 4))
    C, d = rng.standard_normal((2, 4)), rng.standard_normal(2)
    E, e = rng.standard_normal((1, 4)), rng.standard_normal(1)
    b = rng.standard_normal(4)
    client = cf.Client(objective=fn.Quadratic(A @ A.T, b), constraints=[fn.Affine(C, d)],
                       name="a")
    problem = cf.Problem([client], server=cf.Server(equalities=[fn.Affine(E, e)]))
    return problem, (A @ A.T, b, C, d, E, e)


def test_the_scales_in_closed_form():
    """S₁ = max(‖Σᵢ∇fᵢ‖∞, ‖Σᵢ∇cᵢᵀμᵢ + ∇hᵢᵀνᵢ‖∞) (the terms of the stationarity sum);
    S₂ between ½ and 1 times max over every party's affine rows aⱼᵀw + bⱼ of
    max(|aⱼᵀw|, |bⱼ|) (a lower bound from the parties' sketches; exact here, where the
    largest of each is alone in its octave); the other residuals the largest over the
    rows (each party's the only one in its octave here: exact up to rounding)."""
    problem, (Q, b, C, d, E, e) = small_qp()
    w = np.array([0.3, -1.2, 2.0, 0.7])
    mu, nu = np.array([0.5, 0.0]), np.array([-2.5])
    k = cf.kkt(problem, w, {"a": cf.result.Multipliers(mu, np.zeros(0)),
                            "server": cf.result.Multipliers(np.zeros(0), nu)})
    grad_f = Q @ w + b
    s1 = max(np.abs(grad_f).max(), np.abs(C.T @ mu + E.T @ nu).max())
    s2 = max(np.abs(C @ w).max(), np.abs(d).max(), np.abs(E @ w).max(), np.abs(e).max())
    assert k.stationarity_scale == pytest.approx(s1, rel=1e-14)
    assert 0.5 * s2 <= k.feasibility_scale <= s2 * (1 + 1e-14)
    c, h = C @ w + d, E @ w + e
    assert k.feasibility == pytest.approx(max(np.maximum(c, 0).max(), np.abs(h).max()),
                                          rel=1e-14)
    assert k.complementarity == pytest.approx(np.abs(np.minimum(mu, -c)).max(), rel=1e-14)
    rows = np.where(mu > 0, np.abs(c), np.maximum(c, 0))
    assert k.definition1 == pytest.approx(max(rows.max(), np.abs(h).max()), rel=1e-14)
    assert k.stationarity == pytest.approx(np.abs(grad_f + C.T @ mu + E.T @ nu).max(),
                                           rel=1e-14)


def test_meets_with_a_relative_tolerance():
    k = cf.result.KKT(2e-5, 0.0, 0.0, 9e-7, True, 2.6e5, 1.4e3)
    assert not k.meets(1e-6, 1e-6)
    assert k.meets(1e-6, 1e-6, eps_rel=1e-9)          # 2e-5 ≤ 1e-6 + 2.6e-4
    assert not k.meets(1e-6, 1e-6, eps_rel=1e-11)
    assert k.failures(1e-6, 1e-6, 1e-11) == ["stationarity 2.00e-05 > 3.6e-06"]


def badly_scaled_np():
    p = np_problem(3)
    return cf.Problem([cf.Client(objective=1e6 * c.objective,
                                 constraints=[1e4 * g for g in c.constraints], name=c.name)
                       for c in p.clients], regularizer=p.regularizer)


def test_a_relative_tolerance_stops_a_badly_scaled_solve_at_its_claim():
    """Objective × 1e6, constraints × 1e4: with eps_rel the solve is optimal where the
    absolute tol alone is not met yet, and cf.kkt, recomputed on the pooled functions,
    confirms the relative claim; the point is cvxpy's optimum to its accuracy."""
    big = badly_scaled_np()
    absolute = cf.solve(big, inner="newton")
    relative = cf.solve(big, inner="newton", eps_rel=1e-9)
    assert absolute.status == relative.status == "optimal"
    assert relative.outer_iterations < absolute.outer_iterations
    ref = cf.kkt(big, relative.w, relative.multipliers)
    assert not ref.meets(1e-6, 1e-6)                   # the absolute tol alone fails
    assert ref.meets(1e-6, 1e-6, eps_rel=1e-9)
    for key in ("stationarity", "definition1", "stationarity_scale", "feasibility_scale"):
        assert getattr(relative.kkt, key) == pytest.approx(getattr(ref, key), rel=1e-10)
    cert = cf.certify(big, relative)
    assert cert.reference_status == "optimal" and cert.objective_gap < 1e-7


def test_eps_rel_is_checked_and_saved():
    with pytest.raises(ValueError, match="eps_rel"):
        cf.solve(np_problem(2), eps_rel=-1.0)
    res = cf.solve(np_problem(2), inner="newton", eps_rel=1e-9, max_outer=1)
    assert res.settings["eps_rel"] == 1e-9


def test_a_baseline_reports_the_same_scales_as_cf_kkt():
    p = np_problem(3)
    res = cf.solve(p, method="fedavg", rounds=5, penalty="quadratic")
    ref = cf.kkt(p, res.w, res.multipliers)
    assert ref.stationarity_scale > 0 and ref.feasibility_scale > 0
    for key in ("stationarity", "definition1", "stationarity_scale", "feasibility_scale"):
        assert getattr(res.kkt, key) == pytest.approx(getattr(ref, key), rel=1e-10)
