"""The ADMM stop rule (23) bounds the true subproblem stationarity.

At the exit of every ADMM call, dist∞(0, ∂Ψ_k(w^{k+1})) — computed here from the raw
data with NumPy, independently of the package — is at most the certificate ‖Σᵢ eᵢ‖∞
the server computed from the blocks' uploads (whatever penalties ρᵢ the blocks chose),
and that is at most τ_k; only the last ADMM call may instead stop early on the final
KKT test, certificate + ‖w^{k+1} − wᵏ‖∞/β ≤ ε₁.  With a quadratic P the blocks'
penalties ρᵢI + JᵢᵀJᵢ carry their active constraints' Gauss-Newton curvature (the
w-step one linear solve; with L1 a Newton on its k-dimensional dual, exact at its end)."""
import numpy as np
import pytest

import constrfl as cf
from constrfl import functions as fn, prox
from builders import count_metric_rows


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def logistic(X, y, w):
    z = X @ w
    return np.mean(np.logaddexp(0.0, z) - y * z), X.T @ (sigmoid(z) - y) / len(y)


@pytest.mark.parametrize("penalty", ["l1", "ridge"])
def test_stop_rule_bounds_subproblem_stationarity(penalty, monkeypatch):
    metric_rows = count_metric_rows(monkeypatch)
    rng = np.random.default_rng(3)
    d, n, r, lam = 5, 4, 0.45, 0.1
    parts = []
    for i in range(n):
        X = np.c_[rng.standard_normal((60, d - 1)), np.ones(60)]
        y = (X @ np.r_[1.0, -1.0, 0.5, 0.0, 0.2] + rng.standard_normal(60) > 0).astype(float)
        parts.append((X[y == 0], X[y == 1]))
    Xs = np.c_[rng.standard_normal((50, d - 1)), np.ones(50)]
    clients = [cf.Client(objective=(1 / n) * fn.LogisticLoss(X0, np.zeros(len(X0))),
                         constraints=[fn.LogisticLoss(X1, np.ones(len(X1))) - r])
               for X0, X1 in parts]
    server = cf.Server(constraints=[fn.LogisticLoss(Xs, np.ones(50)) - 0.6])
    P = prox.L1(lam) if penalty == "l1" else prox.SquaredL2(lam)
    problem = cf.Problem(clients, server=server, regularizer=P)
    states = []
    res = cf.solve(problem, method="fedproxal", tol=1e-6, inner="admm", beta=50.0,
                   callback=states.append)
    assert res.status == "optimal"
    assert len(states) >= 3
    assert sum(metric_rows) > 0                          # the metric is in play

    for s in states:
        w, wk, beta, tau = s["w"], s["w_prev"], s["beta"], s["tau"]
        g = (w - wk) / beta
        for (X0, X1), name in zip(parts, [c.name for c in problem.clients]):
            g += logistic(X0, np.zeros(len(X0)), w)[1] / n
            val, grad = logistic(X1, np.ones(len(X1)), w)
            mu = s["multipliers_prev"][name].ineq[0]
            g += max(mu + beta * (val - r), 0.0) * grad
        val, grad = logistic(Xs, np.ones(50), w)
        g += max(s["multipliers_prev"]["server"].ineq[0] + beta * (val - 0.6), 0.0) * grad
        if penalty == "l1":     # dist∞(0, g + lam ∂‖w‖₁), coordinate by coordinate
            dist = np.where(w == 0, np.maximum(np.abs(g) - lam, 0),
                            np.abs(g + lam * np.sign(w)))
        else:
            dist = np.abs(g + lam * w)
        cert = s["certificate"]
        assert dist.max() <= cert * (1 + 1e-9) + 1e-14, (s["k"], dist.max(), cert)
        if s is states[-1] and cert > tau:          # stopped early on the final KKT test
            assert cert + s["step"] / beta <= 1e-6, (s["k"], cert, s["step"])
        else:
            assert cert <= tau, (s["k"], cert, tau)
    if penalty == "l1":     # the L1 kink is exercised: some coordinate sits exactly at zero
        assert np.any(res.w == 0.0)
