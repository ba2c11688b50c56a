"""Acceptance 4: bad input raises ValueError/TypeError naming the culprit, before any
work; a non-finite value during the run ends with status "numerical_error"."""
import numpy as np
import pytest

import builders
import constrfl as cf
from constrfl import functions as fn, prox


def client(d=3, name=None, **kw):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, d))
    y = (X[:, 0] > 0).astype(float)
    kw.setdefault("objective", fn.LogisticLoss(X, y))
    return cf.Client(name=name, **kw)


def problem(n=2):
    return cf.Problem([client(name=f"site-{i}") for i in range(n)])


def test_dimension_mismatch_names_client():
    with pytest.raises(ValueError, match=r"client 'site-b'.*objective.*dimension 4.*expected 3"):
        cf.Problem([client(3, "site-a"), client(4, "site-b")])


def test_dimension_mismatch_within_client_names_slot():
    with pytest.raises(ValueError, match=r"client 'site-a'.*constraints\[0\].*dimension 2"):
        cf.Problem([client(3, "site-a", constraints=[fn.Affine(np.ones(2), 0.0)])])


def test_shape_mismatch_in_data_names_argument():
    with pytest.raises(ValueError, match=r"LogisticLoss: y has shape \(19,\).*X of shape \(20, 3\)"):
        fn.LogisticLoss(np.ones((20, 3)), np.ones(19))
    with pytest.raises(ValueError, match=r"Affine: d has shape \(3,\), expected \(2,\)"):
        fn.Affine(np.ones((2, 3)), np.ones(3))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_data_names_client_and_argument(bad):
    X = np.ones((5, 2))
    X[3, 1] = bad
    with pytest.raises(ValueError, match=r"client 'h7': constraints\[0\]: .*LogisticLoss: X contains NaN or inf \(first at index \(3, 1\)\)"):
        cf.Client(objective=fn.LeastSquares(np.ones((5, 2)), np.ones(5)),
                  constraints=[fn.LogisticLoss(X, np.ones(5)) - 0.2], name="h7")
    with pytest.raises(ValueError, match=r"server: objective: .*Quadratic: b contains NaN"):
        cf.Server(objective=fn.Quadratic(np.eye(2), [1.0, np.nan]))


def test_nonfinite_constant_offset():
    with pytest.raises(ValueError, match="NaN or inf constant"):
        fn.LeastSquares(np.ones((3, 2)), np.ones(3)) - np.nan


def test_empty_client_named():
    with pytest.raises(ValueError, match=r"client 'idle': has neither an objective nor constraints"):
        cf.Client(name="idle")


def test_non_affine_equality_named():
    with pytest.raises(ValueError, match=r"client 'eq': equalities\[0\] must be affine"):
        cf.Client(objective=fn.Quadratic(np.eye(2)), equalities=[fn.Quadratic(np.eye(2))],
                  name="eq")


def test_wrong_types_named():
    with pytest.raises(TypeError, match=r"client 'c': constraints\[1\] must be a constrfl Function"):
        cf.Client(objective=fn.Quadratic(np.eye(2)),
                  constraints=[fn.Affine(np.ones(2)), "w <= 1"], name="c")
    with pytest.raises(TypeError, match=r"clients\[1\] must be a constrfl.Client"):
        cf.Problem([client(), "not a client"])
    with pytest.raises(TypeError, match="regularizer"):
        cf.Problem([client()], regularizer=0.1)


def test_duplicate_client_names():
    with pytest.raises(ValueError, match=r"unique.*'a'"):
        cf.Problem([client(name="a"), client(name="a")])


@pytest.mark.parametrize("arg,value,pattern", [
    ("beta", 0.0, "beta must be a finite positive number"),
    ("beta", -1.0, "beta must be a finite positive number"),
    ("beta", np.nan, "beta must be a finite positive number"),
    ("rho", 0.0, "rho must be a finite positive number"),
    ("rho", np.inf, "rho must be a finite positive number"),
    ("rho", [0.1, 0.2, 0.3], r"rho has shape \(3,\), expected a scalar or \(2,\)"),
    ("rho", [0.1, -0.2], "rho for client 'site-1' must be finite and positive"),
    ("rho", "big", "rho must be 'auto', a number, an array or 'samples'"),
    ("tol", 0.0, r"tol \(eps1\) must be a finite positive number"),
    ("tol", (1e-6, -1.0), r"tol \(eps2\) must be a finite positive number"),
    ("tol", np.nan, r"tol \(eps1\)"),
    ("s_bar", 0.0, "s_bar must be a finite positive number"),
    ("tau_decay", 1.0, "tau_decay must be None or in"),
    ("tau_rel", 0.0, "tau_rel must be a finite positive number"),
    ("max_outer", 0, "max_outer must be a positive integer"),
    ("local_solver", "sgd", "local_solver must be"),
    ("w0", [0.0, np.nan, 0.0], "w0 contains NaN or inf"),
    ("w0", [0.0, 1.0], r"w0 has shape \(2,\), expected \(3,\)"),
])
def test_bad_solver_options(arg, value, pattern):
    admm_only = {"inner": "admm"} if arg in ("rho", "local_solver") else {}
    with pytest.raises(ValueError, match=pattern):
        cf.solve(problem(), **admm_only, **{arg: value})


def test_unknown_method_and_option():
    with pytest.raises(ValueError, match="unknown method 'admm'"):
        cf.solve(problem(), method="admm")
    with pytest.raises(TypeError, match=r"options that do not apply.*'betta'"):
        cf.solve(problem(), betta=3.0)


def test_kkt_rejects_bad_multipliers():
    p = cf.Problem([client(name="a", constraints=[fn.Affine(np.ones(3), -1.0)])])
    with pytest.raises(ValueError, match=r"multipliers\['a'\].ineq has 2 entries, expected 1"):
        cf.kkt(p, np.zeros(3), {"a": ([1.0, 2.0], [])})
    with pytest.raises(ValueError, match=r"unknown parties \['b'\]"):
        cf.kkt(p, np.zeros(3), {"b": ([1.0], [])})


def test_nonfinite_during_run_gives_numerical_error():
    """A user function that turns NaN mid-run: the solver keeps the last finite iterate."""
    calls = {"n": 0}

    def grad(w):
        calls["n"] += 1
        return w - 1.0 if calls["n"] < 40 else np.full_like(w, np.nan)

    f = fn.Custom(lambda w: 0.5 * np.sum((w - 1.0) ** 2), grad, lambda w: np.eye(w.size), dim=3)
    p = cf.Problem([cf.Client(objective=f, constraints=[fn.Affine(np.ones(3), -1.0)])])
    res = cf.solve(p, method="fedproxal", inner="admm", tol=1e-9)
    assert res.status == "numerical_error"
    assert np.all(np.isfinite(res.w))
    assert "client 'client-0': objective: its gradient contains NaN or inf" in res.message


# -- strict inputs: parameters that are not numbers, empty dimensions, certify ----------------

@pytest.mark.parametrize("make, where, arg", [
    (lambda: prox.L1(None), "L1", "lam"),
    (lambda: prox.L1("0.1"), "L1", "lam"),
    (lambda: prox.L1(True), "L1", "lam"),
    (lambda: prox.SquaredL2(False), "SquaredL2", "lam"),
    (lambda: prox.ElasticNet(0.1, "x"), "ElasticNet", "l2"),
    (lambda: prox.L1Ball("abc"), "L1Ball", "radius"),
    (lambda: prox.L2Ball(None), "L2Ball", "radius"),
    (lambda: prox.Nuclear("a", (2, 2)), "Nuclear", "lam"),
    (lambda: prox.Box("a", 1.0), "Box", "lower"),
    (lambda: prox.Box(0.0, [1.0, None]), "Box", "upper"),
    (lambda: prox.Box(0.0, [True, False]), "Box", "upper"),
])
def test_regularizer_parameters_must_be_numbers(make, where, arg):
    with pytest.raises(TypeError, match=rf"{where}: {arg} must be a real number"):
        make()


@pytest.mark.parametrize("X", [np.ones((5, 0)), "sparse"])
@pytest.mark.parametrize("cls", [fn.LogisticLoss, fn.LeastSquares])
def test_zero_column_data_is_named(cls, X):
    import scipy.sparse as sp
    X = sp.csr_array((5, 0)) if isinstance(X, str) else X
    with pytest.raises(ValueError, match=rf"{cls.__name__}: X has no columns \(dimension 0\)"):
        cls(X, np.ones(5))


def test_templates_name_zero_columns_and_string_bounds():
    from constrfl.problems import fairness, neyman_pearson, norm_ball_logistic
    y, ids = np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1])
    X = np.random.default_rng(0).standard_normal((4, 2))
    with pytest.raises(ValueError, match="neyman_pearson: X has no columns"):
        neyman_pearson(np.ones((4, 0)), y, ids, 0.2)
    with pytest.raises(ValueError, match="fairness: X has no columns"):
        fairness(np.ones((4, 0)), y, ids, sensitive_features=y)
    with pytest.raises(ValueError, match="norm_ball_logistic: data: X has no columns"):
        norm_ball_logistic(data=(np.ones((4, 0)), y, ids))
    with pytest.raises(TypeError, match=r"neyman_pearson: max_class1_loss must be a real "
                                        r"number, got '0.2' \(str\)"):
        neyman_pearson(X, y, ids, max_class1_loss="0.2")
    with pytest.raises(TypeError, match="fairness: max_disparity must be a real number"):
        fairness(X, y, ids, max_disparity="0.1", sensitive_features=y)
    with pytest.raises(TypeError, match="neyman_pearson: X must be a 2-D array of real"):
        neyman_pearson(np.array([["a", "b"]] * 4), y, ids, 0.2)


def test_certify_names_bad_arguments():
    p = cf.Problem([client(name="a", constraints=[fn.Affine(np.ones(3), -1.0)])])
    with pytest.raises(TypeError, match=r"certify: result must be a SolveResult or a "
                                        r"point w .*got 'abc'"):
        cf.certify(p, "abc")
    with pytest.raises(ValueError, match=r"certify: the point w has shape \(2,\), expected "
                                         r"\(3,\)"):
        cf.certify(p, np.zeros(2))
    with pytest.raises(ValueError, match=r"certify: solver 'NOPE' is not an installed cvxpy "
                                         r"solver; installed: \[.*'CLARABEL'"):
        cf.certify(p, np.zeros(3), solver="NOPE")
    with pytest.raises(TypeError, match="certify: solver must be the name"):
        cf.certify(p, np.zeros(3), solver=None)
    with pytest.raises(TypeError, match="certify: problem must be a constrfl.Problem"):
        cf.certify("abc", np.zeros(3))


@pytest.mark.parametrize("name, value", [("verbose", "yes"), ("verbose", 1),
                                         ("progress", "no"), ("verbose", None)])
def test_a_flag_of_another_type_is_refused(name, value):
    """verbose and progress are booleans (progress also None: when stderr is a terminal),
    like every other option: a string is refused, not taken as truthy."""
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        cf.solve(builders.np_problem(2), **{name: value})
