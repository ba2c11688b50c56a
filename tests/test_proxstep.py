"""The proximal Newton point (PN) of constrfl.solvers.proxstep: for a separable P it is
the exact solution of a box/ℓ1 QP.  Oracles: cvxpy/Clarabel on the same QP, and the
optimality conditions (dist∞(0, g + H(z − x) + ∂P(z)) = 0 up to rounding)."""
import cvxpy as cp
import numpy as np
import scipy.sparse as sp
import pytest

from constrfl import prox
from constrfl.solvers import proxstep
from constrfl.solvers.proxstep import prox_newton_point

box_interior_point = proxstep._box_interior_point

SEPARABLE = [prox.L1(0.3), prox.Box(-0.2, 0.5), prox.NonNegative(), prox.ElasticNet(0.2, 0.5),
             prox.L1(0.2) + prox.Box(-0.3, 0.4), prox.SquaredL2(0.3) + prox.NonNegative(),
             prox.ElasticNet(0.1, 1.0) + prox.Box(0.0, 0.3), prox.SquaredL2(0.5)]


def _model(n, seed, cond=1e3):
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    H = (Q * np.geomspace(1.0, cond, n)) @ Q.T
    return H, rng.uniform(-0.2, 0.3, n), 3 * rng.standard_normal(n)


def _reference(x, g, H, P):
    z = cp.Variable(x.size)
    expr, cons = P.cvxpy(z)
    L = np.linalg.cholesky(H)
    cp.Problem(cp.Minimize(g @ (z - x) + 0.5 * cp.sum_squares(L.T @ (z - x)) + expr),
               cons).solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12,
                           tol_feas=1e-12)
    return z.value


@pytest.mark.parametrize("P", SEPARABLE, ids=repr)
@pytest.mark.parametrize("n", [3, 40])
def test_the_separable_step_is_the_exact_qp_solution(P, n):
    H, x, g = _model(n, seed=n)
    z = prox_newton_point(x, g, H, P, 0.0)
    assert P.value(z) < np.inf                                  # in dom P, exactly
    assert P.dist(z, g + H @ (z - x)) <= 1e-12 * np.abs(g).max()  # KKT of the QP
    assert np.abs(z - _reference(x, g, H, P)).max() <= 1e-6     # cvxpy's solution


def test_many_active_bounds_and_kinks_at_a_bad_condition_number():
    H, x, g = _model(120, seed=7, cond=1e9)
    P = prox.L1(1e6) + prox.Box(-0.1, 0.1)          # λ at the scale of H: many kinks
    z = prox_newton_point(x, g, H, P, 0.0)
    # exact up to the rounding of the residual's own evaluation, n·u·max_i Σ_j |H_ij z_j|
    rounding = x.size * 1e-16 * (np.abs(H) @ np.abs(z)).max()
    assert P.dist(z, g + H @ (z - x)) <= rounding
    assert np.isclose(z, 0).sum() > 5 and np.isclose(np.abs(z), 0.1).sum() > 5


def test_an_lp_like_box_qp_where_the_active_sets_cycle_is_solved_exactly(monkeypatch):
    """Q = 10⁴AᵀA + 10⁻³I of rank n/3 plus a proximal term (as β∇c∇cᵀ + I/β is on the
    LP-like Maros–Meszaros problems), a large linear term, fixed coordinates: the
    active-set steps do not settle and the interior point method finishes."""
    rng = np.random.default_rng(0)
    n = 60
    A = rng.standard_normal((n // 3, n))
    H, g = 1e4 * A.T @ A + 1e-3 * np.eye(n), 100 * rng.standard_normal(n)
    lo = np.where(rng.random(n) < 0.5, -1.0, 0.0)
    hi = np.where(rng.random(n) < 0.5, 1.0, np.inf)
    hi[:3] = lo[:3]
    P, x = prox.Box(lo, hi), np.zeros(n)
    ran = []
    monkeypatch.setattr(proxstep, "_box_interior_point",
                        lambda *a: ran.append(1) or box_interior_point(*a))
    assert not proxstep._active_set(H, g, np.zeros(n), lo, hi, np.clip(x, lo, hi))[1]
    z = prox_newton_point(x, g, H, P, 0.0)
    assert ran
    assert P.value(z) < np.inf
    rounding = n * 1e-16 * (np.abs(H) @ np.abs(z) + np.abs(g)).max()
    assert P.dist(z, g + H @ (z - x)) <= rounding
    ref = _reference(x, g, H, P)
    phi = lambda v: g @ v + 0.5 * v @ H @ v                      # noqa: E731
    assert phi(z) <= phi(ref) + 1e-9 * abs(phi(ref))


@pytest.mark.parametrize("P", [prox.L1(0.5), prox.L1(0.5) + prox.Box(-0.3, 0.2)], ids=repr)
def test_an_l1_qp_where_the_active_sets_cycle_is_solved_exactly(P, monkeypatch):
    """Q = AᵀA + 10⁻²I of half rank (as the Hessian's sum of a few rows a client is, the
    server's step of NP with ℓ1), with and without a box: the active-set steps do not
    settle, and the interior point method on the dual (without the box) or on the split
    problem (with it) shows the pieces of the exact solution."""
    rng = np.random.default_rng(0)
    n = 60
    A = rng.standard_normal((n // 2, n))
    H, g, x = A.T @ A + 1e-2 * np.eye(n), rng.standard_normal(n), np.zeros(n)
    _, lam, lo, hi = P.pieces(n)
    assert not proxstep._active_set(H, g, lam, lo, hi, x)[1]
    found = []
    solve = proxstep._l1_by_interior_point
    monkeypatch.setattr(proxstep, "_l1_by_interior_point",
                        lambda *a: found.append(solve(*a)) or found[-1])
    z = prox_newton_point(x, g, H, P, 0.0)
    assert found and found[-1] is not None
    rounding = n * 1e-16 * (np.abs(H) @ np.abs(z) + np.abs(g)).max()
    assert P.dist(z, g + H @ (z - x)) <= rounding
    assert 5 < np.sum(z == 0) < n - 5                           # kinks and free coordinates
    assert np.isfinite(lo).any() == ((z == lo) | (z == hi)).any()   # and bounds with a box
    assert np.abs(z - _reference(x, g, H, P)).max() <= 1e-6


def test_where_the_interior_point_stage_gives_up_the_projected_newton_steps_go_on(monkeypatch):
    """The last stage, reached where the interior point method's pieces do not solve
    (PQ): on the cycling ℓ1 QP above with its box it still lands on the exact solution."""
    rng = np.random.default_rng(0)
    n = 60
    A = rng.standard_normal((n // 2, n))
    H, g, x = A.T @ A + 1e-2 * np.eye(n), rng.standard_normal(n), np.zeros(n)
    P = prox.L1(0.5) + prox.Box(-0.3, 0.2)
    steps = []
    direction = proxstep._direction
    monkeypatch.setattr(proxstep, "_l1_by_interior_point", lambda *a: None)
    monkeypatch.setattr(proxstep, "_direction", lambda *a: steps.append(1) or direction(*a))
    z = prox_newton_point(x, g, H, P, 0.0)
    assert steps
    rounding = n * 1e-16 * (np.abs(H) @ np.abs(z) + np.abs(g)).max()
    assert P.dist(z, g + H @ (z - x)) <= rounding
    assert np.abs(z - _reference(x, g, H, P)).max() <= 1e-6


def test_an_indefinite_hessian_gives_the_step_of_its_positive_model():
    rng = np.random.default_rng(3)
    Q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    lam = np.array([-3.0, -0.5, 0.2, 1.0, 4.0, 9.0])
    H, Habs = (Q * lam) @ Q.T, (Q * np.abs(lam)) @ Q.T
    x, g, P = np.zeros(6), rng.standard_normal(6), prox.L1(0.05) + prox.Box(-1, 1)
    z = prox_newton_point(x, g, H, P, 0.0)
    assert P.dist(z, g + Habs @ (z - x)) <= 1e-12
    assert g @ (z - x) + P.value(z) - P.value(x) < 0            # a descent step


def test_a_non_separable_regularizer_takes_the_admm_route():
    H, x, g = _model(5, seed=1)
    P = prox.L2Ball(0.5)
    x = x / np.linalg.norm(x) * 0.4
    z = prox_newton_point(x, g, H, P, 1e-10)
    assert P.dist(z, g + H @ (z - x), atol=1e-9) <= 1e-8      # the ball's KKT, exact


def test_a_failed_factorization_ends_the_interior_point_method_in_the_box(monkeypatch):
    """Barrier terms beyond what a Cholesky factorization resolves (Maros–Meszaros
    QCAPRI, 1 client, raised LinAlgError out of cf.solve): the interior point method
    returns its last iterate, in the box, and the solve goes on."""
    rng = np.random.default_rng(0)
    n = 30
    A = rng.standard_normal((n // 3, n))
    Q, c = 1e4 * A.T @ A + 1e-3 * np.eye(n), 100 * rng.standard_normal(n)
    lo, hi = -np.ones(n), np.ones(n)

    calls = []

    def singular(*args):
        calls.append(1)
        raise np.linalg.LinAlgError("Matrix is not positive definite")
    monkeypatch.setattr(proxstep, "_mehrotra_step", singular)
    z = proxstep._box_interior_point(Q, c, lo, hi, np.zeros(n), 0.0)
    assert calls == [1]                             # the first step failed, and ended it
    assert np.all((lo <= z) & (z <= hi))


def test_the_last_interior_iterate_is_moved_onto_the_bounds_its_multipliers_hold():
    """An interior point iterate 1e-20 above a bound whose multiplier is large has that
    multiplier as its residual (the box's normal cone is {0} off the bound; Maros–Meszaros
    QSCTAP1 stalled at a stationarity of 292 so); moved onto the bound it is exact."""
    rng = np.random.default_rng(1)
    n = 12
    B = rng.standard_normal((n, n))
    Q, lo, hi = B @ B.T + np.eye(n), np.zeros(n), np.full(n, np.inf)
    active = np.arange(n) < 5
    z_star = np.where(active, 0.0, rng.random(n) + 0.5)
    # c makes z_star optimal, with multipliers 300 on the active bounds
    c = -Q @ z_star + np.where(active, 300.0, 0.0)
    z = z_star + np.where(active, 1e-20, 0.0)
    before = proxstep._residual(Q, c, 0.0, lo, hi, z)
    assert before >= 299
    out = proxstep._crossover(Q, c, lo, hi, z, active, np.zeros(n, bool))
    assert np.array_equal(out[active], lo[active])
    assert proxstep._residual(Q, c, 0.0, lo, hi, out) <= 1e-12 * before
    # a guess that would raise the residual leaves the iterate as it was
    wrong = ~active
    assert np.array_equal(proxstep._crossover(Q, c, lo, hi, z, wrong, np.zeros(n, bool)), z)


def test_far_from_the_origin_the_box_step_is_exact_in_the_step_form():
    """|x| ~ 1e6 and an LP-like H ~ 1e5 (Maros–Meszaros QGROW7, where the step written
    in z, with c = g − Hx, stopped at its rounding level n·u·|H||x| ~ 2e-2 and the solve
    at a stationarity of 0.2): the step is exact up to the rounding of z itself."""
    rng = np.random.default_rng(2)
    n = 40
    A = rng.standard_normal((n // 3, n))
    H = 1e4 * A.T @ A + 1e-3 * np.eye(n)             # LP-like, as in the test above
    x = np.where(rng.random(n) < 0.3, 0.0, 1e6 * (1 + rng.random(n)))
    g = rng.standard_normal(n)
    P = prox.Box(np.zeros(n), np.full(n, np.inf))
    z = prox_newton_point(x, g, H, P, 0.0)
    assert P.value(z) == 0.0
    # exact up to the rounding of z itself: |H| times the spacing of the floats at z
    floor = float(np.max(np.abs(H) @ np.spacing(np.abs(z))))
    assert P.dist(z, g + H @ (z - x)) <= floor
    # the certificate, written out (not P.dist, which is code under test): the KKT
    # conditions of min gᵀd + ½dᵀHd s.t. x + d ≥ 0 at d = z − x, to that rounding: the
    # gradient r = g + Hd vanishes off the bound and is a multiplier r ≥ 0 on it
    # (an oracle's objective is no tolerance: Clarabel's own gap, 2e-9 relative here,
    # failed a 1e-9 comparison)
    floors = np.abs(H) @ np.spacing(np.abs(z))
    r = g + H @ (z - x)
    assert np.all(z >= 0)
    free = z > 0
    assert free.any() and (~free).any()                 # both kinds are tested
    assert np.all(np.abs(r[free]) <= floors[free])
    assert np.all(r[~free] >= -floors[~free])


def test_a_sparse_hessian_is_factored_sparse_to_the_same_exact_step(monkeypatch):
    """n = 300, an LP-like Q with ~3% nonzeros (as the AL Hessian of a sparse QP): the
    interior point method factors it sparse and ends at the step the dense
    factorization gives, exact up to rounding; the sparse factorization is checked to
    have run."""
    rng = np.random.default_rng(5)
    n = 300
    A = sp.random(n // 3, n, density=0.01, random_state=5, format="csr")
    H = (1e4 * (A.T @ A)).toarray() + 1e-3 * np.eye(n)
    g = 100 * rng.standard_normal(n)
    lo = np.where(rng.random(n) < 0.5, -1.0, 0.0)
    hi = np.where(rng.random(n) < 0.5, 1.0, np.inf)
    P, x = prox.Box(lo, hi), np.zeros(n)
    assert proxstep._sparse_copy(H) is not None
    factored = []
    factor = proxstep._factor
    monkeypatch.setattr(proxstep, "_factor",
                        lambda Q, Qs, d: factored.append(Qs is not None) or factor(Q, Qs, d))
    monkeypatch.setattr(proxstep, "_on_kinks_of", lambda *a: None)    # straight to the IPM
    monkeypatch.setattr(proxstep, "ACTIVE_SET_STEPS", 0)
    z = prox_newton_point(x, g, H, P, 0.0)
    assert factored and all(factored)
    rounding = n * 1e-16 * (np.abs(H) @ np.abs(z) + np.abs(g)).max()
    assert P.dist(z, g + H @ (z - x)) <= rounding
    monkeypatch.setattr(proxstep, "SPARSE_MIN_DIM", n + 1)             # the dense route
    factored.clear()
    z_dense = prox_newton_point(x, g, H, P, 0.0)
    assert factored and not any(factored)
    phi = lambda v: g @ v + 0.5 * v @ H @ v                      # noqa: E731
    assert phi(z) == pytest.approx(phi(z_dense), rel=1e-12, abs=1e-9)
