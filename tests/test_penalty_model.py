"""``inner="newton-basis"`` with the parties' inequalities modelled to second order (B6):
each party's models of its constraints in its row basis, and the server's minimizer of
the model.

Oracles: the party's constraint values, Jacobian and Hessians from its own functions
(function by function), the model and its gradient written out densely with NumPy,
SciPy's minimizer of that model, cvxpy/Clarabel on the pooled problem."""
import numpy as np
import pytest
from scipy.optimize import minimize

import constrfl as cf
from constrfl import prox
from constrfl.problems.datasets import make_classification
from constrfl.problems.partition import stratified_split
from constrfl.rowspace import constraint_models, row_basis
from constrfl.solvers.penaltymodel import model_step, parse_models
from constrfl.solvers.subspace import BasisModel
from builders import spy_uploads, wide_np


def test_models_are_the_constraints_to_second_order():
    """cₗ(w), ∇cₗ = Bâₗ and ∇²cₗ = BKₗBᵀ from the party's own functions, with the
    multipliers and β in the header."""
    _, p = wide_np()
    party = p.clients[0]
    B, Z = row_basis(party)
    w = 0.3 * np.random.default_rng(1).standard_normal(B.shape[0])
    mu, beta = np.array([0.7]), 30.0
    model = parse_models(constraint_models(party, (B, Z), w, beta, mu), B)
    c, J = party.c_value_jac(w)
    assert model.beta == beta and np.array_equal(model.mu, mu)
    assert np.allclose(model.c, c, rtol=1e-12, atol=1e-15)
    assert np.allclose(model.A @ B.T, J, rtol=1e-10, atol=1e-13 * np.abs(J).max())
    H = party.c_hess(w, np.ones(1))
    assert np.allclose(B @ model.K[0] @ B.T, H, rtol=1e-10, atol=1e-12 * np.abs(H).max())
    assert np.abs(H).max() > 0


def test_no_models_for_nonconvex_constraints_or_past_the_budget(monkeypatch):
    from constrfl import rowspace
    _, p = wide_np()
    party = p.clients[0]
    basis = row_basis(party)
    w = np.zeros(basis[0].shape[0])
    assert constraint_models(party, basis, w, 10.0, np.zeros(1)) is not None
    monkeypatch.setattr(type(party), "is_convex", property(lambda self: False))
    assert constraint_models(party, basis, w, 10.0, np.zeros(1)) is None
    monkeypatch.undo()
    monkeypatch.setattr(rowspace, "COMPACT_FLOATS_PER_DIM", 5)
    assert constraint_models(party, basis, w, 10.0, np.zeros(1)) is None


def _instance(rng, n, ranks, per_party=2):
    """A random model: M ≻ 0, g, and for each party a basis map V and convex quadratic
    constraints with values on both sides of their kinks."""
    A = rng.standard_normal((n, n))
    M = A @ A.T / n + 0.1 * np.eye(n)
    g = rng.standard_normal(n)
    flats = {}
    for i, r in enumerate(ranks):
        V = rng.standard_normal((n, r)) / np.sqrt(n)
        blocks = [[20.0]]
        for l in range(per_party):
            G = rng.standard_normal((r, r))
            K = G @ G.T / r
            blocks += [[rng.uniform(-0.1, 0.1), rng.uniform(0, 1)], rng.standard_normal(r),
                       K[np.triu_indices(r)]]
        flats[f"p{i}"] = (V, np.concatenate(blocks))
    return M, g, flats


def _dense_model(M, g, models):
    """m of (B6) and its gradient, written out from the definition."""
    def m(x):
        val, grad = g @ x + 0.5 * x @ M @ x, g + M @ x
        for part in models.values():
            V, b = part.V, part.beta
            z = V.T @ x
            for l in range(len(part.c)):
                a, K, mu = part.A[l], part.K[l], part.mu[l]
                u = max(mu + b * part.c[l], 0.0)
                q = part.c[l] + a @ z + 0.5 * z @ K @ z
                v = max(mu + b * q, 0.0)
                H0 = u * K + (b * np.outer(a, a) if u > 0 else 0.0)
                val += (v * v - u * u) / (2 * b) - u * a @ z - 0.5 * z @ H0 @ z
                grad = grad + V @ (v * (a + K @ z) - u * a - H0 @ z)
        return val, grad
    return m


@pytest.mark.parametrize("cached", [True, False])
def test_model_step_is_the_minimizer_of_the_model(cached, monkeypatch):
    """With the parties' VKVᵀ kept, or VΔVᵀ formed every step."""
    from constrfl.solvers import penaltymodel
    if not cached:
        monkeypatch.setattr(penaltymodel, "CACHE_FLOATS", 0)
    rng = np.random.default_rng(3)
    n, ranks = 30, (4, 6, 5)
    M, g, flats = _instance(rng, n, ranks)
    models = {name: parse_models(flat, V) for name, (V, flat) in flats.items()}
    x = model_step(M, g, models)
    m = _dense_model(M, g, models)
    value, grad = m(x)
    assert np.linalg.norm(grad) <= 1e-8 * np.linalg.norm(g)
    best = minimize(m, np.zeros(n), jac=True, method="BFGS", options={"gtol": 1e-10})
    assert value <= best.fun + 1e-12 * abs(best.fun) and value < 0
    newton = -np.linalg.solve(M, g)
    assert m(newton)[0] > value + 1e-6 * abs(value)          # the model does change the step


@pytest.mark.parametrize("cached", [True, False])
@pytest.mark.parametrize("d", [60, 12])                 # R < d: (B3); R ≥ d: (B2)
def test_direction_with_models_minimizes_the_model_in_d_space(d, cached, monkeypatch):
    """BasisModel.direction with models, in the union of the bases (B3) or in ℝᵈ (B2):
    the minimizer of (B6) written in ℝᵈ, M = Σ BᵢCᵢBᵢᵀ + μI; the Newton-type systems
    from the kept VKVᵀ or from VΔVᵀ formed each time."""
    from constrfl.solvers import penaltymodel
    if not cached:
        monkeypatch.setattr(penaltymodel, "CACHE_FLOATS", 0)
    rng = np.random.default_rng(4)
    ranks, mu = (4, 5, 3), 0.05
    bases, cores, models, H = {}, {}, {}, mu * np.eye(d)
    for i, r in enumerate(ranks):
        B = np.linalg.qr(rng.standard_normal((d, r)))[0]
        A = rng.standard_normal((r, r))
        bases[f"p{i}"], cores[f"p{i}"] = B.T, A @ A.T
        H += B @ (A @ A.T) @ B.T
    _, _, flats = _instance(rng, d, ranks, per_party=1)
    for name, (_, flat) in zip(sorted(bases), flats.values()):
        models[name] = flat
    g = rng.standard_normal(d)
    got = BasisModel().direction(bases, cores, None, mu, g, models)
    dense = {n: parse_models(models[n], bases[n].T) for n in models}
    value, grad = _dense_model(H, g, dense)(got)
    assert np.linalg.norm(grad) <= 1e-8 * np.linalg.norm(g) and value < 0


def _bent_np(d=300, clients=10, rows=12):
    """NP with more features than rows, ridge 1e-3: the saturated logistic losses whose
    penalty valley bends away from Newton's model (issue 20's dense rows, scaled down)."""
    data = make_classification(n_samples=clients * rows, n_features=d - 1, seed=0)
    ids = stratified_split(data.y, clients, seed=0)
    return cf.problems.neyman_pearson(data.X, data.y, ids, 0.2,
                                      regularizer=prox.SquaredL2(1e-3))


def test_models_cut_the_rounds_and_keep_the_answer(monkeypatch):
    """With the models the solve is optimal at cvxpy's point in fewer rounds than with
    Newton's quadratic model alone, and the models travel (counted in bytes_up)."""
    p = _bent_np()
    uploads = spy_uploads(monkeypatch)
    res = cf.solve(p, tol=1e-6, inner="newton-basis", private=False)
    sent = [sum(np.size(r.get("models", ())) for r in rs.values()) for _, rs in uploads]
    monkeypatch.undo()
    assert res.status == "optimal", res.message
    assert sum(sent) > 0
    ref = cf.certify(p, res.w, res.multipliers)
    assert ref.reference_status == "optimal"
    assert abs(res.objective - ref.reference_objective) <= 1e-6 * abs(ref.reference_objective)
    assert res.kkt.stationarity <= 1e-6 and cf.kkt(p, res.w, res.multipliers) == res.kkt
    from constrfl.solvers import newton
    monkeypatch.setattr(newton.Newton, "__init__", _without_models(newton.Newton.__init__))
    plain = cf.solve(p, tol=1e-6, inner="newton-basis", private=False)
    assert plain.status == "optimal"
    assert res.rounds < plain.rounds, (res.rounds, plain.rounds)


def _without_models(init):
    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.flags.pop("models", None)
    return patched
