"""One block's side of Algorithm 2 (the ``admm.*`` handlers), run as the pure functions
they are: the exact local step on a quadratic φᵢ, the first penalty and the spectral
rule against formulas computed here, the carried-over state; and the server's w-step
with the blocks' penalty metrics."""
import numpy as np
import pytest

import constrfl as cf
from constrfl.federation.runtime import dispatch
from constrfl.messages import pack_upper
from constrfl.parties import PartyContext, admm as handlers, init_state
from constrfl.solvers.admm import ADMM
from constrfl.augmented import AugmentedTerm, plus_quadratic

from builders import lcqp_problem, np_problem


def test_constant_hessian_parties():
    assert all(c.constant_hessian for c in lcqp_problem().clients)
    assert not any(c.constant_hessian for c in np_problem(3).clients)   # logistic + c ≤ 0


def started(client, wk, local_hessian=True, rho=0.3, adaptive=False, cold=True,
            **extra):
    state = init_state(client)
    msg = {"w": wk, "beta": 10.0, "gamma": 0.01, "cold": cold, "local_max_iter": 100,
           "local_hessian": local_hessian, "adaptive": adaptive, "metric": True, **extra}
    if rho is not None:
        msg["rho"] = rho
    return dispatch("al.begin+admm.start", msg, state, PartyContext(client))


def phi_of(client, state, wk):
    return plus_quadratic(AugmentedTerm(client, 10.0, state["mu"], state["nu"]), 0.01, wk)


def test_quadratic_local_step_is_exact():
    """With φᵢ quadratic, (19) is one solve with the cached eigendecomposition of ∇²φᵢ;
    its result makes the gradient of φᵢ + ⟨λ, u − ŵ⟩ + ρ/2‖u − ŵ‖² vanish to rounding
    (ŵ = α·w + (1 − α)·uᵢ the over-relaxed point, α = ``RELAXATION``) for two ρ values
    (no refactoring when ρ changes), λ moves by ρ(u − ŵ), and eᵢ uses the ρᵢ, uᵢ, λᵢ
    the server's step used."""
    client = lcqp_problem().clients[0]
    rng = np.random.default_rng(0)
    wk = rng.standard_normal(client.objective.dim)
    reply, state = started(client, wk)
    assert np.array_equal(reply["Rv"], 0.3 * wk) and reply["rho"] == 0.3   # cold: λ = 0
    phi = phi_of(client, state, wk)
    for rho in (0.3, 1.2):
        state = dict(state, rho=rho)
        w, lam, u = wk + rng.standard_normal(wk.size), state["lam"], state["u"]
        reply, state = dispatch("admm.step", {"w": w, "tol": 1e-3}, state, PartyContext(client))
        assert reply["rho"] == rho == state["rho"]                      # not adaptive
        alpha = handlers.RELAXATION
        w_hat = alpha * w + (1 - alpha) * u
        sub = plus_quadratic(phi, rho, w_hat - lam / rho)
        g = sub(state["u"], 1)[1]
        assert np.max(np.abs(g)) <= 1e-9 * max(1.0, np.max(np.abs(sub(w, 1)[1])))
        assert np.allclose(state["lam"], lam + rho * (state["u"] - w_hat), rtol=0,
                           atol=1e-12)
        assert np.allclose(reply["e"], phi(w, 1)[1] + lam - rho * (w - u), rtol=0,
                           atol=1e-12)
        assert np.allclose(reply["Rv"], rho * state["u"] + state["lam"], rtol=0, atol=1e-12)


def test_quadratic_local_step_is_exact_with_a_gauss_newton_penalty():
    """With the penalty Rᵢ = ρᵢI + JᵢᵀJᵢ, (19) is still one exact solve (Woodbury over
    the rows of Jᵢ): the gradient of φᵢ + ⟨λ, u − ŵ⟩ + ½‖u − ŵ‖²_R vanishes, λ moves by
    R(u − ŵ), eᵢ uses the server's R, and Rᵢvᵢ = Rᵢuᵢ + λᵢ."""
    client = lcqp_problem().clients[0]
    rng = np.random.default_rng(1)
    wk = rng.standard_normal(client.objective.dim)
    _, state = started(client, wk)
    J = rng.standard_normal((2, wk.size))
    state = dict(state, J=J, lam=rng.standard_normal(wk.size))
    phi, rho = phi_of(client, state, wk), state["rho"]
    R = rho * np.eye(wk.size) + J.T @ J
    w, lam, u = wk + rng.standard_normal(wk.size), state["lam"], state["u"]
    reply, state = dispatch("admm.step", {"w": w, "tol": 1e-3}, state, PartyContext(client))
    alpha = handlers.RELAXATION
    w_hat = alpha * w + (1 - alpha) * u
    x = state["u"]
    g = phi(x, 1)[1] + lam + R @ (x - w_hat)
    assert np.max(np.abs(g)) <= 1e-9 * max(1.0, np.max(np.abs(phi(w, 1)[1])))
    np.testing.assert_allclose(state["lam"], lam + R @ (x - w_hat), rtol=0, atol=1e-10)
    np.testing.assert_allclose(reply["e"], phi(w, 1)[1] + lam - R @ (w - u), rtol=0,
                               atol=1e-10)
    np.testing.assert_allclose(reply["Rv"], R @ x + state["lam"], rtol=0, atol=1e-10)


def test_first_penalty_is_the_geometric_mean_of_the_curvature():
    """Without a given ρ: det(∇²φᵢ(wᵏ))^(1/d), so scaling a block's objective by s
    scales its first ρᵢ by about s (exactly, but for the proximal share γ)."""
    client = np_problem(3).clients[0]
    wk = np.full(client.objective.dim, 0.1)
    reply, state = started(client, wk, rho=None)
    H = phi_of(client, state, wk)(wk, 2)[2]
    sign, logdet = np.linalg.slogdet(H)
    assert sign > 0 and np.isclose(reply["rho"], np.exp(logdet / len(wk)), rtol=1e-10)


def test_spectral_rule_every_five_rounds():
    """ρᵢ changes only every ``SPECTRAL_EVERY`` rounds, to ρ^(1−a)·r^a with
    r = ‖Δλᵢ‖₂/‖Δw‖₂ over those rounds (computed here from the states) and the weight
    of the j-th change a = ``SPECTRAL_WEIGHT``/(1 + (j/``SPECTRAL_HORIZON``)²)."""
    client = np_problem(3).clients[0]
    rng = np.random.default_rng(4)
    wk = np.full(client.objective.dim, 0.1)
    _, state = started(client, wk, adaptive=True)
    every, a = handlers.SPECTRAL_EVERY, handlers.SPECTRAL_WEIGHT
    seen = []
    for t in range(3 * every + 1):
        w = wk + 0.05 * rng.standard_normal(wk.size)
        seen.append((w, state["lam"], state["rho"]))
        reply, state = dispatch("admm.step", {"w": w, "tol": 1e-8}, state, PartyContext(client))
        if t % every:
            assert reply["rho"] == seen[-1][2]
        elif t:
            (w0, lam0, _), rho = seen[t - every], seen[-1][2]
            r = np.linalg.norm(seen[-1][1] - lam0) / np.linalg.norm(w - w0)
            aj = a / (1 + (t // every - 1) ** 2 / handlers.SPECTRAL_HORIZON ** 2)
            assert np.isclose(reply["rho"], rho ** (1 - aj) * r ** aj, rtol=1e-12)
            assert reply["rho"] != rho


def test_warm_start_carries_the_block_over():
    """A later subproblem (not cold) keeps uᵢ, λᵢ, ρᵢ; its penalty metric Jᵢ is √β times
    the gradients at wᵏ of the constraints it expects active (μ⁺ > 0 or μ⁺ + βc > 0); it
    uploads (to be summed) ρᵢ, JᵢᵀJᵢ and Rᵢvᵢ = Rᵢuᵢ + λᵢ for its new penalty
    Rᵢ = ρᵢI + JᵢᵀJᵢ, and no multiplier."""
    client = np_problem(3).clients[0]
    wk = np.full(client.objective.dim, 0.1)
    _, state = started(client, wk)
    _, state = dispatch("admm.step", {"w": wk + 0.05, "tol": 1e-8}, state, PartyContext(client))
    msg = {"w": wk + 0.02, "beta": 20.0, "gamma": 0.005, "cold": False,
           "local_max_iter": 100, "local_hessian": True, "adaptive": False, "metric": True}
    reply, new = dispatch("al.update+admm.start", msg, state, PartyContext(client))
    assert set(reply) == {"lagrangian_grad", "objective_grad", "objective",
                          "feasibility_max", "complementarity_max", "definition1_max",
                          "linear_max", "offset_max", "multiplier_step_sq", "rho", "Rv",
                          "metric"}
    assert all(np.array_equal(new[k], state[k]) for k in ("u", "lam")) and \
        new["rho"] == state["rho"] and "w_last" not in new
    c, Jc = client.c_value_jac(msg["w"])
    active = (new["mu"] > 0) | (new["mu"] + 20.0 * c > 0)
    assert active.any()
    J = new["J"]
    np.testing.assert_allclose(J, np.sqrt(20.0) * Jc[active], rtol=1e-14)
    np.testing.assert_array_equal(reply["metric"], pack_upper(J.T @ J))
    assert reply["rho"] == new["rho"]
    np.testing.assert_allclose(reply["Rv"], new["rho"] * new["u"] + J.T @ (J @ new["u"])
                               + new["lam"], rtol=1e-14)
    off = dict(msg, metric=False)
    reply, _ = dispatch("al.update+admm.start", off, state, PartyContext(client))
    assert "metric" not in reply
    np.testing.assert_allclose(reply["Rv"], state["rho"] * state["u"] + state["lam"],
                               rtol=1e-15)


def test_handlers_are_pure():
    """The same message on the same state gives the same reply; the state passed in is
    not changed (a handler returns a new dict)."""
    client = np_problem(3).clients[0]
    wk = np.full(client.objective.dim, 0.1)
    _, state = started(client, wk, adaptive=True)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()}
    msg = {"w": wk + 0.05, "tol": 1e-8}
    r1, s1 = dispatch("admm.step", msg, state, PartyContext(client))
    r2, s2 = dispatch("admm.step", msg, state, PartyContext(client))
    assert all(np.array_equal(r1[k], r2[k]) for k in r1)
    assert all(np.array_equal(state[k], before[k]) for k in before)
    assert not np.array_equal(s1["u"], state["u"])


def test_lbfgs_option_keeps_the_iterative_local_solver():
    """local_hessian=False: (19) by L-BFGS (scipy's L-BFGS-B, which may stop a little
    above the tolerance asked for: the certificate eᵢ is exact whatever uᵢ is)."""
    client = lcqp_problem().clients[0]
    wk = np.zeros(client.objective.dim)
    _, state = started(client, wk, local_hessian=False)
    w = wk + 0.1
    reply, new = dispatch("admm.step", {"w": w, "tol": 1e-6}, state, PartyContext(client))
    phi = phi_of(client, state, wk)
    alpha = handlers.RELAXATION
    w_hat = alpha * w + (1 - alpha) * state["u"]
    sub = plus_quadratic(phi, new["rho"], w_hat - state["lam"] / new["rho"])
    g = np.max(np.abs(sub(new["u"], 1)[1]))
    assert 1e-12 < g <= 1e-5          # iterative: small, but not solved to rounding


def test_newton_cg_local_solver_solves_the_block_by_products():
    """local_products: (19) by Newton-CG on the AL term's Hessian products, to the
    tolerance asked for (the gradient of φᵢ + ⟨λ, u − ŵ⟩ + ρ/2‖u − ŵ‖² at uᵢ⁺, from the
    functions themselves); a party whose product would form its d×d Hessian (a Custom
    with ``hess``) takes L-BFGS instead: the same uᵢ⁺ as ``local_hessian=False``, bit
    for bit."""
    client = np_problem(2, 0.4, rows=200).clients[0]
    d = client.objective.dim
    wk = np.zeros(d)
    _, state = started(client, wk, local_hessian=False, local_products=True)
    w = wk + 0.1
    reply, new = dispatch("admm.step", {"w": w, "tol": 1e-9}, state, PartyContext(client))
    w_hat = handlers.RELAXATION * w + (1 - handlers.RELAXATION) * state["u"]
    sub = plus_quadratic(phi_of(client, state, wk), new["rho"], w_hat - state["lam"] / new["rho"])
    assert np.max(np.abs(sub(new["u"], 1)[1])) <= 1e-9
    assert not client.dense_products
    f = client.objective
    custom = cf.Client(objective=cf.functions.Custom(f.value, f.grad, f.hess, dim=d),
                       constraints=client.constraints)
    assert custom.dense_products
    steps = []
    for extra in ({"local_products": True}, {}):
        _, s = started(custom, wk, local_hessian=False, **extra)
        steps.append(dispatch("admm.step", {"w": w, "tol": 1e-9}, s,
                              PartyContext(custom))[1]["u"])
    assert steps[0].tobytes() == steps[1].tobytes()


@pytest.mark.parametrize("rows", [(1, 0, 2), (9, 8, 7)])      # Woodbury; more rows than d
@pytest.mark.parametrize("ridge", [0.0, 0.3, "weighted"])
def test_w_step_with_penalty_metrics_is_the_exact_minimizer(rows, ridge):
    """(18) with Rᵢ = ρᵢI + JᵢᵀJᵢ from the sums the blocks send (Σρᵢ, ΣRᵢvᵢ, ΣJᵢᵀJᵢ):
    the gradient of P + γ/2‖w − wᵏ‖² + Σᵢ ½‖w − vᵢ‖²_Rᵢ vanishes at the server's w."""
    rng = np.random.default_rng(7)
    d, gamma = 6, 0.01
    lam = rng.random(d) if ridge == "weighted" else ridge
    P = cf.prox.SquaredL2(lam) if ridge else cf.prox.Zero()
    J = [30.0 * rng.standard_normal((r, d)) for r in rows]
    v = [rng.standard_normal(d) for _ in J]
    rho = [rng.random() for _ in J]
    sums = {"rho": sum(rho), "Rv": sum(r * vk + Jk.T @ (Jk @ vk) for r, vk, Jk in zip(rho, v, J)),
            "metric": pack_upper(sum(Jk.T @ Jk for Jk in J))}
    admm = ADMM(list("abc"), None, P, (1e-6, 1e-6), max_iter=10, adaptive_rho=True,
                local_max_iter=10, local_solver="newton", dim=d)
    s = admm.begin(sums, rng.standard_normal(d), 1e-6, 10.0)        # the blocks' sums
    w = admm.w_step(s, gamma)
    g = (lam * w if ridge else 0.0) + gamma * (w - s.wk) + sum(
        r * (w - vk) + Jk.T @ (Jk @ (w - vk)) for r, vk, Jk in zip(rho, v, J))
    scale = sum(np.abs(Jk.T @ (Jk @ vk)).max() for Jk, vk in zip(J, v))
    assert np.max(np.abs(g)) <= 1e-12 * scale
