"""``inner="newton-basis"`` for parties of sparse rows: the Hessian as its sparse entries
on a pattern sent once plus the rows √β∇c of the active constraints (B4); the server's
model (B5): conjugate gradients for a smooth P, the accelerated proximal gradient method
with semismooth Newton steps for a nonsmooth one.

Oracles: the party's dense generalized Hessian from the fused kernel (B4), NumPy dense
solves of the explicit model (B5), proxstep's exact proximal Newton point,
cvxpy/Clarabel on the pooled problem, and the subproblem stationarity recomputed from
the raw data with NumPy."""
import numpy as np
import pytest
import scipy.sparse as sp

import constrfl as cf
from constrfl import prox
from constrfl.problem import ServerSide
from constrfl.kernels import CSR
from constrfl.rowspace import SparseGram, gram_values, hessian_form, sparse_gram
from constrfl.augmented import AugmentedTerm
from constrfl.solvers.proxstep import prox_newton_point
from constrfl.solvers.subspace import BasisModel, Triangles
from builders import entries, resume_after_interrupt, sparse_np, spy_uploads, wide_np

DIM = 400


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def symmetric(gram, values):
    """The dense symmetric matrix of upper-triangle values on ``gram``'s pattern."""
    d = gram.indptr.size - 1
    U = sp.csr_matrix((values, gram.indices, gram.indptr), shape=(d, d)).toarray()
    return U + U.T - np.diag(np.diag(U))


def test_sparse_entries_and_constraint_rows_are_the_hessian():
    """(B4): S(w) + LᵀL equals the party's dense generalized Hessian of its AL term,
    with its constraint active (L has a row) and inactive (none)."""
    _, p = sparse_np(prox.SquaredL2(1e-2))
    party = p.clients[0]
    gram = hessian_form(party)
    assert isinstance(gram, SparseGram)
    assert gram.indices.size < DIM * DIM / 20                # sparse, not a dense triangle
    rng = np.random.default_rng(1)
    rows = set()
    for beta, mu, scale, intercept in [(10.0, 0.0, 0.0, 0.0), (100.0, 5.0, 0.3, 0.0),
                                       (1e3, 0.0, 0.1, 6.0)]:    # the last: c < 0
        w = scale * rng.standard_normal(DIM)
        w[-1] += intercept
        values, L = gram_values(party, gram, w, beta, np.array([mu]))
        expected = AugmentedTerm(party, beta, np.array([mu]), np.zeros(0))(w, 2)[2]
        got = symmetric(gram, values) + L.T @ L
        assert np.allclose(got, expected, rtol=1e-12, atol=1e-14 * np.abs(expected).max())
        rows.add(L.shape[0])
    assert rows == {0, 1}


def test_dense_rows_keep_the_row_basis():
    _, p = wide_np()
    form = hessian_form(p.clients[0])
    assert isinstance(form, tuple) and form[0].shape[1] < form[0].shape[0]


def random_model(rng, d=60, beta=1e3):
    """A (B5) model of two sparse parties, one with a row basis and a dense part; the
    explicit matrix too."""
    bases, cores, H = {}, {}, np.zeros((d, d))
    for i in range(2):
        X = sp.random(30, d, density=0.1, random_state=rng, format="csr")
        gram = sparse_gram(CSR.from_scipy(X))
        weights = rng.uniform(0.0, 0.25, 30)
        L = np.sqrt(beta) * rng.standard_normal((1, d)) / d
        bases[f"s{i}"] = gram.pattern()
        cores[f"s{i}"] = {"gram": gram.weights @ weights, "lowrank": L.ravel()}
        H += X.T @ (weights[:, None] * X.toarray()) + L.T @ L
    B = np.linalg.qr(rng.standard_normal((d, 5)))[0]
    A = rng.standard_normal((5, 5))
    bases["b"], cores["b"] = B.T, A @ A.T
    H += B @ (A @ A.T) @ B.T
    A = rng.standard_normal((d, 2))
    return bases, cores, A @ A.T, H + A @ A.T


def test_model_direction_with_sparse_parties_solves_the_explicit_system():
    rng = np.random.default_rng(3)
    bases, cores, HD, H = random_model(rng)
    mu, g = 0.05, rng.standard_normal(H.shape[0])
    expected = -np.linalg.solve(H + mu * np.eye(H.shape[0]), g)
    got = BasisModel().direction(bases, cores, HD, mu, g)
    assert np.allclose(got, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())


def test_model_operator_is_the_explicit_matrix():
    """(B5) as the server keeps it (each sparse party's upper triangle, not summed):
    its products, diagonal and a working set's principal submatrix are those of the
    explicit matrix built from the rows."""
    rng = np.random.default_rng(5)
    bases, cores, HD, H = random_model(rng)
    d, mu = H.shape[0], 0.05
    Hmu = H + mu * np.eye(d)
    op = BasisModel().operator(bases, cores, HD, mu, d)
    v = rng.standard_normal(d)
    scale = np.abs(Hmu).max() * np.abs(v).sum()
    assert np.max(np.abs(op(v) - Hmu @ v)) <= 1e-13 * scale
    assert np.max(np.abs(op.diagonal() - np.diag(Hmu))) <= 1e-13 * np.abs(Hmu).max()
    for share in (0.4, 0.8):              # formed at once; a view, formed after some products
        keep = rng.uniform(size=d) < share
        sub = op.restricted(keep)
        assert (sub.S.embed is None) == (2 * keep.sum() <= d)
        for _ in range(Triangles.FORM_AFTER + 2):
            u = rng.standard_normal(keep.sum())
            assert np.max(np.abs(sub(u) - Hmu[np.ix_(keep, keep)] @ u)) <= 1e-13 * scale
        assert sub.S.embed is None
        assert np.max(np.abs(sub.diagonal() - np.diag(Hmu)[keep])) <= 1e-13 * np.abs(Hmu).max()
        inner = rng.uniform(size=keep.sum()) < 0.7            # a working set's free set
        for parent in (op.restricted(keep), sub):             # of a view, of a formed one
            subsub = parent.restricted(inner)
            u = rng.standard_normal(inner.sum())
            explicit = Hmu[np.ix_(keep, keep)][np.ix_(inner, inner)]
            assert np.max(np.abs(subsub(u) - explicit @ u)) <= 1e-13 * scale


def test_model_solve_is_the_explicit_solve():
    """(H + diag q)⁻¹b by the Woodbury-preconditioned conjugate gradients, on the whole
    model and on a principal submatrix, against NumPy's dense solve."""
    rng = np.random.default_rng(6)
    bases, cores, HD, H = random_model(rng)
    d, mu = H.shape[0], 0.05
    op = BasisModel().operator(bases, cores, HD, mu, d)
    for keep in (np.ones(d, dtype=bool), rng.uniform(size=d) < 0.6):
        A = (H + mu * np.eye(d))[np.ix_(keep, keep)]
        q = rng.uniform(0.0, 1.0, keep.sum())
        b = rng.standard_normal(keep.sum())
        expected = np.linalg.solve(A + np.diag(q), b)
        got = op.restricted(keep).solve(b, 1e-12, shift=q)
        assert np.max(np.abs(got - expected)) <= 1e-9 * np.abs(expected).max()


def test_preconditioner_inverts_the_diagonal_and_the_constraint_rows():
    """M⁻¹ of ModelHessian.solve is (D + diag q + LᵀL)⁻¹, D the diagonal of all but LᵀL
    (Woodbury), against NumPy's solve of the explicit matrix."""
    rng = np.random.default_rng(7)
    bases, cores, HD, H = random_model(rng, beta=1e6)
    d, mu = H.shape[0], 0.05
    op = BasisModel().operator(bases, cores, HD, mu, d)
    q = rng.uniform(0.0, 1.0, d)
    M = np.diag(np.diag(H + mu * np.eye(d) - op.L.T @ op.L) + q) + op.L.T @ op.L
    v = rng.standard_normal(d)
    expected = np.linalg.solve(M, v)
    got = op.preconditioner(q)(v)
    assert np.max(np.abs(got - expected)) <= 1e-10 * np.abs(expected).max()


@pytest.mark.parametrize("P", [prox.L1(0.05), prox.ElasticNet(0.05, 0.1),
                               prox.Box(-0.2, 0.3)])
def test_model_prox_point_is_the_exact_proximal_newton_point(P):
    """(B5) with a nonsmooth P: the server's iterative solve lands on proxstep's exact
    point of the explicit model, and its residual meets the tolerance it was given."""
    rng = np.random.default_rng(4)
    bases, cores, HD, H = random_model(rng)
    mu = 0.01
    d = H.shape[0]
    x, g = 0.1 * rng.standard_normal(d), rng.standard_normal(d)
    Hmu = H + mu * np.eye(d)
    z = prox_newton_point(x, g, BasisModel().operator(bases, cores, HD, mu, d), P, 1e-10)
    assert P.dist(z, g + Hmu @ (z - x)) <= 1e-10
    exact = prox_newton_point(x, g, Hmu, P, 1e-13)
    assert np.max(np.abs(z - exact)) <= 1e-8


@pytest.fixture(scope="module", params=["ridge", "l1"])
def solved(request):
    regularizer = prox.SquaredL2(1e-2) if request.param == "ridge" else prox.L1(1e-3)
    data, p = sparse_np(regularizer, server_rows=40)
    states = []
    res = cf.solve(p, tol=1e-6, inner="newton-basis", private=False, callback=states.append)
    return request.param, data, p, res, states


def test_matches_cvxpy(solved):
    kind, _, p, res, _ = solved
    assert res.status == "optimal", res.message
    ref = cf.certify(p, res.w, res.multipliers)
    assert ref.reference_status == "optimal"
    assert abs(res.objective - ref.reference_objective) <= 1e-6 * abs(ref.reference_objective)
    if kind == "ridge":                                 # L1 at d > n: w* need not be unique
        assert np.max(np.abs(res.w - ref.reference_w)) <= 1e-4
    assert res.kkt.stationarity <= 1e-6 and res.kkt.feasibility <= 1e-6
    assert cf.kkt(p, res.w, res.multipliers) == res.kkt


def test_certificate_bounds_true_subproblem_stationarity(solved):
    """At the end of each subproblem, dist∞(0, ∂Ψ_k(w)) recomputed from the raw data
    with NumPy is at most the certificate the server computed (to rounding), which is
    at most τ_k."""
    kind, (X, y, ids, (Xs, ys)), p, res, states = solved
    X, Xs = X.toarray(), Xs.toarray()
    n = sum(1 for i in np.unique(ids) if (y[ids == i] == 0).any())
    parts = [(X[ids == i], y[ids == i], c.name) for i, c in zip(np.unique(ids), p.clients)]
    for s in states:
        w, wk, beta = s["w"], s["w_prev"], s["beta"]
        terms = [(w - wk) / s["eta"], (1e-2 * w if kind == "ridge" else 0.0 * w)]
        sizes = [np.abs(t) for t in terms]          # what the sums' rounding scales with
        for Xi, yi, name in parts + [(Xs, ys, "server")]:
            if name != "server":
                X0 = Xi[yi == 0]
                terms.append(X0.T @ sigmoid(X0 @ w) / len(X0) / n)
                sizes.append(np.abs(X0).T @ sigmoid(X0 @ w) / len(X0) / n)
            X1 = Xi[yi == 1]
            z1 = X1 @ w
            losses = np.logaddexp(0.0, -z1)
            c = np.mean(losses) - 0.3
            mu = s["multipliers_prev"][name].ineq[0]
            grad_c = X1.T @ (sigmoid(z1) - 1.0) / len(z1)
            terms.append(max(mu + beta * c, 0.0) * grad_c)
            # μ + βc carries β times the rounding of c
            p_size = abs(mu) + beta * (np.mean(losses) + 0.3)
            sizes.append(p_size * np.abs(X1).T @ np.abs(sigmoid(z1) - 1.0) / len(z1))
        g = sum(terms)
        rounding = 8 * np.finfo(float).eps * np.max(sum(sizes))
        true = (np.max(np.abs(g)) if kind == "ridge"
                else prox.L1(1e-3).dist(w, g))
        cert = s["certificate"]
        assert true <= cert + rounding, (s["k"], true, cert, rounding)
        assert cert <= s["tau"] or s is states[-1]
    assert len(states) >= 2


def test_traffic_counts_the_pattern_and_the_entries(monkeypatch):
    """Every float on the wire is counted: each party's pattern once (one round), then
    its entries and constraint rows, at most 50·d floats up a party a round."""
    from constrfl.messages import wire_bytes
    uploads = spy_uploads(monkeypatch)
    _, p = sparse_np(prox.L1(1e-3))
    res = cf.solve(p, tol=1e-6, inner="newton-basis", private=False)
    assert res.status == "optimal"
    assert res.bytes_up == sum(wire_bytes(r) for _, rs in uploads for r in rs.values())
    sent = [(kind, {n: entries(r) for n, r in rs.items()}) for kind, rs in uploads]
    patterns = [f for kind, f in sent if kind == "newton.basis"]
    assert len(patterns) == 1
    grams = {c.name: hessian_form(c) for c in p.clients}
    assert patterns[0] == {n: DIM + 1 + g.indices.size for n, g in grams.items()}
    assert max(max(f.values()) for _, f in sent) <= 50 * DIM


def test_interrupted_after_the_pattern_round_resumes_bit_for_bit(monkeypatch, tmp_path):
    """The patterns and the last entries received are solver state: a solve interrupted
    after the pattern round, saved and loaded, resumes to the uninterrupted solve bit
    for bit."""
    _, p = sparse_np(prox.L1(1e-3))
    full, again = resume_after_interrupt(
        monkeypatch, tmp_path, p,
        lambda seen: len(seen) > 2 and seen[-2] == "newton.basis", inner="newton-basis", private=False)
    assert again.w.tobytes() == full.w.tobytes()
    assert (again.rounds, again.bytes_up, again.inner_iterations) == \
        (full.rounds, full.bytes_up, full.inner_iterations)


def test_auto_picks_the_compact_hessians_it_can_see():
    """inner="auto" above d = 500: newton-basis where every party has a compact Hessian
    (sparse rows here; a client of 30 dense rows at d = 120 too, but d ≤ 500 keeps
    "newton"); Newton-CG where a party has more rows than d/2."""
    from constrfl.rowspace import compact_size
    from constrfl.settings import settings_for
    _, sparse = sparse_np(prox.L1(1e-3), dim=600)
    assert all(compact_size(c) is not None for c in sparse.clients)
    assert settings_for("fedproxal", {"private": False}, sparse).inner == "newton-basis"
    assert settings_for("fedproxal", {}, sparse).inner != "newton-basis"   # sums only
    X = np.random.default_rng(0).standard_normal((2 * 400, 600))
    y = (X[:, 0] > 0).astype(int)
    dense = cf.problems.neyman_pearson(X, y, np.repeat([0, 1], 400), 0.3,
                                       regularizer=prox.SquaredL2(1e-2))
    assert compact_size(dense.clients[0]) is None            # 400 rows > d/2
    assert settings_for("fedproxal", {"private": False}, dense).inner == "newton-cg"
    assert settings_for("fedproxal", {"private": False}, ServerSide(600, ["a", "b"])
                        ).inner == "newton-cg"                # the server cannot see rows
