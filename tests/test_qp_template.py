"""federated_qp and load_maros_meszaros: the federation of ``min ½xᵀPx + qᵀx + r s.t.
l ≤ Ax ≤ u`` is the same QP (values, constraints, cvxpy solution vs. Clarabel on the raw
QP), and one Maros–Meszaros file loads as published."""
import numpy as np
import pytest
import scipy.sparse as sp

import constrfl as cf
from conftest import dataset_dir
from constrfl.problems import QuadraticProgram, federated_qp
from constrfl.problems.datasets import load_maros_meszaros

INF = 1e20

# Bound rows a·x_j ∈ [l, u] (one nonzero) and the box they intersect to.
BOUND_ROWS = [(0, 2.0, -2.0, 4.0),        # x0 ∈ [-1, 2]
              (0, -1.0, -INF, 1.5),       # x0 ≥ -1.5 (looser)
              (1, -4.0, -4.0, 8.0),       # x1 ∈ [-2, 1] (a < 0 swaps the sides)
              (2, 3.0, 1.5, 1.5),         # x2 = 0.5 (fixed)
              (3, 1.0, -INF, INF)]        # free: no bound
BOX_LOWER = [-1.0, -2.0, 0.5, -np.inf, -np.inf, -np.inf]
BOX_UPPER = [2.0, 1.0, 0.5, np.inf, np.inf, np.inf]


def random_qp(seed=0, n=6):
    """A strongly convex QP with the bound rows above, 2 equality rows, 5 dense
    inequality rows (two-sided, one-sided, free) and an all-zero row; x = 0 with
    x2 = 0.5 is feasible for the multi-variable rows."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((n, n))
    P = M @ M.T + 0.5 * np.eye(n)
    bounds = np.zeros((len(BOUND_ROWS), n))
    for i, (j, a, _, _) in enumerate(BOUND_ROWS):
        bounds[i, j] = a
    dense = rng.standard_normal((7, n))
    x0 = np.array([0, 0, 0.5, 0, 0, 0])
    c = dense @ x0
    l = np.r_[[b[2] for b in BOUND_ROWS], c[:2], c[2:4] - 0.3, -INF, c[5] - 0.1, -INF, 0.0]
    u = np.r_[[b[3] for b in BOUND_ROWS], c[:2], c[2:4] + 0.2, c[4] + 0.1, INF, INF, 1.0]
    A = sp.csr_array(np.vstack([bounds, dense, np.zeros((1, n))]))
    return sp.csr_array(P), rng.standard_normal(n), A, l, u, 1.5


def pooled_constraints(problem, x):
    """Every pooled inequality value, the server's equality values, and P(x)."""
    ineq = np.concatenate([np.atleast_1d(c.value(x)) for cl in problem.clients
                           for c in cl.constraints])
    eq = np.concatenate([np.atleast_1d(h.value(x)) for h in problem.server.equalities])
    return np.sort(ineq), eq, problem.regularizer.value(x)


def clarabel_raw(P, q, A, l, u, r):
    """Clarabel (through cvxpy) on the raw QP, not the template."""
    import cvxpy as cp
    x = cp.Variable(len(q))
    lo, hi = np.abs(l) < INF, np.abs(u) < INF
    prob = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, cp.psd_wrap(P)) + q @ x + r),
                      [A[lo] @ x >= l[lo], A[hi] @ x <= u[hi]])
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert prob.status == "optimal"
    return x.value, prob.value


def test_template_deals_rows_by_kind():
    P, q, A, l, u, r = random_qp()
    problem = federated_qp(P, q, A, l, u, r, n_clients=2, seed=3)
    np.testing.assert_array_equal(problem.regularizer.lower, BOX_LOWER)
    np.testing.assert_array_equal(problem.regularizer.upper, BOX_UPPER)
    assert problem.server.n_eq == 2
    # 5 dense non-equality rows: 2 two-sided, 1 upper-only, 1 lower-only, 1 free → 6 sides
    assert sum(c.n_ineq for c in problem.clients) == 6
    assert [c.name for c in problem.clients] == ["client-0", "client-1"]
    assert problem.qp.l[1] == -np.inf and problem.qp.u[4] == np.inf


def test_pooled_problem_is_the_qp():
    """Σ client objectives = ½xᵀPx + qᵀx + r; the pooled inequality values are the raw
    rows' finite sides; the equalities are A_E x − l_E; the box holds iff the bound rows
    hold."""
    P, q, A, l, u, r = random_qp()
    problem = federated_qp(P, q, A, l, u, r, n_clients=3, seed=1)
    qp, Ad = problem.qp, A.toarray()
    rng = np.random.default_rng(1)
    feasible = np.array([0, 0, 0.5, 0, 0, 0])
    for k in range(30):                   # x0, then moves of some coordinates away from it
        x = feasible + (k > 0) * rng.standard_normal(6) * rng.integers(0, 2, 6)
        assert sum(c.objective.value(x) for c in problem.clients) == pytest.approx(
            0.5 * x @ P @ x + q @ x + r, rel=1e-12)
        ineq, eq, box = pooled_constraints(problem, x)
        rows = Ad[7:12] @ x
        sides = np.r_[rows - qp.u[7:12], qp.l[7:12] - rows]
        np.testing.assert_allclose(ineq, np.sort(sides[np.isfinite(sides)]), atol=1e-12)
        np.testing.assert_allclose(eq, Ad[5:7] @ x - l[5:7], atol=1e-12)
        bound_ok = all(lo <= a * x[j] <= hi for j, a, lo, hi in BOUND_ROWS)
        assert (box == 0.0) == bound_ok
        feasible_here = bound_ok and np.all(ineq <= 0) and not eq.any()
        assert (qp.violation(x) == 0.0) == feasible_here
        assert feasible_here or k > 0


def test_pooled_cvxpy_solution_is_clarabels_on_the_raw_qp():
    P, q, A, l, u, r = random_qp(seed=2)
    problem = federated_qp(P, q, A, l, u, r, n_clients=3)
    x_star, f_star = clarabel_raw(P.toarray(), q, A.toarray(), l, u, r)
    cert = cf.certify(problem, problem.start_point())
    assert cert.reference_status == "optimal"
    np.testing.assert_allclose(cert.reference_w, x_star, atol=1e-6)
    assert cert.reference_objective == pytest.approx(f_star, rel=1e-6)
    assert problem.qp.objective(x_star) == pytest.approx(f_star, rel=1e-9)


def test_fedproxal_solves_a_small_template_qp():
    P, q, A, l, u, r = random_qp(seed=2)
    problem = federated_qp(P, q, A, l, u, r, n_clients=3)
    res = cf.solve(problem, tol=1e-6)
    assert res.status == "optimal"
    assert cf.certify(problem, res).ok


def test_quadratic_program_reads_infinite_bounds_and_checks_shapes():
    qp = QuadraticProgram(np.eye(2), [1, 2], [[1, 1]], [-1.0000001e20], [9.99e19])
    assert qp.l[0] == -np.inf and qp.u[0] == np.inf and qp.r == 0.0
    assert qp.violation(np.array([1e6, 1e6])) == 0.0
    with pytest.raises(ValueError, match="l > u"):
        QuadraticProgram(np.eye(2), [1, 2], [[1, 1]], [1.0], [0.0])
    with pytest.raises(ValueError, match="q has 3 entries"):
        QuadraticProgram(np.eye(2), [1, 2, 3], [[1, 1]], [0.0], [1.0])


def test_template_refuses_contradictory_bound_rows():
    with pytest.raises(ValueError, match="x\\[0\\] give 2 > 1"):
        federated_qp(np.eye(2), np.zeros(2), [[1, 0], [-1, 0]], [2, -1], [3, -1])


def test_load_maros_meszaros_hs21():
    """HS21: min 0.01x₁² + x₂² − 100 s.t. 10x₁ − x₂ ≥ 10, 2 ≤ x₁ ≤ 50, −50 ≤ x₂ ≤ 50;
    optimum −99.96 at (2, 0)."""
    qp = load_maros_meszaros(dataset_dir("maros_meszaros") / "HS21.mat")
    assert (qp.name, qp.n, qp.m, qp.r) == ("HS21", 2, 3, -100.0)
    assert sp.issparse(qp.P) and sp.issparse(qp.A)
    assert qp.u[0] == np.inf
    x = np.array([2.0, 0.0])
    assert qp.objective(x) == pytest.approx(-99.96, rel=1e-12)
    assert qp.violation(x) == 0.0 and qp.violation(np.array([1.0, 0.0])) > 0
    problem = federated_qp(qp.P, qp.q, qp.A, qp.l, qp.u, qp.r, n_clients=2)
    np.testing.assert_array_equal(problem.regularizer.lower, [2, -50])
    assert sum(c.n_ineq for c in problem.clients) == 1 and problem.server.n_eq == 0


def test_load_maros_meszaros_missing_file():
    with pytest.raises(FileNotFoundError, match="Maros-Meszaros"):
        load_maros_meszaros("no/such/file.mat")
