"""Every way out of a solve returns a SolveResult with a truthful status.

A party function that raises at its k-th evaluation, or returns a NaN/inf value,
gradient or Hessian there, ends the solve with ``"client_error"`` or
``"numerical_error"`` naming the party and the slot; the result keeps the last good
iterate, whose KKT residuals (recomputed from scratch on an unbroken copy of the
problem) equal its history record.  Wrong shapes are named at the first evaluation."""
import numpy as np
import pytest

import constrfl as cf
from constrfl import functions as fn

R = 0.45
SOLVERS = {"admm": dict(method="fedproxal", inner="admm"),
           "newton": dict(method="fedproxal", inner="newton"),
           "newton-cg": dict(method="fedproxal", inner="newton-cg"),
           "cproxal": dict(method="cproxal"),
           "fedavg": dict(method="fedavg", penalty="quadratic", rounds=40)}


def data(seed=0, d=4):
    rng = np.random.default_rng(seed)
    X = np.c_[rng.standard_normal((80, d - 1)), np.ones(80)]
    y = (X @ np.r_[1.0, -1.0, 0.5, 0.0] + rng.standard_normal(80) > 0).astype(float)
    return X[y == 0], X[y == 1]


class Flaky:
    """A logistic constraint L(w) − R behind a Custom function whose ``slot`` (value,
    grad or hess) misbehaves (``mode``: raise, nan, inf) from its ``at``-th call on."""

    def __init__(self, X1, at=None, slot="value", mode="raise", hessian=True):
        self.L = fn.LogisticLoss(X1, np.ones(len(X1)))
        self.at, self.slot, self.mode, self.calls = at, slot, mode, 0
        self.f = fn.Custom(self.value, self.grad, self.hess if hessian else None,
                           dim=X1.shape[1])

    def _out(self, slot, x):
        self.calls += 1
        if self.at is not None and self.calls >= self.at and slot == self.slot:
            if self.mode == "raise":
                raise ZeroDivisionError("boom")
            return x * (np.nan if self.mode == "nan" else np.inf)
        return x

    def value(self, w):
        return self._out("value", self.L.value(w) - R)

    def grad(self, w):
        return self._out("grad", self.L.grad(w))

    def hess(self, w):
        return self._out("hess", self.L.hess(w))


def problem(flaky=None):
    """Three clients; the last one's constraint is ``flaky`` (a healthy one if None)."""
    clients = []
    for i in range(3):
        X0, X1 = data(i)
        con = (flaky if (flaky is not None and i == 2) else Flaky(X1)).f
        clients.append(cf.Client(objective=fn.LogisticLoss(X0, np.zeros(len(X0))),
                                 constraints=[con], name=f"site-{i}"))
    return cf.Problem(clients)


def evaluations(options, slot):
    """How often the healthy solve evaluates site-2's constraint (all slots, and
    ``slot``), and how often by the end of its first outer iteration (or round)."""
    X1 = data(2)[1]
    spy = Flaky(X1, at=None)
    counted = {"value": 0, "grad": 0, "hess": 0}
    original = spy._out
    first = []

    def count(s, x):
        counted[s] += 1
        return original(s, x)
    spy._out = count
    res = cf.solve(problem(spy), callback=lambda info: first.append(spy.calls) and None,
                   **options)
    assert res.status in ("optimal", "max_iterations")
    return spy.calls, counted[slot], first[0]


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("slot,mode", [("value", "raise"), ("grad", "raise"),
                                       ("value", "nan"), ("grad", "inf"), ("hess", "nan")])
def test_fault_in_a_party_function(solver, slot, mode):
    options = SOLVERS[solver]
    total, of_slot, first = evaluations(options, slot)
    if of_slot == 0:
        pytest.skip(f"{solver} never evaluates the {slot}")
    assert first < total - 1
    flaky = Flaky(data(2)[1], at=(first + total) // 2 + 1, slot=slot, mode=mode)
    res = cf.solve(problem(flaky), max_time=60, **options)
    want = "client_error" if mode == "raise" else "numerical_error"
    assert res.status == want, res.message
    assert "client 'site-2': constraints[0]" in res.message
    assert isinstance(res.error, cf.PartyError) and res.error.party == "site-2"
    if mode == "raise":
        assert isinstance(res.error.__cause__, ZeroDivisionError)
    else:
        assert "NaN or inf" in res.message
    assert np.all(np.isfinite(res.w))
    if solver != "fedavg":
        assert res.history, "the fault is set after the first outer iteration"
    last = res.history[-1] if res.history else None
    if last is not None and "stationarity" in last:
        again = cf.kkt(problem(), res.w, res.multipliers)     # unbroken copy
        for k in ("stationarity", "feasibility", "complementarity", "definition1"):
            assert getattr(again, k) == last[k] == getattr(res.kkt, k), k


@pytest.mark.parametrize("solver", ["admm", "newton", "newton-cg", "cproxal"])
def test_constraint_without_hessian_solves(solver):
    """A Custom constraint without a Hessian: L-BFGS locally (ADMM), a BFGS model at
    the server (Newton, cProx-AL), finite differences of the client's own gradients
    (Newton-CG); the same answer as with Hessians."""
    X1 = data(2)[1]
    blind = problem(Flaky(X1, hessian=False))
    ref = cf.solve(problem(), method="cproxal", tol=1e-9)
    res = cf.solve(blind, tol=1e-6, **SOLVERS[solver])
    assert res.status == "optimal", res.message
    assert np.max(np.abs(res.w - ref.w)) <= 1e-5
    assert ref.multipliers["site-2"].ineq[0] > 0.01       # the constraint is active


@pytest.mark.parametrize("what,bad,expect", [
    ("grad", lambda w: np.r_[w, 1.0], r"its gradient has shape \(5,\), expected \(4,\)"),
    ("grad", lambda w: 1.0, r"its gradient has shape \(\), expected \(4,\)"),
    ("hess", lambda w: np.eye(3), r"its Hessian has shape \(3, 3\), expected \(4, 4\)"),
    ("value", lambda w: np.ones(2), r"its value has shape \(2,\), expected \(\)"),
    ("value", lambda w: None, r"value(_grad)? raised TypeError: value returned None"),
    ("grad", lambda w: None, r"raised TypeError: grad returned None"),
])
@pytest.mark.parametrize("solver", ["admm", "newton"])
def test_wrong_shape_is_named_at_first_evaluation(solver, what, bad, expect):
    X0, X1 = data(0)
    L = fn.LogisticLoss(X0, np.zeros(len(X0)))
    parts = {"value": L.value, "grad": L.grad, "hess": L.hess}
    parts[what] = bad
    f = fn.Custom(parts["value"], parts["grad"], parts["hess"], dim=4)
    p = cf.Problem([cf.Client(objective=f, name="odd")])
    res = cf.solve(p, **SOLVERS[solver])
    assert res.status == "client_error"
    assert "client 'odd': objective" in res.message and res.outer_iterations == 0
    assert isinstance(res.error.__cause__, (ValueError, TypeError))
    import re
    assert re.search(expect, res.message), res.message


def test_server_function_error_names_the_server():
    X0, X1 = data(0)
    flaky = Flaky(X1, at=3, slot="value")
    p = cf.Problem([cf.Client(objective=fn.LogisticLoss(X0, np.zeros(len(X0))))],
                   server=cf.Server(constraints=[flaky.f]))
    res = cf.solve(p)
    assert res.status == "client_error" and "the server: constraints[0]" in res.message


def test_problem_does_not_rename_the_callers_clients():
    X0, _ = data(0)
    c = cf.Client(objective=fn.LogisticLoss(X0, np.zeros(len(X0))))
    p1, p2 = cf.Problem([c]), cf.Problem([c, c])
    assert c.name is None
    assert p1.client_names == ["client-0"] and p2.client_names == ["client-0", "client-1"]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_transposed_block_of_products_is_checked_in_place(bad):
    """A block of Hessian products comes back transposed (F-ordered): the finiteness
    check, one sum in memory order, passes the block itself on and finds a NaN or inf
    anywhere in it."""
    from constrfl.problem import _checked
    block = np.arange(12.0).reshape(4, 3).T
    assert block.flags.f_contiguous and not block.flags.c_contiguous
    assert _checked("constraints[0]", "Hessian product", block, (3, 4)) is block
    block[1, 2] = bad
    with pytest.raises(cf.PartyError) as err:
        _checked("constraints[0]", "Hessian product", block, (3, 4))
    assert err.value.status == "numerical_error" and "NaN or inf" in str(err.value)
