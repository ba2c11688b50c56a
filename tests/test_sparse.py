"""scipy.sparse input end to end: the losses, the templates, cvxpy forms, solves.

The oracle for "same function" is the dense twin of the same data: the kernels'
CSR path adds the same nonzero terms in the same order as their dense path, so values,
gradients and Hessians must agree to 1e-12 (they are in fact bit-identical), and so
must whole solves that only see those outputs.  The solves are also certified against
cvxpy, whose forms take the sparse X directly."""
import numpy as np
import pytest
import scipy.sparse as sp

import constrfl as cf
from constrfl import functions as fn
from constrfl import kernels, prox
from constrfl.problems import fairness, neyman_pearson, norm_ball_logistic

FORMATS = ("csr", "csc", "coo", "lil")


def one_hot_data(n=300, seed=0):
    """Rows like one-hot encoded categorical data: three attributes with 4 levels each
    (the first level dropped, so with the intercept column X has full column rank),
    a half-empty numeric column and the intercept; labels from a logistic model,
    client ids for three clients."""
    rng = np.random.default_rng(seed)
    blocks = [np.eye(4)[rng.integers(0, 4, n)][:, 1:] for _ in range(3)]
    num = rng.standard_normal(n) * (rng.random(n) < 0.5)
    X = np.column_stack(blocks + [num, np.ones(n)])
    w = rng.standard_normal(X.shape[1])
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ w))).astype(float)
    return X, y, np.arange(n) % 3


def relerr(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("cls", [fn.LogisticLoss, fn.LeastSquares])
def test_sparse_loss_equals_dense_twin(cls, fmt):
    X, y, _ = one_hot_data()
    s = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    dense = cls(X, y, sample_weight=s)
    sparse = cls(sp.coo_array(X).asformat(fmt), y, sample_weight=s)
    assert sp.issparse(sparse.X) and sparse.X.format == "csr"
    assert isinstance(sparse._Xk, kernels.CSR)
    assert sparse._Xk.data.size == np.count_nonzero(X)      # the nonzeros, not densified
    w = np.random.default_rng(2).standard_normal(X.shape[1])
    assert relerr(sparse.value(w), dense.value(w)) <= 1e-12
    assert relerr(sparse.grad(w), dense.grad(w)) <= 1e-12
    assert relerr(sparse.hess(w), dense.hess(w)) <= 1e-12
    assert relerr(sparse.value_grad(w)[1], dense.value_grad(w)[1]) <= 1e-12
    g_s = sparse.minibatch_grad(w, np.random.default_rng(3), 40)
    g_d = dense.minibatch_grad(w, np.random.default_rng(3), 40)
    assert relerr(g_s, g_d) <= 1e-12


@pytest.mark.parametrize("cls", [fn.LogisticLoss, fn.LeastSquares])
def test_sparse_cvxpy_form_takes_the_sparse_matrix(cls):
    import cvxpy as cp
    X, y, _ = one_hot_data()
    f = cls(sp.csr_matrix(X), y)
    w = np.random.default_rng(4).standard_normal(X.shape[1])
    var = cp.Variable(X.shape[1])
    var.value = w
    assert float(f.cvxpy(var).value) == pytest.approx(f.value(w), rel=1e-12)


def test_sparse_matrix_too_large_to_densify():
    """2·10⁵ × 10⁵ with 10⁴ nonzeros: a dense copy would need 160 GB, so value and
    gradient can only come from the CSR.  Reference: the sums written out."""
    rng = np.random.default_rng(5)
    n, d, nnz = 200_000, 100_000, 10_000
    rows, cols = rng.integers(0, n, nnz), rng.integers(0, d, nnz)
    X = sp.csr_array((np.ones(nnz), (rows, cols)), shape=(n, d))
    y = (rng.random(n) < 0.5).astype(float)
    w = rng.standard_normal(d)
    f = fn.LogisticLoss(X, y)
    z = X @ w
    assert f.value(w) == pytest.approx(np.mean(np.logaddexp(0, z) - y * z), rel=1e-12)
    r = 1 / (1 + np.exp(-z)) - y
    np.testing.assert_allclose(f.grad(w), X.T @ r / n, rtol=1e-10, atol=1e-15)


def test_nonfinite_sparse_data_is_located():
    X = sp.lil_array((6, 4))
    X[1, 2], X[4, 3] = 1.0, np.nan
    with pytest.raises(ValueError, match=r"client 'c': objective: .*X contains NaN or inf "
                                         r"\(first at index \(4, 3\)\)"):
        cf.Client(objective=fn.LeastSquares(X, np.ones(6)), name="c")


# -- templates ------------------------------------------------------------------------------

def test_neyman_pearson_sparse_solves_like_dense_and_certifies():
    X, y, ids = one_hot_data()
    dense = neyman_pearson(X, y, ids, 0.5, regularizer=prox.L1(0.01))
    sparse = neyman_pearson(sp.csr_matrix(X), y, ids, 0.5, regularizer=prox.L1(0.01))
    for c, twin in zip(sparse.clients, dense.clients):
        assert sp.issparse(c.objective.terms[0].X)
        assert twin.objective.terms[0]._Xk is twin.objective.terms[0].X   # dense path
    for method in ("cproxal", "fedproxal"):
        a = cf.solve(dense, method=method, tol=1e-6)
        b = cf.solve(sparse, method=method, tol=1e-6)
        assert a.status == b.status == "optimal", (a.message, b.message)
        # same kernel outputs (bit-identical CSR/dense paths), so the same iterates
        # (measured: bit-identical w, same rounds)
        assert np.max(np.abs(a.w - b.w)) <= 1e-12 and a.rounds == b.rounds
    cert = cf.certify(sparse, b)
    assert cert.reference_status == "optimal"
    assert cert.objective_gap <= 1e-6 and cert.w_distance <= 1e-4, str(cert)
    assert max(p.n_ineq for p in sparse.parties) == 1


def test_neyman_pearson_sparse_server_data():
    X, y, ids = one_hot_data()
    Xs, ys, _ = one_hot_data(120, seed=1)
    a = neyman_pearson(X, y, ids, 0.6, local=False, server_data=(Xs, ys))
    b = neyman_pearson(X, y, ids, 0.6, local=False, server_data=(sp.csc_matrix(Xs), ys))
    w = np.random.default_rng(6).standard_normal(X.shape[1])
    assert sp.issparse(b.server.constraints[0].terms[0].X)
    assert relerr(b.server.c_value_jac(w)[1], a.server.c_value_jac(w)[1]) <= 1e-12


def test_fairness_sparse_parties_evaluate_like_dense():
    X, y, ids = one_hot_data()
    s = (np.random.default_rng(7).random(len(y)) < 0.4).astype(int)
    a = fairness(X, y, ids, 0.05, sensitive_features=s, server_data=(X[:90], y[:90], s[:90]))
    b = fairness(sp.csr_array(X), y, ids, 0.05, sensitive_features=s,
                 server_data=(sp.csr_array(X[:90]), y[:90], s[:90]))
    w = np.random.default_rng(8).standard_normal(X.shape[1])
    for pa, pb in zip(a.parties, b.parties):
        va, ga = pa.f_value_grad(w)
        vb, gb = pb.f_value_grad(w)
        assert relerr(vb, va) <= 1e-12 and relerr(gb, ga) <= 1e-12
        ca, Ja = pa.c_value_jac(w)
        cb, Jb = pb.c_value_jac(w)
        assert np.max(np.abs(ca - cb), initial=0) <= 1e-12 and relerr(Jb, Ja) <= 1e-12


def test_norm_ball_logistic_on_sparse_data_certifies():
    X, y, ids = one_hot_data()
    prob = norm_ball_logistic(ball="l2", radius=1.0, data=(sp.csr_array(X), y, ids))
    res = cf.solve(prob, method="cproxal", tol=1e-6)
    assert res.status == "optimal", res.message
    cert = cf.certify(prob, res)
    assert cert.objective_gap <= 1e-6, str(cert)


def test_minibatch_baseline_on_sparse_data_runs_like_dense():
    """FedAvg with minibatches draws rows through minibatch_grad: same draws, same
    kernel sums, so the same model on the sparse twin."""
    X, y, ids = one_hot_data()
    runs = [cf.solve(norm_ball_logistic(ball="l2", radius=1.0, data=(XX, y, ids)),
                     method="fedavg", rounds=30, batch_size=16, seed=0)
            for XX in (X, sp.csr_array(X))]
    assert np.max(np.abs(runs[0].w - runs[1].w)) <= 1e-12
    assert np.all(np.isfinite(runs[1].w))
