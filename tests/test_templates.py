"""Problem templates (docs/algorithms.md §6–7) and prox.Nuclear: every convex template solves
to tol = 1e-6 with both methods and agrees with cvxpy (relative objective gap ≤ 1e-6);
the nonconvex fairness template (32) solves and refuses certification."""
import numpy as np
import pytest

import constrfl as cf
from constrfl import prox
from constrfl.problems import (fairness, federated_lasso, lcqp, low_rank_matrix,
                               neyman_pearson, norm_ball_logistic)
from constrfl.problems.datasets import make_classification, make_fairness
from constrfl.problems.partition import stratified_split

TOL = 1e-6
METHODS = ("cproxal", "fedproxal")


# -- prox.Nuclear -------------------------------------------------------------------------

def svt(A, k):
    """Singular value soft thresholding, written out: U·diag(max(s − k, 0))·Vᵀ."""
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    return U @ np.diag(np.maximum(s - k, 0.0)) @ Vt


def test_nuclear_value_and_prox_match_a_direct_svd():
    rng = np.random.default_rng(0)
    P = prox.Nuclear(0.7, (3, 5))
    A = rng.standard_normal((3, 5))
    assert P.value(A.ravel()) == pytest.approx(0.7 * np.linalg.svd(A)[1].sum(), rel=1e-14)
    for t in (0.0, 0.5, 2.0):
        np.testing.assert_allclose(P.prox(A.ravel(), t), svt(A, 0.7 * t).ravel(), atol=1e-13)
    Z = P.prox(A.ravel(), 1e3)                       # threshold above every singular value
    assert np.all(Z == 0)
    r = np.linalg.matrix_rank(P.prox(A.ravel(), 1.0).reshape(3, 5), tol=1e-10)
    assert r == int(np.sum(np.linalg.svd(A)[1] > 0.7))


def test_nuclear_cvxpy_form_uses_row_major_order():
    import cvxpy as cp
    rng = np.random.default_rng(1)
    lam, shape = 0.8, (4, 3)                         # non-square: C vs F order differ
    P = prox.Nuclear(lam, shape)
    A = rng.standard_normal(shape)
    w = cp.Variable(12)
    expr, cons = P.cvxpy(w)
    assert cons == []
    w.value = A.ravel()
    assert expr.value == pytest.approx(P.value(A.ravel()), rel=1e-12)
    cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w - A.ravel()) + expr)).solve(
        solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    np.testing.assert_allclose(w.value, P.prox(A.ravel(), 1.0), atol=1e-6)


def test_nuclear_dist_is_the_prox_gradient_residual():
    rng = np.random.default_rng(2)
    a = rng.standard_normal(12)
    sv = np.linalg.svd(a.reshape(3, 4), compute_uv=False)
    P = prox.Nuclear(0.5 * (sv[0] + sv[1]), (3, 4))   # keeps one singular value
    assert P.exact_dist is False
    w = P.prox(a, 1.0)                   # minimizer of ½‖w − a‖² + P(w): stationary
    g = w - a                            # ∇ of ½‖w − a‖² at w
    assert P.dist(w, g) <= 1e-14
    assert np.linalg.matrix_rank(w.reshape(3, 4), tol=1e-10) == 1   # at a kink of ‖·‖_*
    v = w + 0.1 * rng.standard_normal(12)            # not stationary
    assert P.dist(v, v - a) == pytest.approx(np.max(np.abs(v - P.prox(a, 1.0))))
    assert P.dist(v, v - a) > 1e-3


@pytest.mark.parametrize("shape", [(3,), (3, 0), (2, 2.5), "ab", None])
def test_nuclear_rejects_bad_shapes(shape):
    with pytest.raises(ValueError, match="shape"):
        prox.Nuclear(1.0, shape)


def test_nuclear_checks_the_dimension():
    with pytest.raises(ValueError, match="Nuclear: shape"):
        cf.Problem([cf.Client(objective=cf.functions.LeastSquares(np.eye(5), np.ones(5)))],
                   regularizer=prox.Nuclear(1.0, (2, 3)))
    with pytest.raises(ValueError, match="lam"):
        prox.Nuclear(-1.0, (2, 3))


# -- convex templates: both methods, certified ---------------------------------------------

def _classification():
    D = make_classification(n_samples=300, n_features=4, seed=0)
    return D, stratified_split(D.y, 3, seed=0)


def _np_local():
    D, ids = _classification()
    return neyman_pearson(D.X, D.y, ids, max_class1_loss=0.3)


def _np_global():
    D, ids = _classification()
    S = make_classification(n_samples=100, n_features=4, seed=1)
    return neyman_pearson(D.X, D.y, ids, max_class1_loss=0.3, local=False,
                          server_data=(S.X, S.y))


def _ball_on_data(ball):
    D, ids = _classification()
    return norm_ball_logistic(ball=ball, radius=1.0, data=(D.X, D.y, ids))


CONVEX = {
    "lasso": lambda: federated_lasso(),
    "lasso-seed-ratios": lambda: federated_lasso(n_clients=8, n_samples_per_client=8,
                                                 dim=32, sparsity=16, lam=0.01),
    "l1-ball": lambda: norm_ball_logistic(ball="l1", radius=1.0),
    "l2-ball": lambda: norm_ball_logistic(ball="l2", radius=1.0),
    "l1-ball-data": lambda: _ball_on_data("l1"),
    "l2-ball-data": lambda: _ball_on_data("l2"),
    "low-rank": lambda: low_rank_matrix(),
    "low-rank-seed-ratios": lambda: low_rank_matrix(n_clients=8, n_samples_per_client=8,
                                                    shape=(8, 4), rank=2, lam=0.01),
    "neyman-pearson-local": _np_local,
    "neyman-pearson-global": _np_global,
    "lcqp": lambda: lcqp(n_clients=3, dim=10, rows_per_client=1, seed=0),
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", list(CONVEX))
def test_convex_template_solves_and_certifies(name, method):
    prob = CONVEX[name]()
    assert prob.is_convex
    res = cf.solve(prob, method=method, tol=TOL)              # default beta = 100
    assert res.status == "optimal", res.message
    assert res.kkt.meets(TOL, TOL)
    cert = cf.certify(prob, res)
    assert cert.reference_status == "optimal"
    assert cert.objective_gap <= TOL, str(cert)
    assert cert.w_distance <= 1e-4, str(cert)


def test_ball_prox_output_is_in_the_domain():
    """A prox point must count as feasible in ``dist`` (1 ulp outside the ball used to
    give dist = inf and stopped fedproxal with numerical_error on the l1-ball template)."""
    rng = np.random.default_rng(0)
    for P in (prox.L1Ball(1.0), prox.L2Ball(1.0)):
        for _ in range(200):
            w = P.prox(3 * rng.standard_normal(10), 1.0)
            assert np.isfinite(P.dist(w, np.zeros(10))), (P, P._norm(w) - 1.0)



# -- what the synthetic templates build --------------------------------------------------

def _client_data(prob):
    """(X, y, weight) behind each client's objective ``weight·Loss(X, y)``."""
    return [(c.objective.terms[0].X, c.objective.terms[0].y, c.objective.weights[0])
            for c in prob.clients]


def test_lasso_is_the_seed_objective_with_a_sparse_ground_truth():
    prob = federated_lasso(n_clients=3, n_samples_per_client=10, dim=12, sparsity=4,
                           noise=0.0, lam=0.2, seed=3)
    assert prob.w_true.shape == (12,) and np.count_nonzero(prob.w_true) == 4
    assert isinstance(prob.regularizer, prox.L1) and prob.regularizer.lam == 0.2
    assert [len(X) for X, _, _ in _client_data(prob)] == [10, 10, 10]
    w = np.random.default_rng(0).standard_normal(12)
    mse = np.mean([np.mean((X @ w - y) ** 2) for X, y, _ in _client_data(prob)])
    assert prob.objective(w) == pytest.approx(mse + 0.2 * np.abs(w).sum(), rel=1e-13)
    assert prob.objective(prob.w_true) == pytest.approx(0.2 * np.abs(prob.w_true).sum())
    res = cf.solve(prob, method="cproxal", tol=TOL)
    assert res.status == "optimal" and np.any(res.w == 0)   # exact zeros from the prox


def test_low_rank_flattens_row_major_and_has_the_given_rank():
    prob = low_rank_matrix(n_clients=2, n_samples_per_client=15, shape=(4, 3), rank=1,
                           noise=0.0, lam=0.3, seed=4)
    W = prob.w_true.reshape(prob.regularizer.shape)
    assert prob.regularizer.shape == (4, 3) and np.linalg.matrix_rank(W) == 1
    for X, y, weight in _client_data(prob):
        assert weight == 1.0                                   # (2/M)·½ mean, M = 2
        np.testing.assert_allclose([np.sum(x.reshape(4, 3) * W) for x in X], y, atol=1e-12)
    nuc = 0.3 * np.linalg.svd(W)[1].sum()
    assert prob.objective(prob.w_true) == pytest.approx(nuc, rel=1e-13)


def test_norm_ball_logistic_builds_the_constraint_set():
    prob = norm_ball_logistic(n_clients=3, n_samples_per_client=20, dim=5, ball="l2",
                              radius=0.5, seed=1)
    assert isinstance(prob.regularizer, prox.L2Ball) and prob.regularizer.radius == 0.5
    assert prob.w_true.shape == (5,) and prob.n_clients == 3
    assert {w for _, _, w in _client_data(prob)} == {1 / 3}
    D, ids = _classification()
    data_prob = norm_ball_logistic(ball="l1", radius=2.0, data=(D.X, D.y, ids))
    assert data_prob.w_true is None and isinstance(data_prob.regularizer, prox.L1Ball)
    assert data_prob.n_clients == 3 and data_prob.dim == D.X.shape[1]


# -- fairness (32): nonconvex --------------------------------------------------------------

def _fairness_data():
    D = make_fairness(n_samples=300, n_features=4, seed=0)
    S = make_fairness(n_samples=200, n_features=4, seed=1)
    return D, S, stratified_split(D.y, 3, seed=0)


@pytest.fixture(scope="module")
def fair():
    D, S, ids = _fairness_data()
    prob = fairness(D.X, D.y, ids, 0.05, sensitive_features=D.sensitive,
                    server_data=(S.X, S.y, S.sensitive))
    return prob, {m: cf.solve(prob, method=m, tol=TOL) for m in METHODS}


def test_fairness_is_nonconvex_and_certify_says_so(fair):
    prob, results = fair
    assert not prob.is_convex
    assert [p.n_ineq for p in prob.parties] == [2, 2, 2, 2]
    with pytest.raises(ValueError, match="nonconvex"):
        cf.certify(prob, results["cproxal"])


@pytest.mark.parametrize("method", METHODS)
def test_fairness_solves_to_a_feasible_kkt_point(fair, method):
    prob, results = fair
    res = results[method]
    assert res.status == "optimal", res.message
    assert res.kkt.feasibility <= TOL and res.kkt.stationarity <= TOL
    for p in prob.parties:
        assert np.all(p.c_value(res.w) <= TOL)
    # the constraints matter: the global pair binds with a positive multiplier
    assert res.multipliers["server"].ineq.max() > 1e-2
    assert prob.server.c_value(res.w).max() == pytest.approx(0.0, abs=TOL)


def test_fairness_methods_reach_the_same_point(fair):
    _, results = fair
    a, b = results["cproxal"], results["fedproxal"]
    assert abs(a.objective - b.objective) <= TOL * abs(a.objective)
    assert np.max(np.abs(a.w - b.w)) <= 1e-4


def test_fairness_disparity_constraints_are_the_group_loss_differences(fair):
    prob, results = fair
    _, S, _ = _fairness_data()
    w = results["cproxal"].w
    L = cf.functions.LogisticLoss
    La = L(S.X[S.sensitive == 0], S.y[S.sensitive == 0]).value(w)
    Lb = L(S.X[S.sensitive == 1], S.y[S.sensitive == 1]).value(w)
    np.testing.assert_allclose(prob.server.c_value(w), [La - Lb - 0.05, Lb - La - 0.05],
                               atol=1e-14)


def test_fairness_skips_a_client_without_one_subgroup():
    D, _, ids = _fairness_data()
    ids = ids.copy()
    ids[(ids == 1) & (D.sensitive == 1)] = 0          # client 1: only subgroup a left
    prob = fairness(D.X, D.y, ids, max_disparity=0.05, sensitive_features=D.sensitive)
    assert [c.n_ineq for c in prob.clients] == [2, 0, 2]
    assert prob.server.is_empty
    res = cf.solve(prob, method="fedproxal", tol=TOL)
    assert res.status == "optimal", res.message
    no_local = fairness(D.X, D.y, ids, sensitive_features=D.sensitive, local=False)
    assert [c.n_ineq for c in no_local.clients] == [0, 0, 0]


# -- input validation ------------------------------------------------------------------------

def _bad_fairness(**kw):
    D, S, ids = _fairness_data()
    args = dict(X=D.X, y=D.y, sensitive_features=D.sensitive, client_ids=ids)
    args.update(kw)
    return fairness(**args)


BAD = [
    (federated_lasso, dict(n_clients=0), "n_clients"),
    (federated_lasso, dict(n_samples_per_client=2.5), "n_samples_per_client"),
    (federated_lasso, dict(dim=-1), "dim"),
    (federated_lasso, dict(sparsity=21), "sparsity"),
    (federated_lasso, dict(noise=-0.1), "noise"),
    (federated_lasso, dict(lam=np.nan), "lam"),
    (federated_lasso, dict(seed=-1), "seed"),
    (low_rank_matrix, dict(shape=(4,)), "shape"),
    (low_rank_matrix, dict(shape=(4, 0)), "shape"),
    (low_rank_matrix, dict(rank=5), "rank"),
    (low_rank_matrix, dict(lam=-1.0), "lam"),
    (low_rank_matrix, dict(n_samples_per_client=0), "n_samples_per_client"),
    (norm_ball_logistic, dict(ball="linf"), "ball"),
    (norm_ball_logistic, dict(radius=0.0), "radius"),
    (norm_ball_logistic, dict(dim=0), "dim"),
    (norm_ball_logistic, dict(data=(np.ones((3, 2)), [0, 1, 1])), "data"),
    (norm_ball_logistic, dict(data=(np.ones((3, 2)), [0, 1, 2], [0, 0, 1])), "y"),
    (_bad_fairness, dict(max_disparity=0.0), "max_disparity"),
    (_bad_fairness, dict(max_disparity=np.inf), "max_disparity"),
    (_bad_fairness, dict(y=np.zeros(5)), "y"),
    (_bad_fairness, dict(sensitive_features=np.full(300, 2)), "sensitive"),
    (_bad_fairness, dict(client_ids=np.zeros(7)), "client_ids"),
    (_bad_fairness, dict(X=np.ones(300)), "X"),
    (_bad_fairness, dict(server_data=(np.ones((4, 5)), np.ones(4))), "server_data"),
    (_bad_fairness, dict(server_data=(np.ones((4, 5)), [0, 1, 0, 1], np.zeros(4))),
     "server_data"),
]


@pytest.mark.parametrize("template, kwargs, argument", BAD,
                         ids=[f"{t.__name__}-{a}-{i}" for i, (t, _, a) in enumerate(BAD)])
def test_templates_validate_their_inputs(template, kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        template(**kwargs)


# -- labels: {0, 1} only, no row dropped -----------------------------------------------------

def _np_rows():
    D = make_classification(n_samples=40, n_features=3, seed=0)
    return D.X, D.y.astype(float), np.arange(40) % 4


def test_neyman_pearson_uses_every_row():
    X, y, ids = _np_rows()
    prob = neyman_pearson(X, y, ids, 0.5)
    assert sum(p.n_samples for p in prob.clients) == 40


@pytest.mark.parametrize("bad", [2.0, -1.0, np.nan, 0.5])
def test_neyman_pearson_refuses_labels_outside_0_1_naming_client_and_count(bad):
    X, y, ids = _np_rows()
    y[[1, 5, 9, 2]] = bad                    # rows 1, 5, 9 belong to client 1; row 2 to 2
    with pytest.raises(ValueError, match=r"neyman_pearson: y must hold labels in \{0, 1\}"
                                         r".*client 1: 3 of 10 rows; client 2: 1 of 10 rows"):
        neyman_pearson(X, y, ids, 0.5)


def test_string_labels_are_refused_not_dropped():
    X, y, ids = _np_rows()
    with pytest.raises(ValueError, match="client 0: 10 of 10 rows"):
        neyman_pearson(X, np.where(y == 1, "pos", "neg"), ids, 0.5)


def test_bad_labels_on_server_and_in_fairness_are_named():
    X, y, ids = _np_rows()
    ys = y.copy()
    ys[0] = 3
    with pytest.raises(ValueError, match=r"server_data: y .*server_data: 1 of 40 rows"):
        neyman_pearson(X, y, ids, 0.5, server_data=(X, ys))
    D, _, fids = _fairness_data()
    s = D.sensitive.astype(float)
    s[fids == 2] = np.nan
    with pytest.raises(ValueError, match=r"fairness: sensitive .*client 2: 100 of 100 rows"):
        fairness(D.X, D.y, fids, sensitive_features=s)
    with pytest.raises(ValueError, match=r"norm_ball_logistic: data: y .*client 0: 1 of"):
        norm_ball_logistic(data=(X, np.r_[7.0, y[1:]], ids))


def test_data_templates_share_one_argument_order():
    """``(X, y, client_ids, <bound>, *, ...)``; an old-order fairness call (sensitive
    third) fails loudly instead of using client_ids as the bound."""
    import inspect
    for template, bound in ((neyman_pearson, "max_class1_loss"), (fairness, "max_disparity")):
        params = list(inspect.signature(template).parameters.values())
        assert [p.name for p in params[:4]] == ["X", "y", "client_ids", bound]
        assert all(p.kind == p.POSITIONAL_OR_KEYWORD for p in params[:4])
        assert all(p.kind == p.KEYWORD_ONLY for p in params[4:])
    D, _, ids = _fairness_data()
    with pytest.raises(TypeError, match="fairness: max_disparity must be a real number"):
        fairness(D.X, D.y, D.sensitive, ids, sensitive_features=D.sensitive)
    with pytest.raises(TypeError, match="sensitive"):
        fairness(D.X, D.y, ids, 0.1)


def test_lcqp_attaches_its_solution_as_w_true():
    """w_true from the KKT linear solve agrees with cvxpy's solution of the pooled
    problem and is a KKT point (multipliers estimated by cf.kkt)."""
    for kw in (dict(n_clients=3, dim=10, rows_per_client=1), dict(n_clients=2, dim=6,
                                                                    rows_per_client=0)):
        prob = lcqp(seed=1, **kw)
        cert = cf.certify(prob, prob.w_true)
        assert cert.reference_status == "optimal"
        np.testing.assert_allclose(prob.w_true, cert.reference_w, atol=1e-7)
        assert cert.kkt.stationarity <= 1e-10 and cert.kkt.feasibility <= 1e-12
        assert cert.ok
