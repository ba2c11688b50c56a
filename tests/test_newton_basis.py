"""``inner="newton-basis"``: the Hessian of a party of row losses sent as its core in the
party's row basis (B1), the server's step (B2)–(B3).

Oracles: the party's dense Hessian from the fused kernel on its own rows (B1), a dense
NumPy solve of the explicit matrix (B2)–(B3), cvxpy/Clarabel on the pooled problem, and
the subproblem stationarity recomputed from the raw data with NumPy."""
import numpy as np
import pytest

import constrfl as cf
from constrfl import functions as fn, prox
from constrfl.problems.datasets import make_classification
from constrfl.problems.partition import stratified_split
from constrfl.rowspace import BASIS_COLUMNS, basis_core, row_basis
from constrfl.augmented import AugmentedTerm
from constrfl.solvers.subspace import BasisModel
from builders import (WIDE_CLIENTS as CLIENTS, WIDE_DIM as D, WIDE_ROWS as ROWS,
                      entries, resume_after_interrupt, spy_uploads, wide_np)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def test_core_in_the_row_basis_is_the_hessian():
    """(B1): B C(w) Bᵀ equals the party's dense generalized Hessian of its AL term, with
    an active and an inactive constraint, and B is orthonormal."""
    _, p = wide_np()
    party = p.clients[0]
    B, Z = row_basis(party)
    assert B.shape[1] <= ROWS and np.allclose(B.T @ B, np.eye(B.shape[1]), atol=1e-12)
    rng = np.random.default_rng(1)
    w = 0.3 * rng.standard_normal(D)
    for mu in (np.zeros(1), np.array([5.0])):       # inactive (c < 0 at w), active
        beta = 30.0
        term = AugmentedTerm(party, beta, mu, np.zeros(0))
        H = term(w, 2)[2]
        C = basis_core(party, (B, Z), w, beta, mu)
        assert np.allclose(B @ C @ B.T, H, rtol=1e-10, atol=1e-12 * np.abs(H).max())
    assert np.abs(H).max() > 0


def test_no_basis_where_it_does_not_pay():
    """A party with as many independent rows as half the features, or with equality
    constraints, or functions other than row losses, has none (its dense Hessian)."""
    data = make_classification(n_samples=40, n_features=19, seed=0)
    assert row_basis(cf.Client(objective=fn.LogisticLoss(data.X, data.y))) is None
    X = np.random.default_rng(0).standard_normal((5, 40))
    eq = cf.Client(objective=fn.LeastSquares(X, np.ones(5)),
                   equalities=[fn.Affine(np.ones((1, 40)), np.zeros(1))])
    assert row_basis(eq) is None
    custom = cf.Client(objective=fn.Custom(lambda w: w @ w, lambda w: 2 * w, dim=40))
    assert row_basis(custom) is None
    assert row_basis(cf.Client(objective=fn.LeastSquares(X, np.ones(5))))[0].shape == (40, 5)


@pytest.mark.parametrize("d, ranks, dense", [(50, (4, 7, 5), False),    # R < d: (B3)
                                             (12, (4, 7, 5), False),    # R ≥ d: (B2)
                                             (50, (4, 7), True)])       # with H_D: (B2)
def test_model_direction_solves_the_explicit_system(d, ranks, dense):
    rng = np.random.default_rng(2)
    bases, cores = {}, {}
    H = np.zeros((d, d))
    for i, r in enumerate(ranks):
        B = np.linalg.qr(rng.standard_normal((d, r)))[0]
        A = rng.standard_normal((r, r))
        bases[f"p{i}"], cores[f"p{i}"] = B.T, A @ A.T
        H += B @ (A @ A.T) @ B.T
    HD = None
    if dense:
        A = rng.standard_normal((d, 3))
        HD = A @ A.T
        H += HD
    mu, g = 0.05, rng.standard_normal(d)
    expected = -np.linalg.solve(H + mu * np.eye(d), g)
    model = BasisModel()
    for _ in range(2):                                  # the second with the cached QR
        got = model.direction(bases, cores, HD, mu, g)
        assert np.allclose(got, expected, rtol=1e-9, atol=1e-12 * np.abs(expected).max())


@pytest.fixture(scope="module")
def solved():
    data, p = wide_np(server_rows=40)
    states = []
    res = cf.solve(p, tol=1e-6, inner="newton-basis", private=False, callback=states.append)
    return data, p, res, states


def test_matches_cvxpy(solved):
    _, p, res, _ = solved
    assert res.status == "optimal", res.message
    ref = cf.certify(p, res.w, res.multipliers)
    assert ref.reference_status == "optimal"
    assert abs(res.objective - ref.reference_objective) <= 1e-6 * abs(ref.reference_objective)
    assert np.max(np.abs(res.w - ref.reference_w)) <= 1e-4
    assert res.kkt.stationarity <= 1e-6 and res.kkt.feasibility <= 1e-6
    assert cf.kkt(p, res.w, res.multipliers) == res.kkt
    dense = cf.solve(p, tol=1e-6, inner="newton")       # the same steps, dense Hessians
    assert np.max(np.abs(res.w - dense.w)) <= 1e-6
    assert res.rounds <= dense.rounds + -(-ROWS // BASIS_COLUMNS)


def test_certificate_bounds_true_subproblem_stationarity(solved):
    """At the end of each subproblem, dist∞(0, ∇Ψ_k(w)) recomputed from the raw data
    with NumPy is the certificate the server computed, and at most τ_k (the steps are
    those of the inequalities' models (B6) here: a smooth P, convex constraints)."""
    (data, (Xs, ys)), p, res, states = solved
    split = stratified_split(data.y, CLIENTS, seed=0)
    ids = [split == i for i in np.unique(split)]
    lam = 1e-2
    n = sum(1 for rows in ids if (data.y[rows] == 0).any())
    for s in states:
        w, wk, beta = s["w"], s["w_prev"], s["beta"]
        g = (w - wk) / s["eta"] + lam * w          # η: the proximal parameter
        for name, rows in zip([c.name for c in p.clients], ids):
            X, y = data.X[rows], data.y[rows]
            X0, X1 = X[y == 0], X[y == 1]
            g += X0.T @ sigmoid(X0 @ w) / len(X0) / n
            z1 = X1 @ w
            c = np.mean(np.logaddexp(0.0, -z1)) - 0.3
            mu = s["multipliers_prev"][name].ineq[0]
            g += max(mu + beta * c, 0.0) * X1.T @ (sigmoid(z1) - 1.0) / len(z1)
        z1 = Xs[ys == 1] @ w
        c = np.mean(np.logaddexp(0.0, -z1)) - 0.3
        mu = s["multipliers_prev"]["server"].ineq[0]
        g += max(mu + beta * c, 0.0) * Xs[ys == 1].T @ (sigmoid(z1) - 1.0) / len(z1)
        cert = s["certificate"]
        assert np.max(np.abs(g)) <= cert * (1 + 1e-9) + 1e-13, (s["k"], np.max(np.abs(g)), cert)
        assert cert <= s["tau"] or s is states[-1]
    assert len(states) >= 2


def test_traffic_counts_bases_and_cores(monkeypatch):
    """Every float on the wire is counted: the bases (once, ≤ BASIS_COLUMNS rows of d a
    round) and the cores (r(r+1)/2) instead of d(d+1)/2 Hessian entries."""
    from constrfl.messages import wire_bytes
    uploads = spy_uploads(monkeypatch)
    _, p = wide_np()
    res = cf.solve(p, tol=1e-6, inner="newton-basis", private=False)
    assert res.status == "optimal"
    assert res.bytes_up == sum(wire_bytes(r) for _, rs in uploads for r in rs.values())
    sent = [(kind, [entries(r) for r in rs.values()]) for kind, rs in uploads]
    basis_rounds = [f for kind, f in sent if kind == "newton.basis"]
    assert len(basis_rounds) == -(-max(row_basis(c)[0].shape[1] for c in p.clients)
                                  // BASIS_COLUMNS)
    assert max(max(f) for _, f in sent) <= 50 * D               # per party per round
    assert sum(sum(f) for f in basis_rounds) == D * sum(row_basis(c)[0].shape[1]
                                                       for c in p.clients)


def test_a_nonsmooth_regularizer_takes_proximal_newton_steps_in_the_bases():
    """With L1, the server's proximal Newton point of the model (B2) (the iterative
    solve of :mod:`constrfl.solvers.subspace`) gives cvxpy's optimum."""
    _, p = wide_np()
    p.regularizer = prox.L1(0.01)
    res = cf.solve(p, tol=1e-6, inner="newton-basis", private=False)
    assert res.status == "optimal", res.message
    ref = cf.certify(p, res.w, res.multipliers)
    assert ref.reference_status == "optimal"
    assert abs(res.objective - ref.reference_objective) <= 1e-6 * abs(ref.reference_objective)
    assert res.kkt.stationarity <= 1e-6 and cf.kkt(p, res.w, res.multipliers) == res.kkt


def test_max_time_ends_a_long_model_solve(monkeypatch):
    """max_time bounds the server's own work between rounds too: a proximal Newton
    point of the model (B5) that would take minutes (here it never converges, at 10 ms
    an iteration for up to 20,000 iterations) ends the solve at the deadline, status
    time_limit with the last iterate.  It was checked only before each round: NP sparse
    5,000 x 5,000 with L1 and private=False, max_time=120, returned after 231 s."""
    import time
    from constrfl.solvers import modelprox, newton
    _, p = wide_np()
    p.regularizer = prox.L1(0.01)
    metric_prox = modelprox._metric_prox

    def slow(*args):
        time.sleep(0.01)
        return metric_prox(*args)
    monkeypatch.setattr(modelprox, "_metric_prox", slow)
    monkeypatch.setattr(newton, "MODEL_FORCING", 0.0)        # tol 0: it never ends
    start = time.perf_counter()
    res = cf.solve(p, tol=1e-6, inner="newton-basis", private=False, max_time=1.0)
    assert time.perf_counter() - start < 10
    assert res.status == "time_limit" and res.rounds > 0 and np.all(np.isfinite(res.w))


def test_interrupted_in_the_basis_rounds_resumes_bit_for_bit(monkeypatch, tmp_path):
    """A solve interrupted while the bases are still arriving (8 columns a round here),
    saved and loaded, resumes to the uninterrupted solve bit for bit: the bases received
    so far are solver state."""
    from constrfl.solvers import newton
    monkeypatch.setattr(newton, "BASIS_COLUMNS", 8)
    _, p = wide_np()
    full, again = resume_after_interrupt(
        monkeypatch, tmp_path, p, lambda seen: seen.count("newton.basis") == 3,
        inner="newton-basis", private=False)
    assert again.w.tobytes() == full.w.tobytes()
    assert (again.rounds, again.bytes_up, again.bytes_down, again.inner_iterations) == \
        (full.rounds, full.bytes_up, full.bytes_down, full.inner_iterations)
