"""Real-data splits that once broke a solve (issue 19): the adult data dealt to 50 clients
by a label-skewed Dirichlet split, where two clients hold one row of each class."""
import numpy as np
import pytest

import constrfl as cf
from constrfl import problems
from constrfl.problems.datasets import load_adult
from constrfl.problems.partition import dirichlet_split

from conftest import dataset_dir

TOL, R, K = 1e-6, 0.2, 50


@pytest.fixture(scope="module")
def adult_split():
    """adult (train) over 50 clients, ``dirichlet_split(alpha=0.3, seed=11)`` with one row
    of each class guaranteed (the least that lets every client have a constraint)."""
    D = load_adult(dataset_dir("adult"))
    return D.X, D.y, dirichlet_split(D.y, K, alpha=0.3, seed=11, min_per_class=1)


def mean_logistic(X, label, w):
    """(31) written out: the mean of log(1 + e^z) − label·z over the rows, z = Xw, and
    its gradient Xᵀ(σ(z) − label)/n."""
    z = X @ w
    sigma = 0.5 * (1.0 + np.tanh(z / 2.0))
    return np.mean(np.logaddexp(0.0, z) - label * z), X.T @ (sigma - label) / len(z)


def np_kkt(X, y, ids, w, mu):
    """Definition 1's residuals of (30) at (w, μ), from the data alone: stationarity
    ‖Σᵢ (1/K)∇L(w; Dᵢ⁰) + μᵢ∇L(w; Dᵢ¹)‖∞ and max over clients of |cᵢ| where μᵢ > 0,
    [cᵢ]₊ where μᵢ = 0 (cᵢ = L(w; Dᵢ¹) − r)."""
    g, def1 = np.zeros(X.shape[1]), 0.0
    for i, m in zip(range(K), mu):
        f0, g0 = mean_logistic(X[(ids == i) & (y == 0)], 0.0, w)
        c, g1 = mean_logistic(X[(ids == i) & (y == 1)], 1.0, w)
        c -= R
        g += g0 / K + m * g1
        def1 = max(def1, abs(c) if m > 0 else max(c, 0.0))
    return np.max(np.abs(g)), def1


def test_the_split_holds_equal_class_blocks_of_a_dense_x_held_as_csr(adult_split):
    """The case that crashed: a client whose class-0 and class-1 rows have one shape, in a
    dense X sparse enough that its row losses hold it as CSR."""
    X, y, ids = adult_split
    n0, n1 = (np.bincount(ids[y == c], minlength=K) for c in (0, 1))
    assert isinstance(X, np.ndarray) and np.any(n0 == n1)
    problem = problems.neyman_pearson(X, y, ids, R)
    for i in np.flatnonzero(n0 == n1):
        client = problem.clients[i]
        losses = [client.objective.terms[0], client.constraints[0].terms[0]]
        assert [f.X.shape for f in losses] == [(n0[i], X.shape[1])] * 2
        assert all(isinstance(f._Xk, cf.kernels.CSR) for f in losses)
        assert client.stacked is not None


def test_adult_50_client_dirichlet_split_solves(adult_split):
    """The Neyman-Pearson solve ends optimal (it ended client_error at round 0), and the
    point meets Definition 1 by the data alone with the multipliers it reports."""
    X, y, ids = adult_split
    res = cf.solve(problems.neyman_pearson(X, y, ids, R), tol=TOL, max_time=60)
    assert res.status == "optimal", res.message
    mu = [res.multipliers[f"client-{i}"].ineq[0] for i in range(K)]
    stationarity, def1 = np_kkt(X, y, ids, res.w, mu)
    assert stationarity <= TOL and def1 <= TOL, (stationarity, def1)
