"""One specification of the ADMM block step (constrfl.block): its compiled
implementation (kernels.stacked_admm_step, parties.admm._compiled_step) and its generic one
(parties.admm._block_step), each forced here, agree on every branch of the step: each
outcome of the local Newton method's acceptance test (Armijo, the stalled-f halving of
the residual, a rejection and a shorter step, every step rejected), its stops (at the
start point, converged, out of iterations), a penalty that changes (ρᵢ' ≠ ρᵢ, and the
spectral rule over rounds), with and without a penalty metric Jᵢ, on dense and CSR rows,
with inequalities; a party with equalities, or an exact quadratic block, is the generic
step's, and the handler says so once (compiled_block).  Where the kernel hands back (a
value not finite, a Hessian not positive definite) the handler takes the generic step:
tests/test_stacked.py.  An exact block keeps its eigendecomposition on the party's context
(not in its state, no module-level cache)."""
import math
from collections import Counter

import numpy as np
import pytest

import constrfl as cf
from constrfl import Client, functions as fn, kernels as K
from constrfl.federation.runtime import PartyRuntime, dispatch
from constrfl.parties import PartyContext, admm as H, init_state
from constrfl import block, local
from constrfl.block import ARMIJO, RELAXATION, compiled_block, exact_block

d = 6
_r = np.random.default_rng(7)
X1, X2 = _r.standard_normal((25, d)), _r.standard_normal((18, d))
Xsp = np.zeros((80, d))
Xsp[np.arange(80), _r.integers(1, d, 80)] = 1.0              # one-hot rows: a CSR
Xsp[:, 0] = _r.standard_normal(80) * (_r.random(80) < 0.3)
ysp = (_r.random(80) < 0.5).astype(float)
LAYOUTS = {
    "dense": lambda: Client(0.05 * fn.LogisticLoss(X1, np.zeros(25)),
                            [fn.LogisticLoss(X2, np.ones(18)) - 0.2]),
    "csr": lambda: Client(fn.LogisticLoss(Xsp, ysp),
                          [fn.LogisticLoss(Xsp[:40], np.ones(40)) - 0.3]),
}
#: (u's scale, ρᵢ, tolerance, local_max_iter): a start far from (19)'s solution at a
#: small penalty (long Newton steps, some cut back), a tolerance of 0 (Newton runs into
#: rounding: stalled values, rejected steps, out of iterations), a start that already
#: meets the tolerance, and two iterations only
SCENARIOS = {"far": (30.0, 1e-3, 1e-10, 30), "tight": (1.0, 0.8, 0.0, 30),
             "at the start": (1.0, 0.8, 1e2, 30), "two iterations": (1.0, 0.8, 0.0, 2)}
SEEDS = range(6)


def block_state(party, r, scale=1.0, rows=0, rho=0.8, max_iter=100):
    """A block's state inside a subproblem (after ``admm.start``), drawn from ``r``."""
    return {"beta": 3.0, "mu": r.random(party.n_ineq), "nu": np.zeros(party.n_eq),
            "gamma": 0.05, "wk": r.standard_normal(d), "u": scale * r.standard_normal(d),
            "lam": r.standard_normal(d), "rho": rho, "local_hessian": True,
            "local_max_iter": max_iter, "adaptive": False,
            "J": r.standard_normal((rows, d))}


def close(a, b, rel=1e-12):
    """a = b to ``rel`` relative to the largest entry of b."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert np.max(np.abs(a - b), initial=0.0) <= rel * np.max(np.abs(b), initial=0.0)


@pytest.fixture
def traced(monkeypatch):
    """The generic path's acceptance decisions (``armijo``, ``stall``: the halving of the
    residual where f stalls, ``reject``) and its local solves' results, as it runs."""
    record = {"steps": [], "solves": []}
    accept, minimize = local.accept_step, H.minimize_smooth

    def spy_accept(f_new, f, slope, t, r_new, r):
        ok = accept(f_new, f, slope, t, r_new, r)
        armijo = math.isfinite(f_new) and f_new <= f + ARMIJO * t * slope
        record["steps"].append("armijo" if armijo else "stall" if ok else "reject")
        return ok

    def spy_minimize(*args, **kwargs):
        record["solves"].append(minimize(*args, **kwargs))
        return record["solves"][-1]
    monkeypatch.setattr(local, "accept_step", spy_accept)
    monkeypatch.setattr(H, "minimize_smooth", spy_minimize)
    return record


# -- the acceptance test -------------------------------------------------------------------

ACCEPTANCE = [   # (f_new, f, slope, t, r_new, r), accepted, the branch
    ((0.5, 1.0, -1.0, 1.0, 0.9, 1.0), True, "Armijo"),
    ((1.0 - ARMIJO * 0.25, 1.0, -1.0, 0.25, 0.9, 1.0), True, "Armijo, on the boundary"),
    ((1.0, 1.0, -1.0, 1.0, 0.5, 1.0), True, "stall: residual halved, f not up"),
    ((1.0 + 1e-13, 1.0, -1e-20, 1.0, 0.4, 1.0), True, "stall: f up within 1e-12(1 + |f|)"),
    ((1.0 + 1e-11, 1.0, -1e-20, 1.0, 0.4, 1.0), False, "stall: f up too much"),
    ((1.0, 1.0, -1.0, 1.0, 0.6, 1.0), False, "residual not halved"),
    ((1.0, 1.0, -1.0, 1.0, math.nan, 1.0), False, "residual not known"),
    ((math.nan, 1.0, -1.0, 1.0, 0.1, 1.0), False, "value NaN"),
    ((math.inf, 1.0, -1.0, 1.0, 0.1, 1.0), False, "value +inf"),
    ((-math.inf, 1.0, -1.0, 1.0, 0.1, 1.0), False, "value -inf"),
    ((-3e8, -3e8, -1e-30, 1e-12, 0.1, 1.0), True, "f at rounding level, large |f|"),
]


@pytest.mark.parametrize("args, accepted, branch", ACCEPTANCE,
                         ids=[c[2] for c in ACCEPTANCE])
def test_one_acceptance_test_compiled_and_python(args, accepted, branch):
    """The compiled local Newton, the Python one and the server's Newton (accept_step,
    None for a residual it does not know) take the same decision on each branch."""
    r_new = None if math.isnan(args[4]) else args[4]
    assert K.step_accepted(*args) is accepted
    assert bool(K.step_accepted.py_func(*args)) is accepted
    assert bool(local.accept_step(*args[:4], r_new, args[5])) is accepted
    assert block.step_accepted is K.step_accepted        # one definition


# -- the block step, each path forced ------------------------------------------------------

@pytest.mark.parametrize("rows", [0, 2], ids=["no metric", "metric"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_compiled_and_generic_block_steps_agree_on_every_branch(layout, rows, traced):
    """Over the scenarios and seeds, both paths give the same eᵢ and κᵢ bit for bit (the
    same compiled evaluation, the same arithmetic), and uᵢ⁺, λᵢ⁺, vᵢ to 1e-12 (two
    Newton solves: LAPACK's Cholesky and the kernel's own); the local Newton took the
    same number of iterations to the same outcome; where it took no step everything is
    bit for bit.  Together the runs take every branch of the acceptance test."""
    party = LAYOUTS[layout]()
    assert compiled_block(party, True) and not compiled_block(party, False)
    assert isinstance(party.stacked.X, np.ndarray) == (layout == "dense")
    seen = Counter()
    for name, (scale, rho, tol, max_iter) in SCENARIOS.items():
        for seed in SEEDS:
            r = np.random.default_rng(seed)
            state = block_state(party, r, scale, rows, rho, max_iter)
            w, rho_next = r.standard_normal(d), 1.3 * rho       # ρᵢ changes
            traced["steps"].clear()
            ref = H._block_step(state, PartyContext(party), w, rho_next, tol)
            got = H._compiled_step(state, party, w, rho_next, tol)
            assert got is not None, (name, seed)
            np.testing.assert_array_equal(got[0], ref[0])                 # eᵢ
            assert got[1] == ref[1]                                       # κᵢ
            for a, b in zip(got[2:], ref[2:]):                            # uᵢ⁺, λᵢ⁺, vᵢ
                close(a, b)
            solve = traced["solves"][-1]
            # the kernel's local Newton on the same (19): same iterations and outcome
            alpha = state["gamma"] + rho_next
            w_hat = RELAXATION * w + (1.0 - RELAXATION) * state["u"]
            m = (state["gamma"] * state["wk"] + rho_next * w_hat - state["lam"]) / alpha
            x, iterations, _, status = K.stacked_minimize(
                *party.stacked.kernel_args(state["beta"], state["mu"], True), alpha, m,
                state["u"], tol, max_iter, state["J"], w_hat)
            assert (iterations, status == 1) == (solve.iterations, solve.converged)
            close(x, solve.x)
            if solve.iterations == 0:
                for a, b in zip(got, ref):
                    np.testing.assert_array_equal(a, b)
                seen["at the start"] += 1
            elif not solve.converged:
                seen["out of iterations"] += solve.iterations == max_iter
            seen.update(traced["steps"])
    assert {"armijo", "stall", "reject", "at the start", "out of iterations"} <= set(seen)
    assert len(K.stacked_admm_step.signatures) <= 2    # dense and CSR, compiled once
    assert len(K.stacked_minimize.signatures) <= 2
    assert len(K.step_accepted.signatures) == 1


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_step_rejected(layout, monkeypatch, traced):
    """The line search running out (t < 10⁻¹²) cannot happen on a finite convex φᵢ (a
    step short enough leaves x and f as they are, which Armijo accepts), so it is
    forced: the acceptance test rejects everything, in the generic path and in the
    kernel's source run as Python.  Both stop at the start point, not converged, and
    the block step goes on from it alike, bit for bit."""
    party = LAYOUTS[layout]()
    state = block_state(party, np.random.default_rng(3), rows=2)
    w = np.random.default_rng(4).standard_normal(d)
    monkeypatch.setattr(local, "accept_step", lambda *args: False)
    ref = H._block_step(state, PartyContext(party), w, 1.1, 1e-10)
    assert not traced["solves"][-1].converged and traced["solves"][-1].iterations == 0
    monkeypatch.setattr(K, "step_accepted", lambda *args: False)
    monkeypatch.setattr(K, "_dot", lambda a, b: float(a @ b))        # a jit-only helper
    monkeypatch.setattr(K, "stacked_minimize", K.stacked_minimize.py_func)
    args = party.stacked.kernel_args(state["beta"], state["mu"], True)
    e, kappa, u, lam, status = K.stacked_admm_step.py_func(
        *args, state["gamma"], state["wk"], w, state["u"], state["lam"], state["rho"], 1.1,
        state["J"], RELAXATION, 1e-10, 100)
    assert status == 0
    for a, b in zip((e, kappa, u, lam), ref):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(u, state["u"])


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_rounds_of_the_handler_with_the_spectral_rule(layout, monkeypatch):
    """Fifteen ``admm.step`` rounds with the adaptive penalty (ρᵢ changes every
    SPECTRAL_EVERY rounds) and a metric: the handler on the compiled path and, forced,
    on the generic one reply the same eᵢ, vᵢ, ρᵢ, κᵢ to 1e-12."""
    party = LAYOUTS[layout]()
    start = dict(block_state(party, np.random.default_rng(5), rows=2), adaptive=True,
                 updates=0, age=0)
    ws = np.random.default_rng(6).standard_normal((15, d)) * 0.3
    runs = []
    for compiled in (True, False):
        monkeypatch.setattr(H, "compiled_block", lambda party, hessian: compiled)
        state, replies = start, []
        for w in ws:
            reply, state = H.admm_step({"w": w, "tol": 1e-8}, state, PartyContext(party))
            replies.append(reply)
        runs.append(replies)
    rhos = [r["rho"] for r in runs[0]]
    assert len(set(rhos)) >= 3                               # ρᵢ changed, twice at least
    for got, ref in zip(*runs):
        for key in ("e", "Rv", "rho", "definition1_sq"):
            close(got[key], ref[key])


# -- the blocks that are the generic step's ------------------------------------------------

def test_a_party_with_equalities_takes_the_generic_step():
    """The kernel has no equalities: compiled_block refuses such a party even with
    stacked rows, and the handler's reply is the generic step's, bit for bit."""
    party = Client(fn.LogisticLoss(X1, (X1[:, 1] > 0).astype(float)),
                   [fn.LogisticLoss(X2, np.ones(18)) - 0.6],
                   [fn.Affine(_r.standard_normal((2, d)), np.ones(2))])
    assert party.stacked is not None and not compiled_block(party, True)
    r = np.random.default_rng(8)
    state = dict(block_state(party, r, rows=3), nu=r.standard_normal(2))
    w = r.standard_normal(d)
    reply, _ = H.admm_step({"w": w, "tol": 1e-10}, state, PartyContext(party))
    ref = H._block_step(state, PartyContext(party), w, state["rho"], 1e-10)
    Rv = K.metric_times(state["rho"], state["J"], ref[2]) + ref[3]        # Rᵢuᵢ + λᵢ
    for key, value in zip(("e", "definition1_sq", "Rv"), (ref[0], ref[1], Rv)):
        np.testing.assert_array_equal(reply[key], value)


def quadratic_party():
    """A block whose φᵢ is a convex quadratic: least squares, an affine equality."""
    return Client(fn.LeastSquares(X1, X1 @ np.arange(d)),
                  equalities=[fn.Affine(np.ones(d), -1.0)])


def test_an_exact_block_keeps_its_eigendecomposition_on_its_site():
    """A quadratic block (stacked rows, yet exact: one linear solve beats Newton) keeps
    ∇²φᵢ = Q diag(λ) Qᵀ on its context (what the party holds for the solve, never
    serialized) for the (β, γ) it was computed at: reused while they stay (the same
    arrays), recomputed when β changes; never in its state."""
    party = quadratic_party()
    assert exact_block(party, True) and not exact_block(party, False)
    assert party.stacked is not None and not compiled_block(party, True)
    wk = np.random.default_rng(9).standard_normal(d)
    msg = {"w": wk, "beta": 10.0, "gamma": 0.01, "cold": True, "local_max_iter": 100,
           "local_hessian": True, "adaptive": False, "metric": True, "rho": 0.3}
    ctx = PartyContext(party)
    _, state = dispatch("al.begin+admm.start", msg, init_state(party), ctx)
    w = wk + 0.1
    reply, state = dispatch("admm.step", {"w": w, "tol": 1e-9}, state, ctx)
    key, (Q, eig) = ctx._memo["eigen"]
    assert key == (10.0, 0.01)
    close(Q @ np.diag(eig) @ Q.T, H._phi(state, party)(wk, 2)[2], 1e-13)
    _, again = dispatch("admm.step", {"w": w + 0.1, "tol": 1e-9}, state, ctx)
    assert ctx._memo["eigen"][1][0] is Q                               # reused
    _, state = dispatch("al.update+admm.start", dict(msg, beta=20.0, cold=False), again,
                        ctx)
    _, state = dispatch("admm.step", {"w": w, "tol": 1e-9}, state, ctx)
    key, (Q20, _) = ctx._memo["eigen"]
    assert key == (20.0, 0.01) and Q20 is not Q
    assert not [k for s in (state, again) for k in s if k.startswith("eigen")]
    assert not hasattr(H, "_EIGEN")                                     # no hidden cache


def test_a_scaled_exact_block_keeps_its_eigendecomposition_on_its_scaled_site():
    """Under a scaling the handlers see the context's scaled view (built once per scaling,
    kept on the context): the eigendecomposition is the scaled φᵢ's, on that view."""
    party = quadratic_party()
    ctx = PartyContext(party)
    D = np.linspace(0.5, 2.0, d)
    wk = np.random.default_rng(11).standard_normal(d)
    _, state = dispatch("scale.stats", {"w": wk}, init_state(party), ctx)
    msg = {"w": wk, "beta": 10.0, "gamma": 0.01, "cold": True, "local_max_iter": 100,
           "local_hessian": True, "adaptive": False, "metric": True, "rho": 0.3,
           "scale_columns": D, "scale_objective": 0.5}
    _, state = dispatch("al.begin+admm.start", msg, state, ctx)
    view = ctx.view(state)
    assert view is not ctx and ctx.view(state) is view                # built once
    assert view.party is not party and "eigen" not in ctx._memo
    dispatch("admm.step", {"w": wk + 0.1, "tol": 1e-9}, state, ctx)
    _, (Q, eig) = view._memo["eigen"]
    close(Q @ np.diag(eig) @ Q.T, H._phi(state, view.party)(wk, 2)[2], 1e-13)
    assert ctx.view(dict(state, scale_objective=0.25)) is not view     # another scaling


def test_a_solve_of_exact_blocks_resumes_bit_for_bit(tmp_path):
    """The parties' states hold no eigendecomposition, yet a solve stopped after its
    first outer iteration, saved and loaded, resumes to the uninterrupted answer (the
    sites decompose again); so does a state saved with the ``eigen_*`` fields of the
    previous version, whatever they hold (they are dropped on loading)."""
    p = cf.Problem([Client(fn.LeastSquares(X, X @ np.arange(d) + k), name=f"c{k}",
                           equalities=[fn.Affine(np.ones(d), -1.0 - k)])
                    for k, X in enumerate((X1, X2, X1[::-1]))])
    full = cf.solve(p, inner="admm")
    res = cf.solve(p, inner="admm", callback=lambda r: r["k"] == 1)
    assert res.status == "stopped"
    assert not [k for s in res.state["parties"].values() for k in s["state"]
                if k.startswith("eigen")]
    again = cf.solve(p, resume=cf.load_result(res.save(tmp_path / "stopped")))
    assert again.w.tobytes() == full.w.tobytes() and again.rounds == full.rounds
    for s in res.state["parties"].values():                 # as the previous version saved
        s["state"].update(eigen_at=np.array([1.0, 2.0]), eigen_vectors=np.eye(d),
                          eigen_values=np.ones(d))
    old = cf.load_result(res.save(tmp_path / "old"))
    assert all("eigen_vectors" in s["state"] for s in old.state["parties"].values())
    again = cf.solve(p, resume=old)
    assert again.w.tobytes() == full.w.tobytes() and again.rounds == full.rounds
    assert not [k for s in again.state["parties"].values() for k in s["state"]
                if k.startswith("eigen")]


def test_the_state_of_an_exact_block_is_small_plain_data():
    """What a site stores every message (Flower's site state) holds no
    eigendecomposition (d² floats); one stored by the previous version, with it, loads
    into a runtime without it."""
    codec = pytest.importorskip("constrfl.flower.codec")
    party = quadratic_party()
    state = block_state(party, np.random.default_rng(10))
    reply, state = H.admm_step({"w": np.ones(d), "tol": 1e-9}, state, PartyContext(party))
    assert not [k for k in state if k.startswith("eigen")]
    snapshot = {"state": state, "seq": 3, "reply": reply}
    back, _ = codec.unpack_state(codec.pack_state(snapshot, {}))
    assert back["state"].keys() == state.keys()
    for key in state:
        np.testing.assert_array_equal(back["state"][key], state[key])
    legacy = dict(snapshot, state=dict(state, eigen_at=np.array([10.0, 0.01]),
                                       eigen_vectors=np.eye(d), eigen_values=np.ones(d)))
    back, _ = codec.unpack_state(codec.pack_state(legacy, {}))
    assert PartyRuntime(PartyContext(party), back).state.keys() == state.keys()
