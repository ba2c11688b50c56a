"""The server's Newton steps on a nonconvex subproblem: an indefinite Hessian (the
fairness template's difference-of-convex constraints) must still give a descent step.
Oracles: the definition of descent and closed forms for diagonal models."""
import numpy as np
import pytest

from constrfl import prox
from constrfl.solvers.local import newton_direction
from constrfl.solvers.proxstep import prox_newton_point


def _indefinite(seed, d=6):
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    lam = np.array([-3.0, -0.5, 0.2, 1.0, 4.0, 9.0])[:d]
    return (Q * lam) @ Q.T, Q, lam, rng.standard_normal(d)


def test_newton_direction_is_the_newton_step_for_a_positive_definite_hessian():
    H, g = np.array([[4.0, 1.0], [1.0, 3.0]]), np.array([1.0, -2.0])
    assert np.allclose(newton_direction(H, g), np.linalg.solve(H, -g), rtol=1e-14)


@pytest.mark.parametrize("seed", range(5))
def test_newton_direction_descends_on_an_indefinite_hessian(seed):
    H, Q, lam, g = _indefinite(seed)
    d = newton_direction(H, g)
    assert g @ d < 0
    # modified Newton: the eigenvalues' absolute values, so the step keeps H's scale
    assert np.allclose(d, -Q @ ((Q.T @ g) / np.abs(lam)), rtol=1e-10, atol=1e-12)


def test_prox_newton_point_is_soft_thresholding_for_a_diagonal_model():
    h, g, x = np.array([2.0, 0.5, 4.0]), np.array([1.0, -0.3, 0.05]), np.array([0.2, -1.0, 0.0])
    P = prox.L1(0.1)
    z = prox_newton_point(x, g, np.diag(h), P, 1e-12)
    y = x - g / h                               # coordinatewise argmin of the model + λ|z|
    expected = np.sign(y) * np.maximum(np.abs(y) - 0.1 / h, 0.0)
    assert np.allclose(z, expected, atol=1e-10)


@pytest.mark.parametrize("seed", range(5))
def test_prox_newton_point_descends_on_an_indefinite_hessian(seed):
    H, Q, lam, g = _indefinite(seed)
    x, P = np.zeros(H.shape[0]), prox.L1(0.05)
    z = prox_newton_point(x, g, H, P, 1e-12)
    # the composite model's decrease, the slope of the line search, is negative ...
    assert g @ (z - x) + P.value(z) - P.value(x) < 0
    # ... because z is the prox-Newton point of the model with |H|'s eigenvalues
    Habs = (Q * np.abs(lam)) @ Q.T
    assert P.dist(z, g + Habs @ (z - x)) <= 1e-10
