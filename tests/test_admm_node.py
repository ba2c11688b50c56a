"""One client's side of Algorithm 2: the local step (19)–(20) on a quadratic φᵢ."""
import numpy as np

from constrfl.solvers.admm import Node
from constrfl.solvers.augmented import plus_quadratic

from builders import lcqp_problem, np_problem


def test_constant_hessian_parties():
    assert all(c.constant_hessian for c in lcqp_problem().clients)
    assert not any(c.constant_hessian for c in np_problem(3).clients)   # logistic + c ≤ 0


def test_quadratic_local_step_is_exact():
    """With φᵢ quadratic, (19) is one cached Cholesky solve; its result must make the
    gradient of φᵢ + ⟨λ, u − w⟩ + ρ/2‖u − w‖² vanish to rounding, for two ρ values
    (the factor is rebuilt when ρ changes)."""
    client = lcqp_problem().clients[0]
    rng = np.random.default_rng(0)
    wk = rng.standard_normal(client.objective.dim)
    node = Node(client, rho=0.3)
    assert node.exact
    node.begin(wk, beta=10.0, gamma=0.01)
    for scale in (1.0, 4.0):
        w, lam_before = wk + rng.standard_normal(wk.size), node.lam.copy()
        node.step(w, tol=1e-3, scale=scale)          # tol is irrelevant for the exact step
        rho = node.rho
        sub = plus_quadratic(node.phi, rho, w - lam_before / rho)
        g = sub(node.u, 1)[1]
        assert np.max(np.abs(g)) <= 1e-9 * max(1.0, np.max(np.abs(sub(w, 1)[1])))
        assert np.allclose(node.lam, lam_before + rho * (node.u - w), rtol=0, atol=1e-12)


def test_lbfgs_option_keeps_the_iterative_local_solver():
    node = Node(lcqp_problem().clients[0], rho=0.3, local_solver="lbfgs")
    assert not node.exact
