"""Tests for the federated baselines (constrfl/solvers/baselines.py, docs/algorithms.md §7).

The hand-computed tests re-derive two rounds from the update rules of §7 and the seeds
with plain numpy on quadratics whose gradients are written out here; they share nothing
with the code under test but the problem data.
"""
import numpy as np
import pytest

import constrfl as cf
from constrfl.exactsum import RING_BYTES
from constrfl import functions as fn, prox
from constrfl.groundtruth import pooled_cvxpy
from constrfl.problems import federated_lasso

# ---------------------------------------------------------------- hand-computed rounds
#
# Two clients with fᵢ(w) = ½wᵀAᵢw + bᵢᵀw.  Each client works on fᵢ (rates per unit of the
# mean client objective), so its gradient is Aᵢx + bᵢ, and every prox is of ψ = P/n, n = 2.
# K = 2 local steps, full batches, full participation.

A = [np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([[1.0, 0.0], [0.0, 3.0]])]
B = [np.array([1.0, -1.0]), np.array([-2.0, 0.5])]
W0 = np.array([0.5, -0.3])
K, LR, N = 2, 0.1, 2
LAM = 0.3


def quad_problem(regularizer=None, server=None):
    clients = [cf.Client(objective=fn.Quadratic(a, b)) for a, b in zip(A, B)]
    return cf.Problem(clients, server=server, regularizer=regularizer)


def grad(i, x):
    return A[i] @ x + B[i]


def soft(v, k):
    return np.sign(v) * np.maximum(np.abs(v) - k, 0.0)


def sgd_delta(x, lam=0.0):
    """Mean over clients of K steps x ← soft(x − η_c g, η_c·lam) (plain SGD for lam = 0)."""
    ends = []
    for i in range(2):
        y = x
        for _ in range(K):
            y = soft(y - LR * grad(i, y), LR * lam / N)
        ends.append(y - x)
    return np.mean(ends, axis=0)


def run_two_rounds(method, regularizer=None, server=None, **options):
    """Both rounds' models (from the callback) and the result."""
    models = []
    res = cf.solve(quad_problem(regularizer, server), method=method, w0=W0, rounds=2,
                   local_steps=K, client_lr=LR, callback=lambda r: models.append(r["w"]),
                   **options)
    return models, res


# per round and client the server also sends: the rate, K, the round, n, γ, the batch
# size, the seed and the client-prox flag (the baselines module's docstring)
ROUND_SCALARS = 8


def expected_primal(rule, lam, eta, beta=0.0, beta1=0.0, beta2=0.0, tau=0.0):
    """Two rounds of the FedOpt server rules of §7 followed by the documented server prox
    x ← soft(x, lam·t/n), t = gain·η_c·K."""
    x, m, v, out = W0, np.zeros(2), np.full(2, tau ** 2), []
    for _ in range(2):
        d = sgd_delta(x)
        if rule == "sgd":
            step, gain = eta * d, eta
        elif rule == "momentum":
            m = beta * m + d
            step, gain = eta * m, eta / (1 - beta)
        else:
            m = beta1 * m + (1 - beta1) * d
            if rule == "adagrad":
                v = v + d ** 2
            elif rule == "yogi":
                v = v - (1 - beta2) * d ** 2 * np.sign(v - d ** 2)
            else:
                v = beta2 * v + (1 - beta2) * d ** 2
            step, gain = eta * m / (np.sqrt(v) + tau), eta / (np.sqrt(v) + tau)
        x = soft(x + step, lam * gain * LR * K / N)
        out.append(x)
    return out


SERVER_CASES = {
    "fedavg": (dict(server_lr=0.7), dict(rule="sgd", eta=0.7)),
    "fedavgm": (dict(server_lr=0.7, momentum=0.6), dict(rule="momentum", eta=0.7, beta=0.6)),
    "fedadagrad": (dict(server_lr=0.05, beta1=0.8, tau=0.1),
                   dict(rule="adagrad", eta=0.05, beta1=0.8, tau=0.1)),
    "fedyogi": (dict(server_lr=0.05, beta1=0.8, beta2=0.9, tau=0.1),
                dict(rule="yogi", eta=0.05, beta1=0.8, beta2=0.9, tau=0.1)),
    "fedadam": (dict(server_lr=0.05, beta1=0.8, beta2=0.9, tau=0.1),
                dict(rule="adam", eta=0.05, beta1=0.8, beta2=0.9, tau=0.1)),
}


@pytest.mark.parametrize("lam", [0.0, LAM], ids=["P=0", "P=L1"])
@pytest.mark.parametrize("method", sorted(SERVER_CASES))
def test_server_optimizer_two_rounds_by_hand(method, lam):
    options, rule = SERVER_CASES[method]
    models, res = run_two_rounds(method, prox.L1(lam) if lam else None, **options)
    expected = expected_primal(lam=lam, **rule)
    for got, want in zip(models, expected):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert not np.allclose(expected[0], expected[1])          # the rounds really moved
    assert res.rounds == 2 and res.inner_iterations == 2 * 2 * K
    # rounds · clients · floats · 8; down: the model (d) and the round's 8 scalars
    assert res.bytes_up == 2 * 2 * 2 * RING_BYTES and res.bytes_down == 2 * 2 * (2 + ROUND_SCALARS) * 8


CORRECTIONS = {"vanilla": lambda b: 1 - b, "linear": lambda b: 1 + b,
               "square": lambda b: 1 + b ** 2, "sin": lambda b: 1 + np.sin(b),
               "sqrt": lambda b: 1 + np.sqrt(b)}


@pytest.mark.parametrize("lam", [0.0, LAM], ids=["P=0", "P=L1"])
@pytest.mark.parametrize("correction", sorted(CORRECTIONS))
def test_fedcada_two_rounds_by_hand(correction, lam):
    b1, b2, eps, eta_s = 0.8, 0.9, 1e-3, 0.9
    models, res = run_two_rounds("fedcada", prox.L1(lam) if lam else None, server_lr=eta_s,
                                 beta1=b1, beta2=b2, eps=eps, correction=correction)
    c = CORRECTIONS[correction]
    x, m, v = W0, np.zeros(2), np.zeros(2)
    for t, got in zip((1, 2), models):
        deltas, ms, vs = [], [], []
        for i in range(2):
            y, mi, vi = x, m, v
            for _ in range(K):
                g = grad(i, y)
                mi = b1 * mi + (1 - b1) * g
                vi = b2 * vi + (1 - b2) * g ** 2
                y = y - LR * (mi / c(b1 ** t)) / (np.sqrt(vi / c(b2 ** t)) + eps)
            deltas.append(y - x)
            ms.append(mi)
            vs.append(vi)
        m, v = np.mean(ms, axis=0), np.mean(vs, axis=0)
        t_prox = eta_s * LR * K / (np.sqrt(v / c(b2 ** t)) + eps)
        x = soft(x + eta_s * np.mean(deltas, axis=0), lam * t_prox / N)
        np.testing.assert_allclose(got, x, rtol=1e-12, atol=1e-14)
    # x, m, v both ways; down also the round's scalars and β₁, β₂, ϵ, the correction
    assert res.bytes_up == 2 * 2 * (3 * 2) * RING_BYTES
    assert res.bytes_down == 2 * 2 * (3 * 2 + ROUND_SCALARS - 1 + 4) * 8


@pytest.mark.parametrize("method", ["fedmid", "fedmid-osp"])
def test_fedmid_two_rounds_by_hand(method):
    eta_s = 0.8
    models, _ = run_two_rounds(method, prox.L1(LAM), server_lr=eta_s)
    client_lam = LAM if method == "fedmid" else 0.0
    x = W0
    for got in models:
        x = soft(x + eta_s * sgd_delta(x, client_lam), eta_s * LR * K * LAM / N)
        np.testing.assert_allclose(got, x, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("decay", [1.0, 0.5])
@pytest.mark.parametrize("method", ["feddualavg", "feddualavg-osp"])
def test_feddualavg_two_rounds_by_hand(method, decay):
    """002, Algorithm 3: η̃_{r,k} = η_s η_c r K + η_c k; with a decaying client rate
    η_c,r = η_c δʳ the sum η_s Σ_{r'<r} η_c,r' K replaces η_s η_c r K."""
    eta_s = 0.8
    models, res = run_two_rounds(method, prox.L1(LAM), server_lr=eta_s,
                                 client_lr_decay=decay)
    z, past = W0, 0.0                                   # past = η_s Σ_{r'<r} η_c,r' K
    for r, got in enumerate(models):
        lr = LR * decay ** r
        ends = []
        for i in range(2):
            zi = z
            for k in range(K):
                eta_tilde = past + lr * k
                wi = soft(zi, eta_tilde * LAM / N) if method == "feddualavg" else zi
                zi = zi - lr * grad(i, wi)
            ends.append(zi - z)
        z = z + eta_s * np.mean(ends, axis=0)
        past += eta_s * lr * K
        np.testing.assert_allclose(got, soft(z, past * LAM / N), rtol=1e-12, atol=1e-14)
    # down: z and the round's scalars (FedDualAvg: the prox offset for the prox flag)
    assert res.bytes_down == 2 * 2 * (2 + ROUND_SCALARS) * 8
    assert res.bytes_up == 2 * 2 * 2 * RING_BYTES


def test_composite_methods_reduce_to_fedavg_without_regularizer():
    ref, _ = run_two_rounds("fedavg", server_lr=0.8)
    for method in ("fedmid", "fedmid-osp", "feddualavg", "feddualavg-osp"):
        models, _ = run_two_rounds(method, server_lr=0.8)
        np.testing.assert_allclose(models[-1], ref[-1], rtol=1e-12)


def test_server_share_and_penalty_by_hand():
    """The server's f₀ and c₀ enter as Δ ← Δ − η_c K ∇F₀(x)/n; a client constraint adds
    γ·[aᵀx − 1]₊·a to that client's gradient (the quadratic penalty)."""
    A0, a0, a1, gamma = np.array([[1.0, 0.2], [0.2, 0.5]]), np.array([1.0, 1.0]), \
        np.array([-1.0, 2.0]), 5.0
    server = cf.Server(objective=fn.Quadratic(A0), constraints=[fn.Affine(a0, 0.2)])
    clients = [cf.Client(objective=fn.Quadratic(A[0], B[0]),
                         constraints=[fn.Affine(a1, -1.0)]),
               cf.Client(objective=fn.Quadratic(A[1], B[1]))]
    problem = cf.Problem(clients, server=server)
    models = []
    cf.solve(problem, method="fedavg", w0=W0, rounds=2, local_steps=K, client_lr=LR,
             penalty="quadratic", penalty_weight=gamma, callback=lambda r: models.append(r["w"]))

    def client_grad(i, x):
        g = grad(i, x)
        return g + (gamma * max(a1 @ x - 1.0, 0.0) * a1 if i == 0 else 0.0)

    x = W0
    for got in models:
        ends = []
        for i in range(2):
            y = x
            for _ in range(K):
                y = y - LR * client_grad(i, y)
            ends.append(y - x)
        g0 = A0 @ x + gamma * max(a0 @ x + 0.2, 0.0) * a0
        x = x + np.mean(ends, axis=0) - LR * K * g0 / N
        np.testing.assert_allclose(got, x, rtol=1e-12, atol=1e-14)
    assert max(a1 @ W0 - 1.0, a0 @ W0 + 0.2) > 0     # the penalties were active


# ---------------------------------------------------------------- convergence

def least_squares(n_clients=5, dim=6, rows=40, seed=0):
    """Strongly convex federated least squares with mildly heterogeneous clients."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(dim)
    clients = []
    for _ in range(n_clients):
        X = rng.standard_normal((rows, dim))
        y = X @ (w + 0.3 * rng.standard_normal(dim)) + 0.5 * rng.standard_normal(rows)
        clients.append(cf.Client(objective=fn.LeastSquares(X, y)))
    return cf.Problem(clients)


def cvxpy_optimum(problem):
    prob, w, _ = pooled_cvxpy(problem)
    prob.solve(solver="CLARABEL")
    return prob.value, w.value


# Measured rounds to a relative gap ≤ 1e-4 (K = 5): fedavg, fedmid(-osp), feddualavg(-osp) 9;
# fedcada 17; fedavgm 36; fedadagrad 75; fedyogi 78; fedadam 75.  Budgets below leave room.
# Small client rates with larger server rates: client drift biases the fixed point by
# O(η_c K) on heterogeneous clients (measured floor here ≈ 1e-5 at η_c = 0.01, per unit of
# the mean client objective: 0.002 per unit of F with the 5 clients).
CONVERGENCE = {
    "fedavg": (dict(client_lr=0.01, server_lr=10.0), 20),
    "fedavgm": (dict(client_lr=0.01, server_lr=2.0, momentum=0.8), 60),
    "fedadagrad": (dict(client_lr=0.01, server_lr=0.3), 120),
    "fedyogi": (dict(client_lr=0.01, server_lr=0.05), 120),
    "fedadam": (dict(client_lr=0.01, server_lr=0.05), 120),
    "fedcada": (dict(client_lr=0.01), 40),
    "fedmid": (dict(client_lr=0.01, server_lr=10.0), 20),
    "feddualavg": (dict(client_lr=0.01, server_lr=10.0), 20),
    "fedmid-osp": (dict(client_lr=0.01, server_lr=10.0), 20),
    "feddualavg-osp": (dict(client_lr=0.01, server_lr=10.0), 20),
}


@pytest.fixture(scope="module")
def lsq():
    problem = least_squares()
    return problem, cvxpy_optimum(problem)[0]


@pytest.mark.parametrize("method", sorted(CONVERGENCE))
def test_every_method_reaches_the_least_squares_optimum(lsq, method):
    problem, f_star = lsq
    options, rounds = CONVERGENCE[method]
    res = cf.solve(problem, method=method, rounds=rounds, local_steps=5, **options)
    assert abs(res.objective - f_star) / abs(f_star) <= 1e-4
    assert len(res.history) == res.rounds == rounds
    assert res.status == ("optimal" if res.kkt.stationarity <= 1e-6 else "max_iterations")


def f1_support(w, w_true):
    found, true = w != 0, w_true != 0
    tp = np.sum(found & true)
    return 2 * tp / (found.sum() + true.sum())


@pytest.mark.parametrize("method", ["fedmid", "feddualavg"])
def test_composite_methods_recover_the_lasso_support(method):
    """Measured: F1 ≥ 0.9 from round 13 on (FedMid) and 20 on (FedDualAvg)."""
    problem = federated_lasso(n_clients=8, n_samples_per_client=32, dim=40, sparsity=6,
                              noise=0.1, lam=0.05, seed=0)
    res = cf.solve(problem, method=method, rounds=60, local_steps=10, client_lr=0.08,
                   server_lr=1.0)
    assert f1_support(res.w, problem.w_true) >= 0.9
    assert np.count_nonzero(res.w) < problem.dim       # exact zeros, from the prox


# ---------------------------------------------------------------- partial participation

@pytest.mark.parametrize("method, client_lr, server_lr", [
    ("fedavg", 0.25, 1.0), ("fedadam", 0.25, 0.1), ("fedcada", 0.05, 1.0),
    ("feddualavg", 0.25, 1.0)])
def test_partial_participation_and_minibatches_are_reproducible(method, client_lr, server_lr):
    problem = least_squares(n_clients=50, rows=20, seed=1)
    options = dict(method=method, rounds=15, local_steps=3, batch_size=5,
                   client_fraction=0.2, client_lr=client_lr, server_lr=server_lr)
    a, b = cf.solve(problem, seed=3, **options), cf.solve(problem, seed=3, **options)
    c = cf.solve(problem, seed=4, **options)
    np.testing.assert_array_equal(a.w, b.w)
    assert [h["objective"] for h in a.history] == [h["objective"] for h in b.history]
    assert not np.array_equal(a.w, c.w)
    assert all(h["clients"] == 10 for h in a.history)
    floats = 3 * problem.dim if method == "fedcada" else problem.dim
    assert a.bytes_up == 15 * 10 * floats * RING_BYTES
    assert a.inner_iterations == 15 * 10 * 3
    assert a.history[-1]["objective"] < 0.5 * a.history[0]["objective"]


def default_problem(regularizer=None, n=8, d=10, seed=0):
    """A strongly convex federated least squares: n clients, d features, 30–50 rows each,
    features of unequal scale."""
    rng = np.random.default_rng(seed)
    w_true = rng.standard_normal(d)
    clients = []
    for _ in range(n):
        m = rng.integers(30, 51)
        X = rng.standard_normal((m, d)) * rng.uniform(0.5, 2.0, d)
        clients.append(cf.Client(objective=fn.LeastSquares(X, X @ w_true
                                                           + 0.1 * rng.standard_normal(m))))
    return cf.Problem(clients, regularizer=regularizer)


@pytest.mark.parametrize("method", cf.BASELINES)
def test_defaults_converge(method):
    """Pure defaults, rounds=3000: every baseline within a relative gap of 1e-3."""
    problem = default_problem()
    f_star = cvxpy_optimum(problem)[0]
    res = cf.solve(problem, method=method, rounds=3000, observe=False)
    assert abs(res.objective - f_star) / abs(f_star) <= 1e-3


def test_defaults_with_l1_and_the_documented_biases():
    """With P = 0.05‖·‖₁: FedDualAvg and FedMid-OSP converge; FedMid (double shrinkage) and
    FedDualAvg-OSP (clients step at the dual point) keep the biases the module documents
    (measured 4e-3 and 99)."""
    problem = default_problem(prox.L1(0.05))
    f_star = cvxpy_optimum(problem)[0]
    gap = {m: abs(cf.solve(problem, method=m, rounds=3000, observe=False).objective - f_star)
           / abs(f_star) for m in ("feddualavg", "fedmid-osp", "fedmid", "feddualavg-osp")}
    assert gap["feddualavg"] <= 1e-3 and gap["fedmid-osp"] <= 1e-3
    assert 1e-3 < gap["fedmid"] < 1e-2 and gap["feddualavg-osp"] > 10


def test_penalty_defaults_are_stable_on_many_clients():
    """FedAvg with the quadratic penalty on 1000 clients stays finite at the defaults (the
    client rate is per unit of the mean client objective, so the penalty's curvature
    seen by a client does not grow with n)."""
    rng = np.random.default_rng(0)
    clients = [cf.Client(objective=fn.LeastSquares(rng.standard_normal((5, 3)),
                                                    rng.standard_normal(5)),
                         constraints=[fn.Affine(np.array([1.0, 0.0, 0.0]), -0.1)])
               for _ in range(1000)]
    res = cf.solve(cf.Problem(clients), method="fedavg", penalty="quadratic", rounds=20,
                   observe=False)
    assert res.status == "max_iterations" and np.all(np.isfinite(res.w))
    assert res.objective < 1e3


def test_epochs_set_the_local_steps():
    problem = least_squares(n_clients=4, rows=20)
    res = cf.solve(problem, method="fedavg", rounds=2, epochs=2, batch_size=6)
    assert res.inner_iterations == 2 * 4 * (2 * 4)        # K = 2·⌈20/6⌉ = 8


# ---------------------------------------------------------------- constraints and status

def constrained_least_squares(bound):
    """Least squares with the client constraint w₀ ≤ bound on client 0."""
    problem = least_squares(n_clients=3, dim=3, rows=30)
    c = problem.clients[0]
    clients = [cf.Client(objective=c.objective, constraints=[fn.Affine([1.0, 0, 0], -bound)],
                         name=c.name)] + problem.clients[1:]
    return cf.Problem(clients)


def test_constraints_need_a_penalty():
    with pytest.raises(ValueError, match="penalty='quadratic'"):
        cf.solve(constrained_least_squares(0.0), method="fedavg")


def test_active_constraint_is_never_reported_optimal():
    problem = constrained_least_squares(-1.0)           # the unconstrained optimum violates it
    f_star, w_star = cvxpy_optimum(problem)
    res = cf.solve(problem, method="fedavg", tol=1e-6, rounds=300, local_steps=1,
                   client_lr=0.03, penalty="quadratic", penalty_weight=10.0)
    assert res.status == "max_iterations"
    assert "Definition 1" in res.message and "penalty_weight" in res.message
    assert res.kkt.feasibility > 1e-3                   # ≈ μ*/γ: the penalty's violation
    mu = res.multipliers[problem.clients[0].name].ineq
    np.testing.assert_allclose(mu, 10.0 * max(res.w[0] + 1.0, 0.0))


def test_inactive_constraint_can_be_optimal():
    problem = constrained_least_squares(10.0)
    res = cf.solve(problem, method="fedavg", tol=1e-6, rounds=400, local_steps=1,
                   client_lr=0.06, penalty="quadratic")
    assert res.status == "optimal", res.message
    assert res.kkt.feasibility == 0.0


# ---------------------------------------------------------------- option checks

@pytest.mark.parametrize("options, match", [
    (dict(method="fedavg", momentum=0.9), "momentum"),
    (dict(method="fedadam", correction="linear"), "correction"),
    (dict(method="fedcada", correction="cubic"), "correction"),
    (dict(method="fedavg", client_fraction=0.0), "client_fraction"),
    (dict(method="fedavg", client_lr=-1.0), "client_lr"),
    (dict(method="fedavg", rounds=0), "rounds"),
    (dict(method="fedavg", epochs=2), "batch_size"),
    (dict(method="fedavg", epochs=2, local_steps=3, batch_size=4), "local_steps"),
    (dict(method="fedyogi", beta2=1.0), "beta2"),
    (dict(method="fedavg", penalty_weight=10.0), "penalty"),
    (dict(method="fedavg", penalty="cubic"), "penalty"),
    (dict(method="fedavg", seed=-1), "seed"),
    (dict(method="fedavg", client_lr_decay=1.5), "client_lr_decay"),
])
def test_bad_options_are_named(options, match):
    with pytest.raises(ValueError, match=match):
        cf.solve(least_squares(n_clients=2), **options)


def test_adaptive_methods_refuse_non_separable_regularizers():
    problem = cf.Problem(least_squares(n_clients=2).clients, regularizer=prox.L2Ball(1.0))
    with pytest.raises(ValueError, match="separable"):
        cf.solve(problem, method="fedadam")
    assert cf.solve(problem, method="fedmid", rounds=3).status in ("optimal", "max_iterations")


def test_fedcada_refuses_server_functions():
    server = cf.Server(objective=fn.Quadratic(np.eye(6)))
    problem = cf.Problem(least_squares(n_clients=2).clients, server=server)
    with pytest.raises(ValueError, match="server functions"):
        cf.solve(problem, method="fedcada")


def test_numerical_error_keeps_last_finite_model():
    res = cf.solve(least_squares(n_clients=2), method="fedavg", client_lr=10.0, rounds=500)
    assert res.status == "numerical_error"
    assert np.all(np.isfinite(res.w))


def test_divergence_by_hand():
    """FedAvg at η_c = 1 on the hand-computed quadratics (a client step multiplies by
    I − Aᵢ, eigenvalues down to −2): the rounds recomputed here until the model passes
    max(1, ‖w⁰‖∞)/ε; that round ends the run (numerical_error, named) and the one before
    is returned."""
    lr, bound = 1.0, max(1.0, np.max(np.abs(W0))) / np.finfo(float).eps
    models = [W0]
    while np.max(np.abs(models[-1])) <= bound:
        x, ends = models[-1], []
        for i in range(2):
            y = x
            for _ in range(K):
                y = y - lr * grad(i, y)
            ends.append(y - x)
        models.append(x + np.mean(ends, axis=0))
    diverged = len(models) - 1
    res = cf.solve(quad_problem(), method="fedavg", w0=W0, rounds=diverged + 10,
                   local_steps=K, client_lr=lr)
    assert res.status == "numerical_error"
    assert f"in round {diverged}: the iteration diverged" in res.message
    assert res.outer_iterations == diverged - 1
    np.testing.assert_allclose(res.w, models[-2], rtol=1e-12)


def readme_problem():
    """The README's example: Neyman-Pearson over 3 sites, w₁ = 0 at the server, L1."""
    rng = np.random.default_rng(0)
    d, clients = 5, []
    for i in range(3):
        X = np.c_[rng.standard_normal((100, d - 1)), np.ones(100)]
        y = (X @ np.ones(d) + rng.standard_normal(100) > 1).astype(float)
        X0, X1 = X[y == 0], X[y == 1]
        clients.append(cf.Client(objective=fn.LogisticLoss(X0, np.zeros(len(X0))),
                                 constraints=[fn.LogisticLoss(X1, np.ones(len(X1))) - 0.3],
                                 name=f"site-{i}"))
    server = cf.Server(equalities=[fn.Affine(np.eye(d)[:1], [0.0])])
    return cf.Problem(clients, server=server, regularizer=prox.L1(0.01))


def test_a_diverging_penalty_run_is_a_numerical_error():
    """Issue 22, item 5: FedAvg with the quadratic penalty (γ = 100) on the README's
    example reached stationarity 5e42 in its 100 rounds and said max_iterations."""
    seen = []
    res = cf.solve(readme_problem(), method="fedavg", penalty="quadratic",
                   callback=seen.append)
    assert seen[-1]["stationarity"] > 1e10 * seen[0]["stationarity"]   # it did diverge
    assert res.status == "numerical_error" and "diverged" in res.message
    assert res.outer_iterations == seen[-1]["round"] < 100
    np.testing.assert_array_equal(res.w, seen[-1]["w"])       # the last model kept


def test_verbose_table_and_callback(capsys):
    seen = []
    res = cf.solve(least_squares(n_clients=2), method="fedyogi", rounds=3, verbose=True,
                   callback=seen.append)
    out = capsys.readouterr().out
    assert "constrfl fedyogi: 2 clients" in out and "status: max_iterations" in out
    assert [r["round"] for r in seen] == [1, 2, 3]
    np.testing.assert_array_equal(seen[-1]["w"], res.w)
