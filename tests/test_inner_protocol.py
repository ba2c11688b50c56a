"""The inner solvers keep the contract the outer loop relies on
(:class:`constrfl.solvers.inner.InnerSolver`): each has what proximal_al calls, and a
solve's subproblem state has what it reads."""
import pytest

import constrfl as cf
from constrfl.solvers.admm import ADMM
from constrfl.solvers.inner import InnerSolver, InnerState
from constrfl.solvers.newton import Newton

from builders import np_problem


@pytest.mark.parametrize("inner", ["admm", "newton", "newton-cg"])
def test_the_inner_solvers_keep_the_contract(inner):
    res = cf.solve(np_problem(3), inner=inner, max_outer=1)
    state = res.state["solver"].inner
    assert isinstance(state, InnerState), type(state).__name__


def test_the_protocol_is_checked():
    assert isinstance(ADMM(["a"], None, cf.prox.Zero(), (1e-6, 1e-6), max_iter=10,
                           adaptive_rho=True, local_max_iter=10, local_solver="newton",
                           dim=3), InnerSolver)
    assert isinstance(Newton(cf.prox.Zero(), 3, 10), InnerSolver)
    assert not isinstance(object(), InnerSolver)
