"""Newton-CG's Nyström preconditioner (docs/algorithms.md §5): the approximation is
exact for a matrix of rank below the sketch, so the preconditioned matrix is a multiple
of the identity (a closed form); a party's block of products is its products one by
one, bit for bit; a solve that sketches is optimal, certified by cvxpy on the pooled
problem, and resumes bit for bit."""
import numpy as np
import pytest

import constrfl as cf
from constrfl.problems import neyman_pearson
from constrfl.problems.datasets import make_classification
from constrfl.problems.partition import stratified_split
from constrfl.solvers import newton
from constrfl.solvers.sketch import nystrom, random_sketch

import builders


def test_the_preconditioner_of_a_low_rank_matrix_has_two_eigenvalues():
    """rank A = 12 < m = 20: the sketch's Nyström approximation is A (up to rounding),
    and the preconditioned matrix P⁻¹(A + μI) is λ₁₂(A) + μ on A's range and μ on its
    complement (Frangella, Tropp & Udell 2023, (5.3)): two eigenvalues, a closed form."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 50))
    A = X.T @ X
    Omega = random_sketch(50, 20, seed=3)
    U, lam = nystrom(A @ Omega, Omega)
    assert lam.size == 12 and np.all(np.diff(lam) <= 0)
    assert np.linalg.norm((U * lam) @ U.T - A) <= 1e-10 * np.linalg.norm(A)
    least = np.linalg.eigvalsh(A)[-12]                      # A's least positive eigenvalue
    mu = 0.3
    M = np.column_stack([newton.nystrom_solve({"U": U, "lam": lam}, col, mu)
                         for col in (A + mu * np.eye(50)).T])
    eig = np.sort(np.linalg.eigvals(M).real)
    assert np.allclose(eig, [mu] * 38 + [least + mu] * 12, rtol=1e-8)


def test_without_a_sketch_nothing_is_preconditioned():
    r = np.arange(5.0)
    assert newton.nystrom_solve(None, r, 1.0) is r


def _wide_problem():
    """NP on 40 features (CG takes several products a step)."""
    data = make_classification(n_samples=600, n_features=39, seed=3)
    return neyman_pearson(data.X, data.y, stratified_split(data.y, 4, seed=3), 0.3,
                          regularizer=cf.prox.SquaredL2(1e-3))


def test_a_block_of_products_is_each_product():
    """``newton.hvp`` with a block of vectors (a sketch) answers each row's product (one
    pass over the rows for the block: the same products to rounding)."""
    from constrfl.parties import newton as party_newton
    from constrfl.parties.context import PartyContext
    problem = _wide_problem()
    party = problem.clients[0]
    ctx = PartyContext(party, problem.regularizer)
    state = {"beta": 10.0, "mu": np.full(party.n_ineq, 0.5), "nu": np.zeros(party.n_eq)}
    rng = np.random.default_rng(1)
    w, V = rng.standard_normal(problem.dim), rng.standard_normal((3, problem.dim))
    block, _ = party_newton.newton_hvp({"w": w, "v": V.ravel()}, state, ctx)
    one = np.concatenate([party_newton.newton_hvp({"w": w, "v": v}, state, ctx)[0]["hv"]
                          for v in V])
    assert np.allclose(block["hv"], one, rtol=1e-12, atol=1e-12 * np.abs(one).max())


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


def _sketching(monkeypatch):
    """Sketch (12 products) whenever CG took a product; count the sketch rounds."""
    from constrfl.federation import base
    monkeypatch.setattr(newton, "SKETCH_AFTER", 0)
    monkeypatch.setattr(newton, "SKETCH_SIZE", 12)
    monkeypatch.setattr(newton, "SKETCH_MIN_SIZE", 4)
    sketches, original = [], base.Federation.broadcast

    def spy(self, kind, payload, *args, **kwargs):
        if kind == "newton.hvp" and payload["v"].size > payload["w"].size:
            sketches.append(payload["v"].size // payload["w"].size)
        return original(self, kind, payload, *args, **kwargs)
    monkeypatch.setattr(base.Federation, "broadcast", spy)
    return sketches


def test_a_preconditioned_newton_cg_solve_is_certified(monkeypatch):
    problem = _wide_problem()
    plain = cf.solve(problem, inner="newton-cg")
    sketches = _sketching(monkeypatch)
    res = cf.solve(problem, inner="newton-cg")
    assert sketches and set(sketches) == {12}
    assert res.status == "optimal"
    assert cf.kkt(problem, res.w, res.multipliers).meets(1e-6, 1e-6)
    assert cf.certify(problem, res).ok
    assert np.max(np.abs(res.w - plain.w)) < 1e-4
    assert res.rounds < plain.rounds


def test_a_sketching_solve_interrupted_resumes_bit_for_bit(monkeypatch, tmp_path):
    """The sketch is solver state: a solve interrupted after a sketch round, saved and
    loaded, resumes to the uninterrupted solve bit for bit."""
    problem = _wide_problem()
    sketches = _sketching(monkeypatch)
    cf.solve(problem, inner="newton-cg")
    whole = len(sketches)                      # a whole solve's sketches
    assert whole > 2
    full, again = builders.resume_after_interrupt(      # stopped after its second sketch
        monkeypatch, tmp_path, problem, lambda seen: len(sketches) >= 2 * whole + 2,
        inner="newton-cg")
    assert again.w.tobytes() == full.w.tobytes()
    assert (again.rounds, again.bytes_up) == (full.rounds, full.bytes_up)
