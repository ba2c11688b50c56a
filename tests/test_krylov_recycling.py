"""Newton-CG's directions from Hessian products (docs/algorithms.md (R1)–(R3)): the
Galerkin step on the whole space is Newton's step and on a Krylov space CG's (closed
forms); the blocks are orthonormal; a party's block of products is its products one by
one, and an evaluation that carries the recycled directions returns theirs; a solve
that recycles is optimal, certified by cvxpy on the pooled problem, in fewer rounds than
without recycling, and resumes bit for bit."""
import numpy as np
import pytest

import constrfl as cf
from constrfl.problems import neyman_pearson
from constrfl.problems.datasets import make_classification
from constrfl.problems.partition import stratified_split
from constrfl.solvers import newton

import builders


def _spd(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n + 5, n))
    return X.T @ X + 0.1 * np.eye(n), rng.standard_normal(n)


def test_the_galerkin_step_on_the_whole_space_is_the_newton_step():
    H, g = _spd(12)
    W = np.linalg.qr(np.random.default_rng(1).standard_normal((12, 12)))[0].T
    d, r = newton.galerkin(W, W @ H, g)
    exact = np.linalg.solve(H, -g)
    assert np.allclose(d, exact, rtol=1e-10, atol=1e-12)
    assert np.linalg.norm(r) <= 1e-9 * np.linalg.norm(g)
    assert np.allclose(r, -g - H @ d, atol=1e-10)


def test_the_galerkin_step_on_a_krylov_space_is_cg_s_iterate():
    """k conjugate-gradient steps from 0 on Hd = −g end at the Galerkin step on the
    Krylov space span{g, Hg, …, Hᵏ⁻¹g} (CG by hand here)."""
    H, g = _spd(30, seed=2)
    k = 5
    d, r, p = np.zeros(30), -g, -g
    for _ in range(k):
        alpha = (r @ r) / (p @ H @ p)
        d, r_new = d + alpha * p, r - alpha * (H @ p)
        p, r = r_new + (r_new @ r_new) / (r @ r) * p, r_new
    K = [g]
    for _ in range(k - 1):
        K.append(H @ K[-1])
    W = newton.orthonormal(K, np.zeros((0, 30)), k)
    got, residual = newton.galerkin(W, W @ H, g)
    assert np.allclose(got, d, rtol=1e-8, atol=1e-10)
    assert np.allclose(residual, r, rtol=1e-7, atol=1e-9)


def test_a_block_is_orthonormal_off_the_directions_held_and_keeps_its_order():
    rng = np.random.default_rng(3)
    W = newton.orthonormal(list(rng.standard_normal((4, 20))), np.zeros((0, 20)), 4)
    a, b = rng.standard_normal(20), rng.standard_normal(20)
    inside = W.T @ rng.standard_normal(4)                   # nothing new: dropped
    N = newton.orthonormal([a, inside, 2.0 * a + W[0], b, a + b], W, 5)
    assert N.shape == (2, 20)                               # a and b; the rest are in
    assert np.allclose(N @ N.T, np.eye(2), atol=1e-12)
    assert np.abs(N @ W.T).max() <= 1e-12
    first = a - W.T @ (W @ a)
    assert np.allclose(N[0], first / np.linalg.norm(first), atol=1e-12)
    assert newton.orthonormal([a, b], W, 1).shape == (1, 20)


def test_the_block_size_keeps_its_budget():
    """m = min(200, d, 10⁶/d), at least 1: m·d ≤ 10⁶ entries a block where d ≤ 10⁶."""
    assert [newton.block_size(d) for d in (50, 1_000, 5_000, 20_000, 10**5, 10**6,
                                           5 * 10**6)] == [50, 200, 200, 50, 10, 1, 1]


def _wide_problem():
    """NP on 40 features (a Newton direction takes several products)."""
    data = make_classification(n_samples=600, n_features=39, seed=3)
    return neyman_pearson(data.X, data.y, stratified_split(data.y, 4, seed=3), 0.3,
                          regularizer=cf.prox.SquaredL2(1e-3))


def _party(problem):
    from constrfl.parties.context import PartyContext
    party = problem.clients[0]
    state = {"beta": 10.0, "mu": np.full(party.n_ineq, 0.5), "nu": np.zeros(party.n_eq)}
    return party, state, PartyContext(party, problem.regularizer)


def test_a_block_of_products_is_each_product():
    """``newton.hvp`` with a block of vectors answers each row's product (one pass over
    the rows for the block: the same products to rounding)."""
    from constrfl.parties import newton as party_newton
    problem = _wide_problem()
    _, state, ctx = _party(problem)
    rng = np.random.default_rng(1)
    w, V = rng.standard_normal(problem.dim), rng.standard_normal((3, problem.dim))
    block, _ = party_newton.newton_hvp({"w": w, "v": V.ravel()}, state, ctx)
    one = np.concatenate([party_newton.newton_hvp({"w": w, "v": v}, state, ctx)[0]["hv"]
                          for v in V])
    assert np.allclose(block["hv"], one, rtol=1e-12, atol=1e-12 * np.abs(one).max())


def test_an_evaluation_with_directions_returns_their_products_there():
    """(R1): ``newton.eval`` with ``v`` returns, besides its value and gradient at w,
    the products ``newton.hvp`` would give there, bit for bit."""
    from constrfl.parties import newton as party_newton
    problem = _wide_problem()
    _, state, ctx = _party(problem)
    rng = np.random.default_rng(4)
    w, V = rng.standard_normal(problem.dim), rng.standard_normal((2, problem.dim))
    reply, _ = party_newton.newton_eval({"w": w, "order": 1, "v": V.ravel()}, state, ctx)
    plain, _ = party_newton.newton_eval({"w": w, "order": 1}, state, ctx)
    products, _ = party_newton.newton_hvp({"w": w, "v": V.ravel()}, state, ctx)
    assert reply["hv"].tobytes() == products["hv"].tobytes()
    assert reply["grad"].tobytes() == plain["grad"].tobytes() and "hv" not in plain


@pytest.mark.parametrize("sparse", [False, True])
def test_each_function_multiplies_a_block_as_its_rows(sparse):
    """Every function's ``hessvecs`` (the row losses' own, the wrappers', the default
    loop) is its ``hessvec`` of each row."""
    import scipy.sparse as sps
    from constrfl import functions as fn
    rng = np.random.default_rng(2)
    X = rng.standard_normal((30, 8)) * (rng.random((30, 8)) < 0.5)
    X = sps.csr_array(X) if sparse else X
    y = (rng.random(30) < 0.4).astype(float)
    A = rng.standard_normal((8, 8))
    w, V = rng.standard_normal(8), rng.standard_normal((4, 8))
    for f in [fn.LogisticLoss(X, y, sample_weight=rng.random(30) + 0.5),
              fn.LeastSquares(X, rng.standard_normal(30)),
              fn.LogisticLoss(X, y) + 0.5 * fn.SquaredNorm(),
              fn.Quadratic(A @ A.T, np.ones(8)),
              fn.Rescaled(fn.LogisticLoss(X, y), rng.random(8) + 0.5)]:
        one = np.array([f.hessvec(w, v, 0.7) for v in V])
        assert np.allclose(f.hessvecs(w, V, 0.7), one, rtol=1e-12,
                           atol=1e-12 * np.abs(one).max()), f


def _recycled_rounds(monkeypatch):
    """Count the evaluations that carry recycled directions."""
    from constrfl.federation import base
    carried, original = [], base.Federation.broadcast

    def spy(self, kind, payload, *args, **kwargs):
        if "v" in payload and "newton.eval" in kind:
            carried.append(payload["v"].size // payload["w"].size)
        return original(self, kind, payload, *args, **kwargs)
    monkeypatch.setattr(base.Federation, "broadcast", spy)
    return carried


def test_a_recycling_newton_cg_solve_is_certified_in_fewer_rounds(monkeypatch):
    problem = _wide_problem()
    carried = _recycled_rounds(monkeypatch)
    res = cf.solve(problem, inner="newton-cg")
    assert carried and max(carried) > 1
    assert res.status == "optimal"
    assert cf.kkt(problem, res.w, res.multipliers).meets(1e-6, 1e-6)
    assert cf.certify(problem, res).ok
    monkeypatch.setattr(newton.Newton, "_recycled", lambda self, s: {})
    del carried[:]
    plain = cf.solve(problem, inner="newton-cg")        # the Krylov space of g alone
    assert not carried and plain.status == "optimal"
    assert np.max(np.abs(res.w - plain.w)) < 1e-4
    assert res.rounds < plain.rounds


def test_a_recycling_solve_interrupted_resumes_bit_for_bit(monkeypatch, tmp_path):
    """The recycled directions and their products are solver state: a solve
    interrupted after some evaluations carried them, saved and loaded, resumes to the
    uninterrupted solve bit for bit."""
    problem = _wide_problem()
    carried = _recycled_rounds(monkeypatch)
    cf.solve(problem, inner="newton-cg")
    whole = len(carried)
    assert whole > 4
    full, again = builders.resume_after_interrupt(
        monkeypatch, tmp_path, problem, lambda seen: len(carried) >= 2 * whole + 3,
        inner="newton-cg")
    assert again.w.tobytes() == full.w.tobytes()
    assert (again.rounds, again.bytes_up) == (full.rounds, full.bytes_up)
