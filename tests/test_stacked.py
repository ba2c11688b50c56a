"""Stacked row losses (constrfl.stacked): the one-pass AL term equals the term evaluated
function by function, the compiled local Newton takes minimize_smooth's steps, the
compiled ADMM block step equals the handler's generic one, and parties they cannot take
are evaluated as before."""
import numpy as np
import pytest
import scipy.sparse as sp

from constrfl import Client, functions as fn, kernels as K
from constrfl.errors import PartyError
from constrfl.parties import PartyContext
from constrfl.parties.admm import RELAXATION, _block_step, admm_step
from constrfl import augmented
from constrfl.augmented import AugmentedTerm, plus_gauss_newton, plus_quadratic
from constrfl.local import minimize_smooth
from constrfl.stacked import stacked_matrix

rng = np.random.default_rng(7)
d = 6
X1, X2, X3 = (rng.standard_normal((n, d)) for n in (25, 18, 30))
y1, y2 = (rng.random(25) < 0.4).astype(float), (rng.random(18) < 0.6).astype(float)
Xsp = np.zeros((80, d))
Xsp[np.arange(80), rng.integers(1, d, 80)] = 1.0            # one-hot rows: a CSR
Xsp[:, 0] = rng.standard_normal(80) * (rng.random(80) < 0.3)
ysp = (rng.random(80) < 0.5).astype(float)


def parties():
    La, Lb = fn.Cached(fn.LogisticLoss(X1, y1)), fn.Cached(fn.LogisticLoss(X2, y2))
    lsq = fn.LeastSquares(X3, X3 @ np.arange(d), sample_weight=rng.uniform(0.5, 2, 30))
    return {
        "neyman-pearson": Client(0.05 * fn.LogisticLoss(X1, np.zeros(25)),
                                 [fn.LogisticLoss(X2, np.ones(18)) - 0.2]),
        "fairness (shared Cached losses)": Client(0.3 * La + 0.7 * Lb,
                                                  [La - Lb - 0.01, Lb - La - 0.01]),
        "mixed kinds, weights": Client(lsq + 0.5 * fn.LogisticLoss(X1, y1),
                                       [2.0 * fn.LogisticLoss(X2, y2) - 0.3 * lsq - 0.1,
                                        fn.LogisticLoss(X1, y1, sample_weight=np.arange(1.0, 26))
                                        - 0.5]),
        "sparse rows": Client(fn.LogisticLoss(Xsp, ysp),
                              [fn.LogisticLoss(Xsp[:40], np.ones(40)) - 0.3]),
        "with an equality": Client(fn.LogisticLoss(X1, y1), [fn.LogisticLoss(X2, y2) - 0.6],
                                   [fn.Affine(rng.standard_normal((2, d)), np.ones(2))]),
        "constraints only": Client(constraints=[fn.LogisticLoss(X2, y2) - 0.4]),
        # issue 19: a dense X sparse enough to be held as CSR, in blocks of one shape
        "dense X held as CSR, equal blocks": Client(
            0.05 * fn.LogisticLoss(Xsp[:40], np.zeros(40)),
            [fn.LogisticLoss(Xsp[40:], np.ones(40)) - 0.2]),
        "a dense and a CSR block of one shape": Client(
            fn.LogisticLoss(X1, y1), [fn.LogisticLoss(Xsp[:25], np.ones(25)) - 0.3]),
    }


@pytest.mark.parametrize("name", list(parties()))
@pytest.mark.parametrize("objective", [True, False])
def test_hessian_operator_is_the_hessian(name, objective):
    """AugmentedTerm.hessian_operator(w) (the local Newton-CG's products: the (B4)
    weights once, two passes over the rows a product, or hessvec where the party has
    equalities) times v equals the AL term's Hessian, formed function by function,
    times v; with no, some and all constraint rows active."""
    party = parties()[name]
    w, v = rng.standard_normal(d), rng.standard_normal(d)
    for mu_scale in (0.0, 1.0, 50.0):
        mu = mu_scale * rng.random(party.n_ineq)
        nu = rng.standard_normal(party.n_eq)
        term = AugmentedTerm(party, 3.0, mu, nu, objective=objective)
        H = term._by_function(w, 2)[2] + 3.0 * party.h_jac(w).T @ party.h_jac(w)
        np.testing.assert_allclose(term.hessian_operator(w)(v), H @ v, rtol=1e-12,
                                   atol=1e-13)


def test_one_constraint_rows_product_has_numpys_bits():
    """StackedRows.hessian_times adds Lᵀ(Lv) a row at a time: with one active row the bits
    of NumPy's Xᵀdiag(ω)Xv + Lᵀ(Lv) (one product an entry), which the ADMM's rounds
    depend on."""
    stacked = parties()["neyman-pearson"].stacked
    w, v = rng.standard_normal(d), rng.standard_normal(d)
    omega, L = stacked.hessian_weights(w, 3.0, np.array([50.0]))
    assert L.shape[0] == 1
    numpy_form = K.gram_times(stacked.X, omega, v) + L.T @ (L @ v)
    assert stacked.hessian_times(omega, L, v).tobytes() == numpy_form.tobytes()


@pytest.mark.parametrize("name", list(parties()))
@pytest.mark.parametrize("objective", [True, False])
def test_one_pass_equals_function_by_function(name, objective):
    party = parties()[name]
    assert party.stacked is not None
    w = rng.standard_normal(d)
    for mu_scale in (0.0, 1.0, 50.0):         # inactive, some and all rows active
        mu = mu_scale * rng.random(party.n_ineq)
        nu = rng.standard_normal(party.n_eq)
        term = AugmentedTerm(party, 3.0, mu, nu, objective=objective)
        for order in (0, 1, 2):
            val, g, H = term(w, order)
            np.testing.assert_allclose(term.constraint_values(w)[0], party.c_value(w),
                                       rtol=1e-13, atol=1e-15)
            v0, g0, H0, c0 = term._by_function(w, order)
            h = party.h_value(w)
            v0 += (nu + 3.0 * h) @ (nu + 3.0 * h) / 6.0
            assert val == pytest.approx(v0, rel=1e-13, abs=1e-13)
            if order >= 1:
                g0 = g0 + party.h_jac(w).T @ (nu + 3.0 * h)
                np.testing.assert_allclose(g, g0, rtol=1e-12, atol=1e-13)
            else:
                assert g is None and H is None
            if order == 2:
                H0 += 3.0 * party.h_jac(w).T @ party.h_jac(w)
                np.testing.assert_allclose(H, H0, rtol=1e-12, atol=1e-13)
                np.testing.assert_array_equal(H, H.T)


@pytest.mark.parametrize("name", list(parties()))
@pytest.mark.parametrize("objective", [True, False])
def test_primal_dual_hessian(name, objective):
    """With ``around`` = x (the start of the Newton step x → w) the Hessian weighs the
    active rows' ∇²cⱼ(w) by θyⱼ + (1 − θ)pⱼ, yⱼ = [μⱼ + β(cⱼ(x) + ∇cⱼ(x)ᵀ(w − x))]₊,
    instead of pⱼ = [μⱼ + βcⱼ(w)]₊ (docs/algorithms.md (N3)), in the one pass and
    function by function alike: the matrix formed here from the functions' own
    derivatives; value and gradient as without ``around``.  A party with a nonconvex
    inequality keeps p (docs/algorithms.md §5: measured, y cost the fairness template
    rounds)."""
    party = parties()[name]
    pd = party.convex_curved_inequalities
    assert pd == (name not in ("fairness (shared Cached losses)", "mixed kinds, weights"))
    beta = 3.0
    w, x = rng.standard_normal(d), rng.standard_normal(d)
    for mu_scale in (0.0, 1.0, 50.0):
        mu = mu_scale * rng.random(party.n_ineq)
        nu = rng.standard_normal(party.n_eq)
        term = AugmentedTerm(party, beta, mu, nu, objective=objective)
        c, J = party.c_value_jac(w)
        cx, Jx = party.c_value_jac(x)
        p = np.maximum(mu + beta * c, 0.0)
        theta = augmented.PRIMAL_DUAL_SHARE
        weights = (np.where(p > 0, theta * np.maximum(mu + beta * (cx + Jx @ (w - x)), 0.0)
                            + (1 - theta) * p, 0.0) if pd else p)
        expected = ((party.f_hess(w) if objective else 0.0)
                    + beta * J[p > 0].T @ J[p > 0] + party.c_hess(w, weights)
                    + beta * party.h_jac(w).T @ party.h_jac(w))
        val, g, H = term(w, 2, around=x)
        val0, g0, H0 = term(w, 2)
        assert val == val0
        np.testing.assert_array_equal(g, g0)
        np.testing.assert_allclose(H, expected, rtol=1e-12, atol=1e-12)
        if pd:
            Hf = term._by_function(w, 2, term.linearized(w, x))[2]
            np.testing.assert_allclose(Hf + beta * party.h_jac(w).T @ party.h_jac(w),
                                       expected, rtol=1e-12, atol=1e-12)
        if p.any() and not np.allclose(weights, p):    # they differ: so does the matrix
            assert not np.allclose(H, H0, rtol=1e-9, atol=0)


def dense(M):
    """A kernels.CSR (row j: entries indptr[j]:indptr[j+1]) or a dense block as a
    dense array, written out entry by entry."""
    if isinstance(M, np.ndarray):
        return M
    out = np.zeros((len(M.indptr) - 1, M.ncols))
    for j in range(out.shape[0]):
        for k in range(M.indptr[j], M.indptr[j + 1]):
            out[j, M.indices[k]] += M.data[k]
    return out


def test_equal_blocks_of_a_dense_x_held_as_csr_stack():
    """Issue 19: blocks of one shape whose dense X the losses hold as CSR (and a dense
    block beside a CSR one) stack into the rows of the users' X, in the CSR layout."""
    for name in ("dense X held as CSR, equal blocks", "a dense and a CSR block of one shape"):
        party = parties()[name]
        losses = [party.objective.terms[0] if name.startswith("dense X") else party.objective,
                  party.constraints[0].terms[0]]
        assert isinstance(losses[-1]._Xk, K.CSR)                # the path that crashed
        assert losses[0].X.shape == losses[1].X.shape
        X = party.stacked.X
        assert isinstance(X, K.CSR)
        np.testing.assert_array_equal(dense(X), np.vstack([f.X for f in losses]))


def test_stacked_matrix_of_every_layout():
    """stacked_matrix equals numpy's vstack of the blocks for dense blocks, CSR blocks
    (from dense or scipy input, one starting mid-array), and mixtures."""
    A, B = Xsp[:30], Xsp[30:60]
    view = sp.csr_array(Xsp[20:50])
    shifted = K.CSR(view.indptr.astype(np.int64) + 3, np.r_[[0, 1, 2], view.indices],
                    np.r_[[7.0, 8.0, 9.0], view.data], d)     # entries before indptr[0]
    cases = [[A, B], [K.CSR.from_dense(A), K.CSR.from_dense(B)],
             [A, K.CSR.from_scipy(sp.csr_array(B))], [shifted, A, K.CSR.from_dense(B)]]
    for blocks in cases:
        got = stacked_matrix(blocks)
        assert isinstance(got, np.ndarray) == all(isinstance(b, np.ndarray) for b in blocks)
        np.testing.assert_array_equal(dense(got), np.vstack([dense(b) for b in blocks]))
    np.testing.assert_array_equal(dense(shifted), Xsp[20:50])


def test_parties_with_other_functions_are_not_stacked():
    A = np.eye(d)
    assert Client(fn.Quadratic(A), [fn.LogisticLoss(X2, y2) - 0.2]).stacked is None
    assert Client(fn.LogisticLoss(X1, y1), [fn.SquaredNorm() - 1.0]).stacked is None
    custom = fn.Custom(lambda w: w @ w, lambda w: 2 * w, dim=d)
    assert Client(fn.LogisticLoss(X1, y1) + custom).stacked is None
    vector = fn.Affine(rng.standard_normal((2, d)))
    assert Client(fn.LogisticLoss(X1, y1), [vector]).stacked is None


def test_a_nonfinite_evaluation_names_its_slot():
    """At a point where the one-pass evaluation is not finite, the term is evaluated
    function by function, whose error names the slot (as without stacking)."""
    party = parties()["neyman-pearson"]
    w = np.full(d, np.nan)
    with pytest.raises(PartyError, match="objective"):
        AugmentedTerm(party, 3.0, np.zeros(1), np.zeros(0))(w, 2)


@pytest.mark.parametrize("name", list(parties()) + ["not stacked"])
def test_values_at_several_points(name):
    """``values`` (the trial points of a Newton round) equals one evaluation per point
    and leaves the last evaluation (its cached constraint values) as it was."""
    party = (Client(fn.Quadratic(np.eye(d)), [fn.LogisticLoss(X2, y2) - 0.2],
                    [fn.Affine(np.ones(d), 1.0)])
             if name == "not stacked" else parties()[name])
    term = AugmentedTerm(party, 3.0, rng.random(party.n_ineq), rng.standard_normal(party.n_eq))
    w, W = rng.standard_normal(d), rng.standard_normal((3, d))
    term(w, 2)
    c_at_w = term.constraint_values(w)[0]
    values = term.values(W)
    assert term.constraint_values(w)[0] is c_at_w   # the evaluation at w stays cached
    assert term.values(W[:0]).shape == (0,)
    for x, v in zip(W, values):
        assert v == pytest.approx(term(x, 0)[0], rel=1e-14, abs=1e-15)


NO_EQUALITIES = [n for n in parties() if n != "with an equality"]


@pytest.mark.parametrize("rows", [0, 2])
@pytest.mark.parametrize("name", NO_EQUALITIES)
def test_compiled_local_newton_equals_the_generic_one(name, rows):
    """(19) by the compiled Newton, with ``rows`` rows of a Gauss-Newton term
    ½‖J(x − c)‖², takes the steps of minimize_smooth, and its answer is stationary by
    the function-by-function gradient."""
    party, r = parties()[name], np.random.default_rng(11)
    mu = r.random(party.n_ineq)
    term = AugmentedTerm(party, 3.0, mu, np.zeros(0))
    alpha, center, x0 = 0.7, r.standard_normal(d), r.standard_normal(d)
    J, jc = 2.0 * r.standard_normal((rows, d)), r.standard_normal(d)
    tol = 1e-10
    x, iterations, residual, status = K.stacked_minimize(
        *party.stacked.kernel_args(3.0, mu, True), alpha, center, x0, tol, 100, J, jc)
    fun = plus_quadratic(term, alpha, center)
    ref = minimize_smooth(plus_gauss_newton(fun, J, jc) if rows else fun, x0, tol)
    assert status == 1 and ref.converged and iterations == ref.iterations
    np.testing.assert_allclose(x, ref.x, rtol=0, atol=1e-11)
    g = term._by_function(x, 1)[1] + alpha * (x - center) + J.T @ (J @ (x - jc))
    assert residual <= tol and np.max(np.abs(g)) <= tol * (1 + 1e-6)


def test_compiled_local_newton_hands_back_an_indefinite_hessian():
    """A nonconvex stacked party (a negative loss weight): the compiled Newton stops at
    the indefinite Hessian, at its start point, with status −1."""
    party = Client(-1.0 * fn.LogisticLoss(X1, y1), [fn.LogisticLoss(X2, y2) - 0.2])
    x0 = 0.1 * np.ones(d)
    x, iterations, _, status = K.stacked_minimize(*party.stacked.kernel_args(3.0, np.zeros(1), True),
                                                  0.02, np.zeros(d), x0, 1e-9, 100,
                                                  np.zeros((0, d)), np.zeros(d))
    assert status == -1 and iterations == 0 and np.array_equal(x, x0)


@pytest.mark.parametrize("rows", [0, 2])
@pytest.mark.parametrize("name", NO_EQUALITIES)
def test_compiled_admm_block_step_equals_the_generic_one(name, rows):
    """The admm.step handler's compiled path (one kernel call) gives the eᵢ, κᵢ², uᵢ⁺
    and λᵢ⁺ of its function-by-function path, with the penalty ρᵢI + JᵢᵀJᵢ (``rows``
    rows of Jᵢ), and the handler replies with them (and Rᵢvᵢ = Rᵢuᵢ⁺ + λᵢ⁺)."""
    party, r = parties()[name], np.random.default_rng(12)
    state = {"beta": 3.0, "mu": r.random(party.n_ineq), "nu": np.zeros(0), "gamma": 0.05,
             "wk": r.standard_normal(d), "u": r.standard_normal(d),
             "lam": r.standard_normal(d), "rho": 0.8, "local_hessian": True,
             "local_max_iter": 100, "adaptive": False, "J": r.standard_normal((rows, d))}
    w, rho_next, tol = r.standard_normal(d), 1.3, 1e-10
    got = party.stacked.admm_step(state["beta"], state["mu"], state["gamma"], state["wk"],
                                  w, state["u"], state["lam"], state["rho"], rho_next,
                                  state["J"], RELAXATION, tol, 100)
    ref = _block_step(state, PartyContext(party), w, rho_next, tol)
    assert got is not None
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-13)     # eᵢ
    assert got[1] == pytest.approx(ref[1], rel=1e-12, abs=1e-30)            # κᵢ²
    for a, b in zip(got[2:], ref[2:]):                                      # uᵢ⁺, λᵢ⁺
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    reply, _ = admm_step({"w": w, "tol": tol}, dict(state, rho=rho_next), PartyContext(party, None))
    e, kappa_sq, u, lam = party.stacked.admm_step(
        state["beta"], state["mu"], state["gamma"], state["wk"], w, state["u"],
        state["lam"], rho_next, rho_next, state["J"], RELAXATION, tol, 100)
    np.testing.assert_array_equal(reply["Rv"], K.metric_times(rho_next, state["J"], u) + lam)
    assert reply["definition1_sq"] == kappa_sq


def test_admm_block_step_of_a_nonconvex_party_falls_back():
    """Where the compiled block step hands back (an indefinite Hessian), the handler
    replies with the function-by-function step."""
    party = Client(-1.0 * fn.LogisticLoss(X1, y1), [fn.LogisticLoss(X2, y2) - 0.2])
    state = {"beta": 3.0, "mu": np.zeros(1), "nu": np.zeros(0), "gamma": 0.0,
             "wk": np.zeros(d), "u": 0.1 * np.ones(d), "lam": np.zeros(d), "rho": 0.02,
             "local_hessian": True, "local_max_iter": 100, "adaptive": False,
             "J": np.zeros((0, d))}
    w = 0.2 * np.ones(d)
    assert party.stacked.admm_step(3.0, state["mu"], 0.0, state["wk"], w, state["u"],
                                   state["lam"], 0.02, 0.02, state["J"], RELAXATION, 1e-9,
                                   100) is None
    reply, _ = admm_step({"w": w, "tol": 1e-9}, state, PartyContext(party, None))
    ref = _block_step(state, PartyContext(party), w, 0.02, 1e-9)
    Rv = K.metric_times(0.02, state["J"], ref[2]) + ref[3]
    for key, value in zip(("e", "definition1_sq", "Rv"), (ref[0], ref[1], Rv)):
        np.testing.assert_array_equal(reply[key], value)


def test_admm_block_step_at_a_nonfinite_point_names_the_slot():
    """At a w where the compiled step's evaluation is not finite, the handler's
    function-by-function step runs, whose error names the slot."""
    party = parties()["neyman-pearson"]
    state = {"beta": 3.0, "mu": np.zeros(1), "nu": np.zeros(0), "gamma": 0.0,
             "wk": np.zeros(d), "u": np.zeros(d), "lam": np.zeros(d), "rho": 1.0,
             "local_hessian": True, "local_max_iter": 100, "adaptive": False,
             "J": np.zeros((0, d))}
    with pytest.raises(PartyError, match="objective"):
        admm_step({"w": np.full(d, np.nan), "tol": 1e-9}, state, PartyContext(party, None))
