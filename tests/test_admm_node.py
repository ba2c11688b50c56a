"""One block's side of Algorithm 2 (the ``admm.*`` handlers): the local step (19)–(20)
on a quadratic φᵢ, run as the pure functions they are."""
import numpy as np

from constrfl.federation.handlers import Site, dispatch, init_state
from constrfl.solvers.augmented import AugmentedTerm, plus_quadratic

from builders import lcqp_problem, np_problem


def test_constant_hessian_parties():
    assert all(c.constant_hessian for c in lcqp_problem().clients)
    assert not any(c.constant_hessian for c in np_problem(3).clients)   # logistic + c ≤ 0


def started(client, wk, local_hessian=True, rho=0.3):
    state = init_state(client)
    msg = {"w": wk, "beta": 10.0, "gamma": 0.01, "cold": False, "rho": rho,
           "local_max_iter": 100, "local_hessian": local_hessian}
    reply, state = dispatch("al.begin+admm.start", msg, state, Site(client))
    return reply, state


def test_quadratic_local_step_is_exact():
    """With φᵢ quadratic, (19) is one cached Cholesky solve; its result must make the
    gradient of φᵢ + ⟨λ, u − w⟩ + ρ/2‖u − w‖² vanish to rounding, for two ρ values
    (the factor is rebuilt when ρ changes)."""
    client = lcqp_problem().clients[0]
    rng = np.random.default_rng(0)
    wk = rng.standard_normal(client.objective.dim)
    reply, state = started(client, wk)
    phi = plus_quadratic(AugmentedTerm(client, 10.0, state["mu"], state["nu"]), 0.01, wk)
    assert np.allclose(reply["v"], wk - phi(wk, 1)[1] / 0.3)          # warm start λ = −∇φ
    for scale in (1.0, 4.0):
        w, lam_before = wk + rng.standard_normal(wk.size), state["lam"]
        reply, state = dispatch("admm.step", {"w": w, "scale": scale, "tol": 1e-3},
                                state, Site(client))             # tol: irrelevant (exact)
        rho = state["rho"]
        assert rho == 0.3 * scale and reply["rho"] == rho
        sub = plus_quadratic(phi, rho, w - lam_before / rho)
        g = sub(state["u"], 1)[1]
        assert np.max(np.abs(g)) <= 1e-9 * max(1.0, np.max(np.abs(sub(w, 1)[1])))
        assert np.allclose(state["lam"], lam_before + rho * (state["u"] - w), rtol=0,
                           atol=1e-12)


def test_handlers_are_pure():
    """The same message on the same state gives the same reply; the state passed in is
    not changed (a handler returns a new dict)."""
    client = np_problem(3).clients[0]
    wk = np.full(client.objective.dim, 0.1)
    _, state = started(client, wk)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()}
    msg = {"w": wk + 0.05, "scale": 1.0, "tol": 1e-8}
    r1, s1 = dispatch("admm.step", msg, state, Site(client))
    r2, s2 = dispatch("admm.step", msg, state, Site(client))
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
    reply, new = dispatch("admm.step", {"w": w, "scale": 1.0, "tol": 1e-6}, state,
                          Site(client))
    phi = plus_quadratic(AugmentedTerm(client, 10.0, state["mu"], state["nu"]), 0.01, wk)
    sub = plus_quadratic(phi, new["rho"], w - state["lam"] / new["rho"])
    g = np.max(np.abs(sub(new["u"], 1)[1]))
    assert 1e-12 < g <= 1e-5          # iterative: small, but not solved to rounding
