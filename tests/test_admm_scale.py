"""The ADMM's penalty rule is scale-free: multiplying one client's rows by 100 (its
objective by 10⁴) leaves the rounds nearly unchanged.

The instances interpolate (bᵢ = Aᵢw★ exactly, the constraints inactive at w★), so the
solution is w★ whatever the clients' weights: the scaled and unscaled problems have
the same answer, and only the ADMM's conditioning differs.  A fixed ρ, the paper's
rule, is the contrast that shows the comparison can fail."""
import numpy as np

import constrfl as cf
from constrfl import functions as fn


def problem(scale, seed, n=6, d=8):
    rng = np.random.default_rng(seed)
    w_star = rng.standard_normal(d)
    clients = []
    for i in range(n):
        A = rng.standard_normal((40, d)) * rng.uniform(0.5, 2.0)
        a = rng.standard_normal((1, d))
        s = scale if i == 0 else 1.0
        clients.append(cf.Client(objective=fn.LeastSquares(s * A, s * (A @ w_star)),
                                 constraints=[fn.Affine(a, -(a @ w_star) - 0.5)]))
    p = cf.Problem(clients)
    p.w_star = w_star
    return p


def rounds(scale, seeds=(0, 1, 2), **opts):
    total = 0
    for seed in seeds:
        p = problem(scale, seed)
        res = cf.solve(p, inner="admm", **opts)
        assert res.status == "optimal", res.message
        assert np.max(np.abs(res.w - p.w_star)) <= 1e-5        # the closed-form answer
        total += res.rounds
    return total


def test_rounds_insensitive_to_one_clients_scale():
    plain, scaled = rounds(1.0), rounds(100.0)
    assert scaled <= 1.2 * plain and plain <= 1.2 * scaled, (plain, scaled)


def test_a_fixed_penalty_is_not():
    """The paper's fixed ρ on the same pair: the scaled problem's first subproblem is not
    solved within 5× the rounds of the unscaled one's (whole solves, measured at
    β = 100: 373 against 20,597 rounds)."""
    opts = dict(inner="admm", rho=0.1, adaptive_rho=False, max_outer=1)
    plain = cf.solve(problem(1.0, 0), **opts)
    first = plain.history[0]
    assert first["inner_converged"]
    scaled = cf.solve(problem(100.0, 0), max_inner=5 * first["inner_iterations"], **opts)
    assert not scaled.history[0]["inner_converged"]
