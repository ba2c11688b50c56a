"""solve(): statuses, reproducibility, message accounting, options, the KKT code on a
closed form, and the demo."""
import os
import subprocess
import sys

import numpy as np
import pytest

import constrfl as cf
from constrfl.exactsum import RING_BYTES
from constrfl.maxima import SIZE
from constrfl import functions as fn, prox
from builders import count_metric_rows, np_problem
from constrfl.problems import neyman_pearson


def box_qp(a, upper):
    """min ½‖w − a‖² s.t. w ≤ upper (one client, one vector constraint): closed form
    w* = min(a, upper), μ* = [a − upper]₊."""
    return cf.Problem([cf.Client(objective=fn.Quadratic(np.eye(a.size), -a),
                                 constraints=[fn.Affine(np.eye(a.size), -upper)],
                                 name="only")])


def test_kkt_at_closed_form():
    a, up = np.array([2.0, -1.0, 0.5]), np.array([1.0, 1.0, 1.0])
    p = box_qp(a, up)
    w, mu = np.minimum(a, up), np.maximum(a - up, 0.0)
    k = cf.kkt(p, w, {"only": (mu, [])})
    assert k.stationarity <= 1e-15 and k.feasibility == 0 and k.complementarity == 0
    assert k.definition1 == 0
    k = cf.kkt(p, w, {"only": (mu + [0.1, 0.0, 0.0], [])})
    assert k.stationarity == pytest.approx(0.1)
    k = cf.kkt(p, w + [0.0, 0.0, 0.7], {"only": (mu, [])})
    assert k.feasibility == pytest.approx(0.2) and k.definition1 == pytest.approx(0.2)
    k = cf.kkt(p, w, {"only": (mu + [0.0, 0.3, 0.0], [])})     # μ > 0 on a slack row
    assert k.complementarity == pytest.approx(0.3) and k.definition1 == pytest.approx(2.0)


@pytest.mark.parametrize("method", ["fedproxal", "cproxal"])
def test_closed_form_vector_constraint(method):
    a, up = np.array([2.0, -1.0, 0.5]), np.array([1.0, 1.0, 1.0])
    res = cf.solve(box_qp(a, up), method=method, tol=1e-8)
    assert res.status == "optimal"
    assert np.allclose(res.w, np.minimum(a, up), atol=1e-7)
    assert np.allclose(res.multipliers["only"].ineq, np.maximum(a - up, 0), atol=1e-6)
    assert res.multipliers["server"].ineq.size == 0


def test_bit_identical_reruns():
    p = np_problem(5, 0.4, server_separation=0.7)
    r1 = cf.solve(p, method="fedproxal", seed=7)
    r2 = cf.solve(p, method="fedproxal", seed=7)
    assert r1.w.tobytes() == r2.w.tobytes()
    assert r1.rounds == r2.rounds and r1.bytes_up == r2.bytes_up
    assert [h["stationarity"] for h in r1.history] == [h["stationarity"] for h in r2.history]


def test_message_accounting(monkeypatch):
    """inner="admm".  Rounds: one start-up round, one per ADMM iteration, one per outer
    iteration (the multiplier/KKT round, which also starts the next subproblem).
    Entries per client (ρ="auto": each block chooses its first ρᵢ), 8 bytes each down
    and 32 each up (every upload is a sum field in the exact sum's ring):
    start-up    down w, β, k, γ, cold, metric, adaptive, local_max_iter, local_hessian,
                and the row-scaling range (``scaling="rows"``)
                up ρᵢ, Rᵢvᵢ (no metric: cold), and the KKT share at w⁰ (∇ℓᵢ, ∇fᵢ, fᵢ
                and 5 sketches of a largest value, ``maxima.SIZE`` each: feasibility,
                complementarity, Definition 1, the scale S₂'s two terms)
    ADMM round  down w, τ                                   up eᵢ, Rᵢvᵢ, ρᵢ, κᵢ²
    outer       down w, β, k, γ, cold, metric, adaptive, local_max_iter, local_hessian
                up the KKT share with the multiplier step, and the ADMM block's ρᵢ,
                Rᵢvᵢ and JᵢᵀJᵢ's d(d+1)/2 entries (zeros for a block without rows:
                the constraints it expects active)"""
    rows = count_metric_rows(monkeypatch)
    p = np_problem(5, 0.4)
    res = cf.solve(p, method="fedproxal", inner="admm")
    n, d, K, T = 5, p.dim, res.outer_iterations, res.inner_iterations
    assert res.rounds == 1 + T + K
    assert len(rows) == n * K and sum(rows) > 0
    assert res.bytes_down == 8 * n * ((d + 9) + T * (d + 1) + K * (d + 8))
    tri = d * (d + 1) // 2
    share = 2 * d + 1 + 5 * SIZE
    assert res.bytes_up == RING_BYTES * (n * ((1 + d) + share + T * (2 * d + 2)
                                              + K * ((share + 1) + 1 + d))
                                         + tri * len(rows))
    assert res.history[-1]["rounds"] == res.rounds
    assert [h["k"] for h in res.history] == list(range(K))


def test_message_accounting_federated_newton(monkeypatch):
    """inner="newton": every round evaluates each client's AL term once with its
    gradient and Hessian (at the first trial point); a line-search round also asks for
    its value at 7 shorter steps.  Rounds: the start-up, the evaluation rounds and one
    per outer iteration, which carries the next subproblem's first evaluation (but after
    the last when the solve ended on the KKT ride).  The evaluations and KKT shares are
    counted by spying on one client's AL term and share.  (Without the next start
    ahead, whose rounds evaluate twice: tests/test_next_start.py.)
    Floats per client: down w, order, the subproblem's number (+ β on the start-up and
    outer rounds, + the row-scaling range on the start-up;
    + x and 7 step lengths on a line-search round; + the kkt flag on a ride); up (32
    bytes an entry: sums) the values (1, or 8 on a line-search round), the gradient,
    the Hessian triangle and whether the client has none, and on the outer rounds and
    rides the KKT share: ∇ℓᵢ, ∇fᵢ, fᵢ
    and 5 sketches (``maxima.SIZE`` entries each), and but on the first the multiplier
    step."""
    from constrfl.parties import al, newton
    from constrfl.solvers import newton as solvers_newton
    from constrfl import augmented
    calls = {0: 0, 1: 0, 2: 0}
    shares = {"al": 0, "ride": 0}
    original = augmented.AugmentedTerm.__call__

    def spy(self, w, order=2, around=None):
        if self.party.name == "client-0":
            calls[order] += 1
        return original(self, w, order, around)

    values = augmented.AugmentedTerm.values

    def spy_values(self, W):                # the line search's values: order 0 each
        if self.party.name == "client-0":
            calls[0] += len(W)
        return values(self, W)

    def spy_share(where, share):
        def counted(party, *args):
            shares[where] += party.name == "client-0"
            return share(party, *args)
        return counted

    monkeypatch.setattr(augmented.AugmentedTerm, "__call__", spy)
    monkeypatch.setattr(augmented.AugmentedTerm, "values", spy_values)
    monkeypatch.setattr(al, "kkt_share", spy_share("al", al.kkt_share))
    monkeypatch.setattr(newton, "kkt_share", spy_share("ride", newton.kkt_share))
    monkeypatch.setattr(solvers_newton, "AHEAD_RESIDUAL", 0.0)
    monkeypatch.setattr(solvers_newton, "AHEAD_REDUCTION", 0.0)
    p = np_problem(5, 0.4)
    res = cf.solve(p, inner="newton")
    n, d = 5, p.dim
    assert res.status == "optimal"
    assert calls[1] == 0 and calls[2] == res.rounds     # one full evaluation per round
    searches = calls[0] // 7
    assert calls[0] == 7 * searches and searches > 0
    outer, rides = shares["al"], shares["ride"]         # al.begin and al.update rounds
    assert rides > 0 and outer == res.outer_iterations  # the ride took the last al.update
    plain = res.rounds - searches - outer               # evaluations after a short step
    tri = d * (d + 1) // 2
    assert res.bytes_down == 8 * n * (1 + outer * (d + 2) + plain * (d + 1)
                                      + searches * (2 * d + 8) + rides + res.rounds)
    share = 2 * d + 1 + 5 * SIZE
    assert res.bytes_up == RING_BYTES * n * (res.rounds * (2 + d + tri) + searches * 7
                                             + (outer + rides) * (share + 1) - 1)


def test_options_belong_to_their_method():
    p = np_problem(2, 0.4, rows=200)
    with pytest.raises(TypeError, match=r"do not apply to method 'fedavg': \['beta'\]"):
        cf.solve(p, method="fedavg", beta=300.0, penalty="quadratic")
    with pytest.raises(ValueError, match=r"inner must be one of \('auto', 'admm', 'newton', 'newton-cg', 'newton-basis'\)"):
        cf.solve(p, inner="bfgs")
    with pytest.raises(TypeError, match=r"with inner='newton', chosen by inner='auto' for "
                                        r"d=\d+: \['rho'\]"):
        cf.solve(p, rho=0.1)                       # an ADMM option: say inner="admm"


def test_auto_chooses_by_dimension_and_regularizer():
    from constrfl.api import choose_inner
    assert choose_inner(500, cf.prox.L1(0.1)) == "newton"
    # only sums (the default): the Hessian's sum with a smooth P up to d = 2,000
    assert choose_inner(2000, cf.prox.SquaredL2(0.1)) == "newton"
    assert choose_inner(2001, cf.prox.SquaredL2(0.1)) == "newton-cg"
    assert choose_inner(2001, cf.prox.Zero()) == "newton-cg"
    assert choose_inner(2001, cf.prox.SquaredL2(np.full(2001, 0.1))) == "newton-cg"
    # ... while a round's Hessian triangles fit AUTO_NEWTON_MAX_BYTES (32 bytes an entry)
    from constrfl.settings import AUTO_NEWTON_MAX_BYTES
    most = int(AUTO_NEWTON_MAX_BYTES // (32 * 2000 * 2001 / 2))           # 62 clients
    assert choose_inner(2000, cf.prox.SquaredL2(0.1), clients=most) == "newton"
    assert choose_inner(2000, cf.prox.SquaredL2(0.1), clients=most + 1) == "newton-cg"
    assert choose_inner(20, cf.prox.L1(0.1), clients=10 ** 5) == "newton"
    assert choose_inner(500, cf.prox.L1(0.1), clients=10 ** 4) == "admm"
    assert choose_inner(501, cf.prox.L1(0.1)) == "newton"                 # not smooth
    # ... and with a P that is not smooth up to d = 2,000 (its step to a forcing
    # sequence above d = 1,000)
    assert choose_inner(2000, cf.prox.Box(-1.0, 1.0)) == "newton"
    assert choose_inner(2000, cf.prox.L1(0.1)) == "newton"
    assert choose_inner(2001, cf.prox.L1(0.1)) == "admm"
    assert choose_inner(2001, cf.prox.Box(-1.0, 1.0)) == "admm"
    assert choose_inner(2001, cf.prox.ElasticNet(0.0, 0.1)) == "newton-cg"    # a ridge
    # only sums: the parties' compact forms are never chosen
    assert choose_inner(501, cf.prox.L1(0.1), [("gram", 4000, 10)] * 2) == "newton"
    assert choose_inner(5000, cf.prox.Zero(), [("basis", 5000 * 200, 200)] * 20) == \
        "newton-cg"

    def disclosed(*args):
        return choose_inner(*args, private=False)
    assert disclosed(501, cf.prox.SquaredL2(0.1)) == "newton-cg"
    # every party with a compact Hessian the server can hold: newton-basis, any P
    assert disclosed(501, cf.prox.L1(0.1), [("gram", 4000, 10)] * 2) == "newton-basis"
    assert disclosed(5000, cf.prox.Zero(), [("basis", 5000 * 200, 200)] * 20) == \
        "newton-basis"                                   # 4,000 rows in all: 6.4e10 flops
    assert disclosed(5000, cf.prox.Zero(), [("basis", 5000 * 500, 500)] * 10) == \
        "newton-cg"                                      # 5,000 rows in all: 1.25e11 flops
    assert disclosed(501, cf.prox.L1(0.1), [("gram", 4000, 10), None]) == "newton"
    assert disclosed(501, cf.prox.Zero(), [("gram", 5e7, 10)]) == "newton-cg"  # 10 GB
    assert disclosed(2001, cf.prox.L1(0.1), [("gram", 5e7, 10)]) == "admm"
    # sparse entries the server can hold but not afford a step: Newton-CG where P is
    # smooth, newton-basis where the alternative is the ADMM
    assert disclosed(100000, cf.prox.Zero(), [("gram", 2.6e6, 500)] * 10) == "newton-cg"
    assert disclosed(100000, cf.prox.L1(0.1), [("gram", 2.6e6, 500)] * 10) == \
        "newton-basis"
    assert disclosed(500, cf.prox.Zero(), [("gram", 4000, 10)]) == "newton"
    res = cf.solve(np_problem(2, 0.4, rows=200))
    assert res.settings["inner"] == "newton" and res.settings["beta"] == 100.0
    assert cf.solve(np_problem(2, 0.4, rows=200), inner="admm",
                    max_outer=1).settings["beta"] == 2000.0


def test_infeasible_detected():
    c = [fn.Affine(np.array([1.0, 0.0]), 1.0), fn.Affine(np.array([-1.0, 0.0]), 1.0)]  # w₁ ≤ −1, w₁ ≥ 1
    p = cf.Problem([cf.Client(objective=fn.Quadratic(np.eye(2)), constraints=c[:1], name="a"),
                    cf.Client(constraints=c[1:], name="b")])
    for method in ("fedproxal", "cproxal"):
        res = cf.solve(p, method=method, beta=10.0)
        assert res.status == "infeasible", (method, res.message)
        assert res.kkt.feasibility > 0.5


def test_max_iterations_names_failing_residual():
    res = cf.solve(np_problem(5, 0.4), max_outer=1)
    assert res.status == "max_iterations"
    assert "stationarity" in res.message or "Definition 1" in res.message
    assert not res.success


@pytest.mark.parametrize("local_solver", ["auto", "newton-cg"])
def test_rho_samples_and_lbfgs_path(local_solver):
    """ρᵢ ∝ Nᵢ, and a Custom objective without a Hessian (local L-BFGS, also where
    Newton-CG was asked for: the Custom has no Hessian products either)."""
    p = np_problem(4, 0.4, rows=500)
    assert cf.solve(p, inner="admm", rho="samples").status == "optimal"
    a = np.array([1.0, 2.0, -3.0])
    f = fn.Custom(lambda w: 0.5 * np.sum((w - a) ** 2) + 0.25 * np.sum(w ** 4),
                  lambda w: (w - a) + w ** 3, dim=3)
    q = cf.Problem([cf.Client(objective=f, constraints=[fn.Affine(np.ones(3), -0.5)])])
    res = cf.solve(q, inner="admm", tol=1e-7, local_solver=local_solver)
    ref = cf.solve(cf.Problem([cf.Client(
        objective=fn.Custom(f._value, f._grad, lambda w: np.eye(3) + np.diag(3 * w ** 2), dim=3),
        constraints=[fn.Affine(np.ones(3), -0.5)])]), method="cproxal", tol=1e-9)
    assert res.status == "optimal" and np.allclose(res.w, ref.w, atol=1e-6)


def test_verbose_table_and_callback(capsys):
    seen = []
    res = cf.solve(np_problem(2, 0.4, rows=200), verbose=True, callback=seen.append)
    out = capsys.readouterr().out
    assert "stationarity" in out and f"status: {res.status}" in out
    assert len(out.strip().splitlines()) == len(res.history) + 3
    assert len(seen) == len(res.history) and "multipliers_prev" in seen[0]


def test_regularizer_domain_and_server_only_constraints():
    """Server-only constraint, L1Ball regularizer: certified against cvxpy."""
    p0 = np_problem(3, 0.5, rows=300)
    server = cf.Server(constraints=[fn.Affine(np.r_[np.ones(5), 0.0], -0.3)])
    p = cf.Problem(p0.clients, server=server, regularizer=prox.L1Ball(1.5))
    res = cf.solve(p, method="fedproxal", tol=1e-6)
    assert res.status == "optimal", res.message
    cert = cf.certify(p, res)
    assert cert.objective_gap <= 1e-6 and cert.w_distance <= 1e-4
    assert np.abs(res.w).sum() == pytest.approx(1.5, abs=1e-9)     # ball active


def test_demo_runs_and_says_nothing_on_stderr_when_compiling_afresh(tmp_path):
    """The user's first command, as on a fresh install (no compiled kernels cached): no
    warning reaches the terminal (numba's pedantic inliner check did)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "constrfl.demo", "--clients", "3"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert "status: optimal" in out.stdout and "relative objective gap" in out.stdout


@pytest.mark.parametrize("local_solver", ["lbfgs", "newton-cg"])
def test_iterative_local_solvers_match_newton(local_solver):
    p = np_problem(3, 0.4, rows=300)
    a = cf.solve(p, inner="admm", local_solver="newton", tol=1e-7)
    b = cf.solve(p, inner="admm", local_solver=local_solver, tol=1e-7)
    assert a.status == b.status == "optimal"
    assert b.settings["local_solver"] == local_solver
    assert np.max(np.abs(a.w - b.w)) <= 1e-5


def test_newton_cg_local_solver_is_certified_with_l1():
    """The ADMM whose clients solve (19) by Newton-CG (the default above d = 500), on
    NP with ℓ1 over 4 clients, 30 features: certified against cvxpy on the pooled
    problem."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 30))
    y = (X[:, 0] + 0.3 * rng.standard_normal(200) > 0).astype(int)
    p = neyman_pearson(X, y, np.repeat(np.arange(4), 50), 0.4, regularizer=prox.L1(1e-2))
    res = cf.solve(p, inner="admm", local_solver="newton-cg")
    assert res.status == "optimal", res.message
    cert = cf.certify(p, res)
    assert cert.ok, str(cert)
    assert np.any(res.w == 0)                             # ℓ1 at work


@pytest.mark.parametrize("extra", [0, 1])
def test_lbfgs_above_the_limit_runs_with_one_blas_thread(extra):
    """NumPy's and SciPy's OpenBLAS pools must not alternate in L-BFGS (constrfl.local:
    ~8 ms a switch on two cores): above LBFGS_ONE_THREAD_ABOVE every BLAS library runs
    one thread while L-BFGS evaluates (after minimize_smooth's first evaluation, which
    finds no Hessian); at the limit the user's setting stands.  The answer is the closed
    form: the minimizer a of ½‖x − a‖²."""
    from threadpoolctl import threadpool_info, threadpool_limits
    from constrfl.local import LBFGS_ONE_THREAD_ABOVE, minimize_smooth
    d = LBFGS_ONE_THREAD_ABOVE + extra
    a = np.linspace(-1.0, 1.0, d)
    seen = []

    def fun(x, order=2):
        seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        return 0.5 * float((x - a) @ (x - a)), x - a, None
    with threadpool_limits(2, user_api="blas"):
        res = minimize_smooth(fun, np.zeros(d), 1e-10)
    assert res.converged and np.max(np.abs(res.x - a)) <= 1e-10
    assert len(seen) > 2
    if 2 not in seen[0]:
        pytest.skip("no BLAS here runs two threads (one core, or built for one)")
    assert all(threads == ({1} if extra else seen[0]) for threads in seen[1:])


@pytest.mark.parametrize("extra, expected", [(0, "newton"), (1, "newton-cg")])
def test_local_solver_auto_forms_no_dense_hessian_above_the_limit(extra, expected):
    from constrfl.api import AUTO_NEWTON_MAX_DIM
    d = AUTO_NEWTON_MAX_DIM + extra
    p = cf.Problem([cf.Client(objective=fn.Quadratic(np.eye(d)), name="a")])
    res = cf.solve(p, inner="admm", max_outer=1)
    assert res.settings["local_solver"] == expected
    assert cf.solve(p, inner="admm", local_solver="newton", max_outer=1) \
        .settings["local_solver"] == "newton"


def test_certify_refuses_what_it_cannot_check():
    f = fn.Custom(lambda w: 0.5 * w @ w, lambda w: w, dim=2)
    p = cf.Problem([cf.Client(objective=f, name="custom")])
    with pytest.raises(TypeError, match=r"client 'custom': objective: Custom has no cvxpy form"):
        cf.certify(p, np.zeros(2))
    g = fn.Quadratic(np.eye(2))
    q = cf.Problem([cf.Client(objective=g, constraints=[g - fn.Quadratic(2 * np.eye(2)) + 1.0],
                              name="dc")])
    with pytest.raises(ValueError, match=r"client 'dc': constraints\[0\] is nonconvex.*no convex ground truth"):
        cf.certify(q, np.zeros(2))


def test_minimize_smooth_by_hessian_products():
    """Without a Hessian, minimize_smooth takes truncated Newton steps from Hessian
    products (conjugate gradients), to the tolerance asked for; the answer is checked
    on the closed-form gradient of f(x) = ½xᵀAx − bᵀx + ¼Σxⱼ⁴ (zero at the minimizer),
    reached with fewer gradients than L-BFGS takes.  Where a product is None, the
    result is L-BFGS's, bit for bit."""
    from constrfl.local import minimize_smooth
    rng = np.random.default_rng(3)
    d = 60
    B = rng.standard_normal((d, d))
    A, b = B @ B.T / d + 0.1 * np.eye(d), rng.standard_normal(d)
    calls = []

    def fun(x, order=2):
        calls.append(order)
        val = 0.5 * x @ A @ x - b @ x + 0.25 * np.sum(x ** 4)
        return val, A @ x - b + x ** 3, None

    res = minimize_smooth(fun, np.zeros(d), 1e-10, use_hessian=False,
                          operator=lambda x: lambda v: A @ v + 3 * x ** 2 * v)
    assert res.converged and np.max(np.abs(A @ res.x - b + res.x ** 3)) <= 1e-10
    products, calls[:] = len(calls), []
    lbfgs = minimize_smooth(fun, np.zeros(d), 1e-6, use_hessian=False)
    assert lbfgs.converged and products < len(calls)
    fallback = minimize_smooth(fun, np.zeros(d), 1e-6, use_hessian=False,
                               operator=lambda x: lambda v: None)
    assert fallback.x.tobytes() == lbfgs.x.tobytes()
