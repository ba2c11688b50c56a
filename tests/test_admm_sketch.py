"""The ADMM's penalty metrics above METRIC_MAX_DIM from a sketch: the blocks send
(ΣJᵢᵀJᵢ)Ω, k = min(m + 8, d) columns (m: the constraint rows, counted once as a sum),
and the server's Nyström factor is ΣJᵢᵀJᵢ itself up to rounding (its rank is at most
m), so the w-step (18) is the dense metric's: the same rounds and iterates."""
import numpy as np
import pytest

import constrfl as cf
import constrfl.solvers.admm as admm
from constrfl import functions as fn, prox
from constrfl.federation import inprocess
from constrfl.solvers.sketch import nystrom, random_sketch


def wide_np(d=40, n=4, seed=5, regularizer=prox.SquaredL2(0.05)):
    """NP over n clients with d > m + 8 (m = n + 1 constraint rows): a low-rank metric."""
    rng = np.random.default_rng(seed)
    clients = []
    for _ in range(n):
        X = np.c_[rng.standard_normal((40, d - 1)), np.ones(40)]
        y = (X[:, 0] - X[:, 1] + 0.5 * rng.standard_normal(40) > 0).astype(float)
        clients.append(cf.Client(
            objective=(1 / n) * fn.LogisticLoss(X[y == 0], np.zeros(int((y == 0).sum()))),
            constraints=[fn.LogisticLoss(X[y == 1], np.ones(int(y.sum()))) - 0.4]))
    Xs = np.c_[rng.standard_normal((30, d - 1)), np.ones(30)]
    server = cf.Server(constraints=[fn.LogisticLoss(Xs, np.ones(30)) - 0.6])
    return cf.Problem(clients, server=server, regularizer=regularizer)


def test_nystrom_recovers_a_sum_of_low_rank_terms():
    rng = np.random.default_rng(1)
    d = 300
    Js = [rng.standard_normal((r, d)) * s for r, s in [(1, 30.0), (3, 0.2), (0, 1.0), (5, 4.0)]]
    A = sum(J.T @ J for J in Js)
    Omega = random_sketch(d, 9 + 8)
    U, lam = nystrom(sum(J.T @ (J @ Omega) for J in Js), Omega)
    assert len(lam) == 9 and np.allclose(U.T @ U, np.eye(9), atol=1e-12)
    assert np.abs(U @ np.diag(lam) @ U.T - A).max() <= 1e-11 * np.abs(A).max()


def test_a_full_width_sketch_is_exact_too():
    rng = np.random.default_rng(2)
    J = rng.standard_normal((12, 10))               # rank d: k = d columns
    Omega = random_sketch(10, 10)
    U, lam = nystrom(J.T @ (J @ Omega), Omega)
    assert np.abs(U @ np.diag(lam) @ U.T - J.T @ J).max() <= 1e-11 * np.abs(J.T @ J).max()


def sent_fields(monkeypatch):
    """The names of the sums the server receives from the blocks' ``admm.start``."""
    seen = set()
    real = inprocess.InProcessFederation._exchange

    def spy(self, seq, message_type, payloads):
        replies = real(self, seq, message_type, payloads)
        if "admm.start" in message_type:
            for r in replies.values():
                if isinstance(r, dict) and "layout" in r:
                    seen.update(f.split(":")[0] for f in r["layout"].split(";"))
        return replies
    monkeypatch.setattr(inprocess.InProcessFederation, "_exchange", spy)
    return seen


def test_the_sketched_metric_gives_the_dense_metric_s_solve(monkeypatch):
    problem = wide_np()
    dense = cf.solve(problem, inner="admm", tol=1e-6)
    seen = sent_fields(monkeypatch)
    monkeypatch.setattr(admm, "METRIC_MAX_DIM", 10)      # d = 40 is "above" it now
    sketched = cf.solve(problem, inner="admm", tol=1e-6)
    assert {"metric_sketch", "constraint_rows"} <= seen and "metric" not in seen
    assert dense.status == sketched.status == "optimal"
    assert sketched.rounds == dense.rounds
    assert np.abs(sketched.w - dense.w).max() <= 1e-9
    assert cf.certify(problem, sketched).ok


def test_without_the_sketch_the_blocks_keep_scalar_penalties(monkeypatch):
    """A sketch beyond SKETCH_MAX_ENTRIES: no sketch, and no block forms a
    metric the server would not know (the rounds of scalar ρᵢ)."""
    problem = wide_np()
    monkeypatch.setattr(admm, "METRIC_MAX_DIM", 10)
    monkeypatch.setattr(admm, "SKETCH_MAX_ENTRIES", 3 * 40)
    seen = sent_fields(monkeypatch)
    res = cf.solve(problem, inner="admm", tol=1e-6)
    assert "metric_sketch" not in seen and res.status == "optimal"
    assert cf.certify(problem, res).ok


@pytest.mark.parametrize("weights", [False, True], ids=["ridge", "weighted ridge"])
def test_the_sketched_w_step_solves_the_metric_system(weights):
    """(bI + UΛUᵀ)w = r by Woodbury, b a scalar or a diagonal (a weighted ridge)."""
    rng = np.random.default_rng(4)
    d = 50
    J = rng.standard_normal((6, d))
    Omega = random_sketch(d, 14)
    U, lam = nystrom(J.T @ (J @ Omega), Omega)
    lam_ridge = rng.uniform(0.1, 2.0, d) if weights else 0.3
    solver = admm.ADMM(["a"], None, prox.SquaredL2(lam_ridge), (1e-6, 1e-6), max_iter=1,
                       adaptive_rho=False, local_max_iter=1, local_solver="newton", dim=d)
    s = admm.ADMMState(wk=rng.standard_normal(d), tau=1.0, w=np.zeros(d),
                       Rv=rng.standard_normal(d), rho=0.7, metric_basis=U, metric_values=lam)
    w = solver.w_step(s, gamma=0.2)
    b = 0.7 + 0.2 + lam_ridge
    assert np.allclose(b * w + J.T @ (J @ w), s.Rv + 0.2 * s.wk, rtol=0, atol=1e-12)


def test_the_l1_metric_step_is_the_problem_s_minimizer():
    """argmin λ‖w‖₁ + σ/2‖w‖² + ½‖Aᵀw‖² − rᵀw (A = UΛ^½) against cvxpy, and its own
    optimality residual at rounding level."""
    import cvxpy as cp
    rng = np.random.default_rng(0)
    d, k, lam1, sigma = 60, 5, 1.5, 0.7
    U = np.linalg.qr(rng.standard_normal((d, k)))[0]
    lam = rng.uniform(1.0, 100.0, k)
    r = 3.0 * rng.standard_normal(d)
    w = admm.metric_prox_step(prox.L1(lam1), r, sigma, U, lam)
    A = U * np.sqrt(lam)
    x = cp.Variable(d)
    cp.Problem(cp.Minimize(lam1 * cp.norm1(x) + sigma / 2 * cp.sum_squares(x)
                           + 0.5 * cp.sum_squares(A.T @ x) - r @ x)).solve()
    assert 0 < np.count_nonzero(w) < d                        # the kink is exercised
    assert np.abs(w - x.value).max() <= 1e-6
    g = sigma * w + A @ (A.T @ w) - r
    residual = np.where(w != 0, np.abs(g + lam1 * np.sign(w)), np.maximum(np.abs(g) - lam1, 0))
    assert residual.max() <= 1e-12


def test_with_l1_the_sketched_metric_gives_the_dense_metric_s_solve(monkeypatch):
    problem = wide_np(regularizer=prox.L1(0.02))
    dense = cf.solve(problem, inner="admm", tol=1e-6)
    monkeypatch.setattr(admm, "METRIC_MAX_DIM", 10)
    sketched = cf.solve(problem, inner="admm", tol=1e-6)
    assert dense.status == sketched.status == "optimal"
    assert sketched.rounds == dense.rounds
    assert np.abs(sketched.w - dense.w).max() <= 1e-9
    assert np.any(sketched.w == 0) and cf.certify(problem, sketched).ok
