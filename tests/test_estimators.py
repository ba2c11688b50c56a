"""The scikit-learn-style estimators (constrfl.estimators).

* scikit-learn's own ``check_estimator`` suite, run through ``parametrize_with_checks``
  on the *default* NeymanPearsonClassifier and FairClassifier (federated Prox-AL, tol
  1e-6: the check data sets are tiny, a single client, so no faster method or looser tol
  is needed; the checks give FairClassifier no ``sensitive_features``, so it fits
  without a disparity constraint, which is tested against scikit-learn's
  LogisticRegression below).  Every check applies and passes; none is listed as an
  expected failure.  sklearn itself skips ``check_array_api_input``
  (needs SCIPY_ARRAY_API=1 and array-api-compat; the estimators are NumPy-only) and,
  without pandas, ``check_classifier_data_not_an_array``.
* the acceptance test on scikit-learn's breast-cancer data: the class-1 loss bound holds
  on every client within 1e-6, recomputed here from the raw data and coef_/intercept_,
  and the solution agrees with cProx-AL and with an independent cvxpy model;
* cross-validation: folds that leave a client without one class fit (against the cvxpy
  model), and GridSearchCV scores every candidate;
* behaviour: labels, prediction methods, the free intercept, failures, input checks,
  and the import and fit without scikit-learn (in a subprocess that blocks it).
"""
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import pytest
from scipy.special import expit

from constrfl import Client, prox
from constrfl.estimators import (ConvergenceError, ConvergenceWarning, FairClassifier,
                                 NeymanPearsonClassifier, NotFittedError)
from constrfl.estimators._coordinates import _coef_penalty
from constrfl.problems.datasets import make_classification, make_fairness
from constrfl.problems.partition import stratified_split

ROOT = Path(__file__).resolve().parents[1]
R = 0.2


def logistic_losses(X, y01, coef, intercept):
    """Per-row logistic loss of the score X·coef + b against labels in {0, 1}."""
    s = X @ np.ravel(coef) + float(np.ravel(intercept)[0])
    return np.logaddexp(0.0, s) - y01 * s


def np_data(n=240, d=3, seed=0):
    ds = make_classification(n, d, seed=seed)
    return ds.X[:, :-1], ds.y                          # drop the generator's ones column


def np_reference(X, y01, ids, r, ridge):
    """An independent model of the Neyman-Pearson fit, written out from its definition:
    the pooled convex program in cvxpy, the mean of the class-0 losses over the clients
    holding class-0 rows + ``½ Σⱼ ridgeⱼ coefⱼ²`` (free intercept), the class-1 loss
    ≤ r on every client holding class-1 rows.  Returns (optimal value, coef, intercept)."""
    cp = pytest.importorskip("cvxpy")
    w, b = cp.Variable(X.shape[1]), cp.Variable()

    def mean_loss(rows, sign):
        return cp.sum(cp.logistic(sign * (X[rows] @ w + b))) / rows.sum()

    losses = [mean_loss((ids == i) & (y01 == 0), 1.0) for i in np.unique(ids[y01 == 0])]
    bounds = [mean_loss((ids == i) & (y01 == 1), -1.0) <= r for i in np.unique(ids[y01 == 1])]
    penalty = 0.5 * cp.sum_squares(cp.multiply(np.sqrt(ridge), w))
    ref = cp.Problem(cp.Minimize(sum(losses) / len(losses) + penalty), bounds)
    ref.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert ref.status == "optimal"
    return ref.value, w.value, float(b.value)


# -- scikit-learn's check_estimator -------------------------------------------------------

try:
    from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks
except ImportError:                                    # scikit-learn is optional
    def test_sklearn_check_estimator():
        pytest.skip("scikit-learn is not installed")
else:
    @parametrize_with_checks([NeymanPearsonClassifier(), FairClassifier()])
    def test_sklearn_check_estimator(estimator, check):
        check(estimator)

    def test_check_estimator_passes_on_the_fair_classifier_as_shipped():
        import constrfl as cf
        with pytest.warns(UserWarning, match="no sensitive_features given"):
            check_estimator(cf.FairClassifier())


# -- acceptance: breast cancer -------------------------------------------------------------

def test_breast_cancer_meets_the_class1_bound_on_every_client():
    """Protected class: malignant (a missed cancer is the costly error).  The labels are
    the names, so classes_ = ['benign', 'malignant'] and classes_[1] is malignant."""
    datasets = pytest.importorskip("sklearn.datasets")
    data = datasets.load_breast_cancer()
    X = (data.data - data.data.mean(0)) / data.data.std(0)
    y = data.target_names[data.target]
    ids = stratified_split(y, 5, seed=0)
    clf = NeymanPearsonClassifier(max_class1_loss=R).fit(X, y, client_ids=ids)

    assert list(clf.classes_) == ["benign", "malignant"]
    assert clf.result_.status == "optimal" and clf.result_.method == "fedproxal"
    assert clf.coef_.shape == (1, 30) and clf.intercept_.shape == (1,)
    y01 = (y == "malignant").astype(float)
    losses = logistic_losses(X, y01, clf.coef_, clf.intercept_)
    class1 = np.array([losses[(ids == i) & (y01 == 1)].mean() for i in range(5)])
    class0 = np.array([losses[(ids == i) & (y01 == 0)].mean() for i in range(5)])
    assert np.all(class1 <= R + 1e-6), class1
    assert class1.max() >= R - 1e-6                    # the bound is reached (active)
    for i in range(5):                                 # μ > 0 exactly on the active clients
        mu = clf.result_.multipliers[f"client-{i}"].ineq[0]
        assert (mu > 1e-6) == (class1[i] >= R - 1e-6), (i, mu, class1[i])
    # result_.objective (centred coordinates) is the objective of (coef_, intercept_)
    objective = class0.mean() + 0.5 * clf.alpha * float(clf.coef_[0] @ clf.coef_[0])
    assert objective == pytest.approx(clf.result_.objective, rel=1e-10)

    central = NeymanPearsonClassifier(R, method="cproxal").fit(X, y, client_ids=ids)
    assert central.result_.status == "optimal"
    assert central.result_.objective == pytest.approx(clf.result_.objective, rel=1e-6)
    np.testing.assert_allclose(central.coef_, clf.coef_, atol=1e-4)

    # an independent model of the same problem: the pooled convex program in cvxpy
    value, coef, intercept = np_reference(X, y01, ids, R, np.full(30, clf.alpha))
    assert clf.result_.objective == pytest.approx(value, rel=1e-6)
    np.testing.assert_allclose(clf.coef_[0], coef, atol=1e-4)
    assert clf.intercept_[0] == pytest.approx(intercept, abs=1e-4)


# -- labels and prediction -----------------------------------------------------------------

def test_any_two_labels_and_classes_1_is_the_protected_class():
    X, y = np_data()
    for labels in ((-1, 1), ("neg", "pos")):
        lab = np.array(labels, dtype=object if isinstance(labels[0], str) else None)
        clf = NeymanPearsonClassifier(R).fit(X, lab[y])
        assert list(clf.classes_) == list(labels)
        assert set(clf.predict(X)) <= set(labels)
        loss = logistic_losses(X, y, clf.coef_, clf.intercept_)
        assert loss[y == 1].mean() <= R + 1e-6
    # flipping the labels protects the other class
    flipped = NeymanPearsonClassifier(R).fit(X, np.array([1, -1])[y])   # now 0 -> 1
    y_flip = 1 - y
    loss = logistic_losses(X, y_flip, flipped.coef_, flipped.intercept_)
    assert loss[y_flip == 1].mean() <= R + 1e-6
    assert loss[y_flip == 1].mean() == pytest.approx(R, abs=1e-6)   # binding here


def test_prediction_methods_agree():
    X, y = np_data()
    clf = NeymanPearsonClassifier(R).fit(X, y)
    s = clf.decision_function(X)
    np.testing.assert_allclose(s, X @ clf.coef_[0] + clf.intercept_[0], rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(s > 0).astype(int)])
    P = clf.predict_proba(X)
    assert P.shape == (len(X), 2)
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-15)
    np.testing.assert_allclose(P[:, 1], expit(s), rtol=1e-15)
    np.testing.assert_allclose(clf.predict_log_proba(X), np.log(P), rtol=1e-12)
    assert clf.score(X, y) == pytest.approx(np.mean(clf.predict(X) == y))
    assert clf.n_features_in_ == 3
    with pytest.raises(ValueError, match="features"):
        clf.predict(np.c_[X, X])
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.decision_function(X), s)


def test_the_intercept_is_free_and_centring_is_exact():
    X, y = np_data()
    # a huge L1 zeroes coef; the free intercept then solves the 1-D problem in closed
    # form: min log(1 + e^b) s.t. log(1 + e^-b) <= r, i.e. b = -log(e^r - 1)
    clf = NeymanPearsonClassifier(R, regularizer=prox.L1(10.0)).fit(X, y)
    assert np.all(clf.coef_ == 0)
    assert clf.intercept_[0] == pytest.approx(-np.log(np.expm1(R)), abs=1e-5)
    # shifting the features moves only the intercept (the solver centres internally)
    a = NeymanPearsonClassifier(R).fit(X, y)
    b = NeymanPearsonClassifier(R).fit(X + 100.0, y)
    assert b.result_.status == "optimal"
    np.testing.assert_allclose(b.coef_, a.coef_, atol=1e-5)
    assert b.intercept_[0] == pytest.approx(a.intercept_[0] - 100 * a.coef_.sum(), abs=1e-4)
    np.testing.assert_allclose(b.decision_function(X + 100.0), a.decision_function(X),
                               atol=1e-4)
    # no intercept: the model passes through the origin (r = 0.2 is unattainable then)
    c = NeymanPearsonClassifier(0.5, fit_intercept=False).fit(X, y)
    assert c.intercept_[0] == 0.0 and c.result_.w.shape == (3,)
    assert logistic_losses(X, y, c.coef_, c.intercept_)[y == 1].mean() <= 0.5 + 1e-6


def test_coef_penalty_prox_is_exact_and_spares_the_intercept():
    rng = np.random.default_rng(3)
    v = rng.standard_normal(5)
    for inner in (None, prox.L1(0.3), prox.Box(-0.2, 0.5)):
        P = _coef_penalty(0.7, inner, 4)
        for t in (0.0, 0.5, 3.0):
            z = P.prox(v, t)
            assert z[4] == v[4]                        # the intercept is not touched
            if t > 0:                                  # optimality: 0 ∈ ∂P(z) + (z − v)/t
                assert P.dist(z, (z - v) / t) <= 1e-12
        assert P.value(np.r_[np.zeros(4), 9.0]) == 0.0


@pytest.mark.parametrize("inner", [None, prox.L1(0.3), prox.Box(-0.2, 0.5),
                                   prox.L1(0.2) + prox.NonNegative(), prox.ElasticNet(0.1, 0.4)])
def test_scaled_coef_penalty_prox_matches_cvxpy(inner):
    """In scaled coordinates c̃ = σ·coef the penalty is Σⱼ (α/2)uⱼ² + r(uⱼ), u = c̃/σ;
    its prox (scalar and per-coordinate t) against cvxpy with that written out here."""
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(4)
    sigma = np.array([0.01, 0.5, 3.0, 40.0])
    P = _coef_penalty(0.7, inner, 4, sigma)
    v = 2 * rng.standard_normal(5)
    l1 = {prox.L1: lambda r: r.lam, prox.ElasticNet: lambda r: r.l1,
          prox.Boxed: lambda r: r.inner.lam}.get(type(inner), lambda r: 0.0)(inner)
    l2 = inner.l2 if isinstance(inner, prox.ElasticNet) else 0.0
    for t in (0.8, np.r_[0.3, 1.0, 2.0, 0.5, 9.0]):
        x = cp.Variable(5)
        u = cp.multiply(1 / sigma, x[:4])
        tk = np.broadcast_to(t, (5,))[:4]
        pen = sum(tk[j] * (0.5 * (0.7 + l2) * cp.square(u[j]) + l1 * cp.abs(u[j]))
                  for j in range(4))
        cons = ([u >= 0] if isinstance(inner, prox.Boxed) else
                [u >= -0.2, u <= 0.5] if isinstance(inner, prox.Box) else [])
        cp.Problem(cp.Minimize(pen + 0.5 * cp.sum_squares(x - v)), cons).solve(
            solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
        z = P.prox(v, t)
        np.testing.assert_allclose(z, x.value, atol=1e-6)
        assert z[4] == v[4]
        assert P.dist(z, (z - v) / np.broadcast_to(t, (5,))) <= 1e-12


@pytest.mark.parametrize("inner", [None, prox.L1(0.3), prox.Box(-0.2, 0.5),
                                   prox.L1(0.2) + prox.NonNegative(), prox.ElasticNet(0.1, 0.4),
                                   prox.L2Ball(1.0)])
def test_coef_penalty_pieces_describe_it(inner):
    """The pieces (q, λ, lo, hi) the exact prox step uses: P's value is
    Σⱼ ½qⱼwⱼ² + λⱼ|wⱼ| inside [lo, hi], and its prox the closed form
    clip(soft(v, tλ)/(1 + tq), lo, hi), for the scaled penalty (nothing on the intercept);
    None for a non-separable R."""
    rng = np.random.default_rng(5)
    sigma = np.array([0.01, 0.5, 3.0, 40.0]) if inner is None or inner.separable else None
    P = _coef_penalty(0.7, inner, 4, sigma)
    pieces = P.pieces(5)
    if not P.separable:
        assert pieces is None
        return
    q, lam, lo, hi = pieces
    assert (q[4], lam[4], lo[4], hi[4]) == (0.0, 0.0, -np.inf, np.inf)
    for _ in range(5):
        v, t = 2 * rng.standard_normal(5), rng.uniform(0.1, 3.0)
        closed = np.clip(np.sign(v) * np.maximum(np.abs(v) - t * lam, 0) / (1 + t * q), lo, hi)
        np.testing.assert_allclose(P.prox(v, t), closed, rtol=1e-12, atol=1e-14)
        w = np.clip(rng.standard_normal(5), 0.99 * lo, 0.99 * hi)   # inside the box
        assert P.value(w) == pytest.approx(float(0.5 * q @ w ** 2 + lam @ np.abs(w)),
                                           rel=1e-12)


def test_scaling_needs_a_separable_regularizer():
    with pytest.raises(ValueError, match="separable"):
        _coef_penalty(0.1, prox.L2Ball(1.0), 3, np.array([1.0, 2.0, 3.0]))


def test_coef_penalty_is_made_of_the_prox_regularizers():
    """The penalty is ``prox.Leading(prox.Ridged(R, alpha), k, σ)`` (``SquaredL2(alpha)``
    without R, R itself at alpha = 0): public classes whose repr names R, and without R
    a weighted ridge ``alpha/σ²`` (0 on the intercept) the Newton solvers fold in."""
    sigma = np.array([0.5, 2.0, 3.0])
    ridge = _coef_penalty(0.1, None, 3, sigma)
    assert type(ridge) is prox.Leading and type(ridge.inner) is prox.SquaredL2
    np.testing.assert_allclose(ridge.ridge_weights(4), np.r_[0.1 / sigma ** 2, 0.0],
                               rtol=1e-15)
    l1 = prox.L1(0.01)
    both = _coef_penalty(0.1, l1, 3, sigma)
    assert type(both.inner) is prox.Ridged and both.inner.inner is l1
    assert both.ridge_weights(4) is None
    assert _coef_penalty(0.0, l1, 3, sigma).inner is l1
    assert repr(ridge).startswith("Leading(SquaredL2(lam=0.1), k=3, scale=")
    assert repr(both).startswith("Leading(Ridged(L1(lam=0.01), lam=0.1), k=3, scale=")


# -- failures are loud ---------------------------------------------------------------------

def test_unconverged_fit_raises_with_the_result_and_leaves_no_model():
    X, y = np_data()
    clf = NeymanPearsonClassifier(R).fit(X, y)
    clf.set_params(solver_options={"max_outer": 1})
    with pytest.raises(ConvergenceError, match="max_iterations") as err:
        clf.fit(X, y)
    assert err.value.result.status == "max_iterations"
    with pytest.raises(NotFittedError):                # the earlier model is gone too
        clf.predict(X)
    clf.set_params(on_failure="warn")
    with pytest.warns(ConvergenceWarning, match="max_iterations"):
        clf.fit(X, y)
    assert clf.result_.status == "max_iterations" and clf.predict(X).shape == (len(X),)


def test_an_unattainable_bound_raises_infeasible():
    """Without an intercept, class-1 rows ±x have mean loss ≥ log 2 > r for every w."""
    rng = np.random.default_rng(0)
    X1 = rng.standard_normal((20, 2))
    X = np.r_[X1, -X1, rng.standard_normal((40, 2)) + 1.0]
    y = np.r_[np.ones(40), np.zeros(40)]
    with pytest.raises(ConvergenceError, match="infeasible") as err:
        NeymanPearsonClassifier(0.05, fit_intercept=False).fit(X, y)
    assert err.value.result.kkt.feasibility > 0.5


def test_bad_parameters_and_inputs_are_rejected_at_fit():
    X, y = np_data()
    bad = [dict(alpha=-1.0), dict(method="fedavg"), dict(on_failure="ignore"),
           dict(solver_options={"seed": 1}), dict(solver_options=[("rho", 1)]),
           dict(regularizer="l1"), dict(fit_intercept="yes"), dict(random_state=-3)]
    for params in bad:
        clf = NeymanPearsonClassifier(**params)       # __init__ accepts anything ...
        with pytest.raises(ValueError):                # ... fit says what is wrong
            clf.fit(X, y)
    with pytest.raises(ValueError, match="Only binary"):
        NeymanPearsonClassifier().fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="1 class"):
        NeymanPearsonClassifier().fit(X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="client_ids"):
        NeymanPearsonClassifier().fit(X, y, client_ids=np.zeros(len(y) - 1))


def test_params_clone_and_random_state():
    clf = NeymanPearsonClassifier(0.3, alpha=0.05, method="cproxal")
    params = clf.get_params()
    assert params["max_class1_loss"] == 0.3 and params["method"] == "cproxal"
    assert clf.set_params(tol=1e-5) is clf and clf.tol == 1e-5
    twin = type(clf)(**clf.get_params())
    assert twin.get_params() == clf.get_params()
    X, y = np_data()
    fits = [NeymanPearsonClassifier(R, random_state=rs).fit(X, y)
            for rs in (0, 7, None, np.random.RandomState(1), np.random.default_rng(2))]
    for f in fits[1:]:                                 # one optimum, any start point
        np.testing.assert_allclose(f.coef_, fits[0].coef_, atol=1e-5)


def test_server_data_adds_the_global_constraint():
    X, y = np_data(seed=1)
    Xs, ys = np_data(n=80, seed=2)
    labels = np.array(["a", "b"])
    clf = NeymanPearsonClassifier(0.15).fit(X, labels[y], client_ids=np.arange(len(y)) % 3,
                                            server_data=(Xs, labels[ys]))
    assert clf.result_.status == "optimal"
    loss = logistic_losses(Xs, ys, clf.coef_, clf.intercept_)
    assert loss[ys == 1].mean() <= 0.15 + 1e-6
    assert clf.result_.multipliers["server"].ineq.shape == (1,)
    with pytest.raises(ValueError, match="not in classes_"):
        NeymanPearsonClassifier().fit(X, labels[y], server_data=(Xs, np.where(ys, "b", "c")))


# -- clients lacking a class (small clients, cross-validation folds) ----------------------

def test_a_client_lacking_a_class_is_fitted_as_the_pooled_problem_says():
    """Client 2 holds no class-1 row (no constraint), client 3 no class-0 row (no
    objective term; the objective averages the other three).  Oracle: cvxpy.  tol 1e-8:
    at 1e-6 a bound may be exceeded by 1e-6 with μ = 3.4, which moves the objective
    by ~2e-6 (relative 1.1e-6 measured), more than the comparison's 1e-6."""
    X, y = np_data(n=240, seed=3)
    ids = np.arange(240) % 4
    ids[(ids == 2) & (y == 1)] = 0
    ids[(ids == 3) & (y == 0)] = 1
    alpha = 0.05
    clf = NeymanPearsonClassifier(R, alpha=alpha, tol=1e-8).fit(X, y, client_ids=ids)
    assert clf.result_.status == "optimal"
    assert clf.result_.multipliers["client-2"].ineq.shape == (0,)
    value, coef, intercept = np_reference(X, y, ids, R, np.full(3, alpha))
    assert clf.result_.objective == pytest.approx(value, rel=1e-6)
    np.testing.assert_allclose(clf.coef_[0], coef, atol=1e-4)
    assert clf.intercept_[0] == pytest.approx(intercept, abs=1e-4)
    loss = logistic_losses(X, y, clf.coef_, clf.intercept_)
    assert max(loss[(ids == i) & (y == 1)].mean() for i in (0, 1, 3)) <= R + 1e-8


def test_the_template_needs_class_0_rows_somewhere_and_drops_empty_clients():
    from constrfl.problems import neyman_pearson
    X, y = np_data(n=40)
    ids = np.where(y == 1, 0, 1)                       # client 0: class 1 only
    with pytest.raises(ValueError, match="no client holds rows of class 0"):
        neyman_pearson(X, np.ones(40), ids, R)
    assert [c.name for c in neyman_pearson(X, y, ids, R, local=False).clients] == ["client-1"]


def test_grid_search_scores_every_candidate_when_a_fold_leaves_a_client_one_class():
    """Client 3 holds a single class-0 row, so one stratified training fold has none;
    every fit must succeed (error_score="raise"), with the default folds and with
    GroupKFold over clients as the docstring shows."""
    model_selection = pytest.importorskip("sklearn.model_selection")
    X, y = np_data(n=200)
    ids = np.arange(200) % 3
    ids[np.flatnonzero(y == 0)[0]] = 3
    ids[np.flatnonzero(y == 1)[::7]] = 3
    grid = {"max_class1_loss": [0.3, 0.5]}
    folds = model_selection.StratifiedKFold(5).split(X, y)
    assert any(not np.any(y[train][ids[train] == 3] == 0) for train, _ in folds)
    for cv, groups in ((None, None), (model_selection.GroupKFold(4), ids)):
        search = model_selection.GridSearchCV(NeymanPearsonClassifier(), grid, cv=cv,
                                              error_score="raise")
        search.fit(X, y, groups=groups, client_ids=ids)
        assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


# -- FairClassifier ------------------------------------------------------------------------

def test_fair_classifier_meets_the_disparity_bound_on_every_client():
    ds = make_fairness(800, 5, seed=0)
    X, y, s = ds.X[:, :-1], ds.y, np.array(["F", "M"])[ds.sensitive]
    ids = stratified_split(y, 4, seed=0)
    delta = 0.05
    clf = FairClassifier(delta).fit(X, y, sensitive_features=s, client_ids=ids)
    assert clf.result_.status == "optimal"
    loss = logistic_losses(X, y, clf.coef_, clf.intercept_)
    gaps = np.array([loss[(ids == i) & (s == "F")].mean() - loss[(ids == i) & (s == "M")].mean()
                     for i in range(4)])
    assert np.all(np.abs(gaps) <= delta + 1e-6), gaps
    assert np.abs(gaps).max() >= delta - 1e-6          # some client's bound is active
    free = FairClassifier(10.0).fit(X, y, sensitive_features=s, client_ids=ids)
    assert np.abs(free.result_.w - clf.result_.w).max() > 1e-3    # the constraint bites


def test_fair_classifier_input_checks():
    ds = make_fairness(300, 3, seed=1)
    X, y, s = ds.X[:, :-1], ds.y, ds.sensitive
    with pytest.raises(ValueError, match="2 groups"):
        FairClassifier().fit(X, y, sensitive_features=np.arange(len(y)) % 3)
    with pytest.warns(UserWarning, match="no client holds rows of both sensitive groups"):
        FairClassifier().fit(X, y, sensitive_features=s, client_ids=s)   # one group each
    server = (X[:50], y[:50], s[:50])
    clf = FairClassifier(0.05).fit(X[50:], y[50:], sensitive_features=s[50:],
                                   server_data=server)
    assert clf.result_.status == "optimal"
    assert clf.result_.multipliers["server"].ineq.shape == (2,)
    with pytest.raises(ValueError, match="names a column, but X is not a DataFrame"):
        FairClassifier().fit(X, y, sensitive_features="sex")


def test_fair_classifier_old_keyword_sensitive_is_deprecated():
    ds = make_fairness(300, 3, seed=1)
    X, y, s = ds.X[:, :-1], ds.y, ds.sensitive
    new = FairClassifier(0.05).fit(X, y, sensitive_features=s)
    with pytest.warns(FutureWarning, match="use sensitive_features"):
        old = FairClassifier(0.05).fit(X, y, sensitive=s)
    np.testing.assert_array_equal(old.coef_, new.coef_)
    with pytest.raises(TypeError, match="sensitive_features only"):
        FairClassifier().fit(X, y, sensitive=s, sensitive_features=s)


def test_fair_classifier_takes_a_column_name_of_a_dataframe():
    """``sensitive_features="group"`` reads X's column (which stays a feature); the
    disparity bound, recomputed here from that column, holds on every client."""
    pd = pytest.importorskip("pandas")
    ds = make_fairness(400, 3, seed=2)
    ids = np.arange(400) % 2
    df = pd.DataFrame(ds.X[:, :-1], columns=["a", "b", "c"]).assign(
        group=np.where(ds.sensitive == 1, 1.0, -1.0))
    delta = 0.02
    clf = FairClassifier(delta).fit(df, ds.y, sensitive_features="group", client_ids=ids)
    assert clf.result_.status == "optimal" and clf.n_features_in_ == 4
    assert list(clf.feature_names_in_) == ["a", "b", "c", "group"]
    loss = logistic_losses(df.to_numpy(), ds.y, clf.coef_, clf.intercept_)
    g = df["group"].to_numpy()
    gaps = [loss[(ids == i) & (g == 1)].mean() - loss[(ids == i) & (g == -1)].mean()
            for i in range(2)]
    assert np.max(np.abs(gaps)) <= delta + 1e-6, gaps
    assert np.max(np.abs(gaps)) >= delta - 1e-6, gaps        # the bound is active
    server = (df.iloc[:60], ds.y[:60], "group")              # the server's column, by name
    on_server = FairClassifier(0.05).fit(df.iloc[60:], ds.y[60:], sensitive_features="group",
                                         server_data=server)
    assert on_server.result_.multipliers["server"].ineq.shape == (2,)
    with pytest.raises(ValueError, match="X has no such column"):
        FairClassifier().fit(df, ds.y, sensitive_features="sex")


def test_fair_classifier_without_sensitive_features_is_penalized_logistic_regression():
    """No groups, no constraint: the model minimizes mean logistic loss + (α/2)‖coef‖²,
    which is scikit-learn's LogisticRegression with C = 1/(n·α) (free intercept)."""
    linear_model = pytest.importorskip("sklearn.linear_model")
    ds = make_fairness(300, 3, seed=1)
    X, y = ds.X[:, :-1], ds.y
    alpha = 0.05
    with pytest.warns(UserWarning, match="no sensitive_features given"):
        clf = FairClassifier(alpha=alpha).fit(X, y)
    assert clf.result_.status == "optimal"
    assert clf.result_.multipliers["client-0"].ineq.shape == (0,)
    ref = linear_model.LogisticRegression(C=1 / (len(y) * alpha), tol=1e-12,
                                          max_iter=10_000).fit(X, y)
    np.testing.assert_allclose(clf.coef_, ref.coef_, atol=1e-5)
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, atol=1e-5)


# -- optional dependencies ------------------------------------------------------------------

def test_pandas_feature_names_are_recorded():
    pd = pytest.importorskip("pandas")
    pytest.importorskip("sklearn")
    X, y = np_data()
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    clf = NeymanPearsonClassifier(R).fit(df, y)
    assert list(clf.feature_names_in_) == ["a", "b", "c"]


def test_works_without_scikit_learn():
    """``import constrfl.estimators`` and a fit/predict with scikit-learn blocked."""
    code = textwrap.dedent("""
        import sys
        sys.modules["sklearn"] = None                 # any import of sklearn fails
        import numpy as np
        from constrfl.estimators import (HAVE_SKLEARN, NeymanPearsonClassifier,
                                         NotFittedError)
        from constrfl.problems.datasets import make_classification
        assert not HAVE_SKLEARN
        ds = make_classification(200, 3, seed=0)
        X, y = ds.X[:, :-1], np.array(["neg", "pos"])[ds.y]
        clf = NeymanPearsonClassifier(0.3, alpha=0.05)
        assert repr(clf) == "NeymanPearsonClassifier(alpha=0.05, max_class1_loss=0.3)"
        assert clf.get_params()["alpha"] == 0.05
        try:
            clf.predict(X)
            raise AssertionError("predict before fit")
        except NotFittedError:
            pass
        import scipy.sparse as sp
        sparse = NeymanPearsonClassifier(0.3, alpha=0.05).fit(sp.csr_matrix(X), y)
        clf.fit(X, y)
        assert clf.result_.status == "optimal" and clf.n_features_in_ == 3
        assert np.allclose(sparse.coef_, clf.coef_, atol=1e-4)
        assert list(clf.classes_) == ["neg", "pos"]
        s = X @ clf.coef_[0] + clf.intercept_[0]
        loss = np.logaddexp(0, -s[ds.y == 1]).mean()
        assert loss <= 0.3 + 1e-6, loss
        assert np.allclose(clf.predict_proba(X).sum(1), 1)
        assert 0 <= clf.score(X, y) <= 1
        clf.set_params(alpha=0.1)
        for bad in (X[:, :2], np.c_[X, X]):
            try:
                clf.predict(bad)
                raise AssertionError("wrong feature count accepted")
            except ValueError as err:
                assert "features" in str(err)
        for bad_y in (y[:-1], ds.y + 0.5):
            try:
                clf.fit(X, bad_y)
                raise AssertionError("bad y accepted")
            except ValueError:
                pass
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok"


# -- sparse input ----------------------------------------------------------------------------

def test_sparse_input_stays_sparse_and_fits_the_same_model(monkeypatch):
    """A scipy.sparse X reaches the template as CSR (not centred, which would densify
    it) and gives the model of its dense twin: the two fits solve different but
    equivalent parametrizations (centred vs not), so they agree to the solve's
    accuracy, not bit for bit; both are checked against the constraint itself."""
    import scipy.sparse as sp
    from constrfl import problems
    rng = np.random.default_rng(0)
    n = 400
    X = np.column_stack([np.eye(4)[rng.integers(0, 4, n)][:, 1:] for _ in range(3)]
                        + [rng.standard_normal(n) * (rng.random(n) < 0.5)])
    y = (rng.random(n) < expit(X @ rng.standard_normal(X.shape[1]))).astype(int)
    ids = np.arange(n) % 3
    seen = []
    template = problems.neyman_pearson
    monkeypatch.setattr(problems, "neyman_pearson",
                        lambda X, *a, **k: seen.append(X) or template(X, *a, **k))
    dense = NeymanPearsonClassifier(0.5).fit(X, y, client_ids=ids)
    sparse = NeymanPearsonClassifier(0.5).fit(sp.csr_matrix(X), y, client_ids=ids)
    assert not sp.issparse(seen[0]) and sp.issparse(seen[1])
    assert seen[1].nnz == np.count_nonzero(X) + n        # + the intercept column
    assert sparse.result_.status == "optimal"
    assert sparse.result_.objective == pytest.approx(dense.result_.objective, rel=1e-6)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, atol=1e-4)
    assert sparse.intercept_[0] == pytest.approx(dense.intercept_[0], abs=1e-4)
    loss = logistic_losses(X, y, sparse.coef_, sparse.intercept_)
    assert max(loss[(ids == i) & (y == 1)].mean() for i in range(3)) <= 0.5 + 1e-6
    np.testing.assert_allclose(sparse.decision_function(sp.csc_matrix(X)),
                               sparse.decision_function(X), rtol=1e-12, atol=1e-12)


def test_a_trailing_ones_column_is_the_intercept():
    """The loaders' X ends with a column of ones: it is taken as the intercept (no
    second one is added, its coef_ is 0), which gives exactly the model fitted on X
    without that column: the solver sees the same design either way."""
    import scipy.sparse as sp
    ds = make_classification(240, 3, seed=0)
    with_ones, without = ds.X, ds.X[:, :-1]
    a = NeymanPearsonClassifier(R).fit(without, ds.y)
    b = NeymanPearsonClassifier(R).fit(with_ones, ds.y)
    assert b.result_.w.shape == (4,) and b.coef_.shape == (1, 4) and b.coef_[0, 3] == 0.0
    np.testing.assert_array_equal(b.coef_[0, :3], a.coef_[0])
    assert b.intercept_[0] == a.intercept_[0]
    np.testing.assert_allclose(b.decision_function(with_ones), a.decision_function(without),
                               rtol=1e-12, atol=1e-12)
    c = NeymanPearsonClassifier(R).fit(sp.csr_matrix(with_ones), ds.y)   # sparse: same rule
    assert c.result_.w.shape == (4,) and c.coef_[0, 3] == 0.0
    np.testing.assert_allclose(c.coef_, b.coef_, atol=1e-4)
    # without fit_intercept the ones column is an ordinary (penalized) feature
    d = NeymanPearsonClassifier(0.5, fit_intercept=False).fit(with_ones, ds.y)
    assert d.result_.w.shape == (4,) and d.intercept_[0] == 0.0 and d.coef_[0, 3] != 0.0


# -- scale awareness ---------------------------------------------------------------------------

def test_raw_features_cost_the_rounds_of_standardized_ones():
    """Breast cancer, raw features (column std from 0.003 to 570) against the same
    problem on standardized features Xs = (X − m)/s, where the ridge α‖coef‖²/2 on the
    raw coefficients is the weighted ridge Σⱼ (α/sⱼ²)coefⱼ²/2 on the standardized ones:
    the same model, mapped back, and no more rounds.  (Without the internal scaling the
    raw fit took 10234 rounds against 2995; with it both take 1047.)  Oracle: cvxpy on
    the pooled problem."""
    datasets = pytest.importorskip("sklearn.datasets")
    data = datasets.load_breast_cancer()
    X, y = data.data, data.target
    m, s = X.mean(0), X.std(0)
    ids = stratified_split(y, 2, seed=0)
    alpha = 1000.0                              # strong enough to be well posed in raw units
    raw = NeymanPearsonClassifier(R, alpha=alpha).fit(X, y, client_ids=ids)
    std = NeymanPearsonClassifier(R, alpha=0.0, regularizer=prox.SquaredL2(alpha / s ** 2)
                                  ).fit((X - m) / s, y, client_ids=ids)
    assert raw.result_.status == std.result_.status == "optimal"
    mapped = std.coef_[0] / s
    assert np.max(np.abs(raw.coef_[0] - mapped)) <= 1e-6 * np.max(np.abs(mapped))
    assert raw.intercept_[0] == pytest.approx(std.intercept_[0] - mapped @ m, rel=1e-6)
    assert raw.result_.rounds <= 2 * std.result_.rounds
    # the independent model: pooled NP in cvxpy (on Xs, with the weighted ridge)
    value, coef, _ = np_reference((X - m) / s, y, ids, R, alpha / s ** 2)
    assert raw.result_.objective == pytest.approx(value, rel=1e-6)
    # w to the solve's accuracy (tol bounds residuals, not ‖w − w*‖; 1.3e-5 measured)
    np.testing.assert_allclose(raw.coef_[0], coef / s, rtol=0,
                               atol=1e-4 * np.abs(coef / s).max())


@pytest.mark.parametrize("damage", ["feature x 1e6", "sparse constant column"])
def test_a_badly_scaled_feature_or_a_constant_sparse_column_costs_at_most_twice_the_rounds(
        damage):
    """Issue 19's estimator target: one feature multiplied by 1e6, or a sparse X with a
    constant column that is not the last (a sparse X is not centred, so it duplicates the
    intercept), costs ≤ 2× the rounds of the clean data (measured: 41 and 29 against 27;
    with cf.solve's row scaling on top of the estimator's own coordinates the first took
    163).  Oracle: cvxpy on the pooled problem."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 6))
    y = (X @ rng.standard_normal(6) + 0.5 * rng.standard_normal(600) > 0).astype(int)
    ids = np.repeat([0, 1, 2], 200)
    clean = NeymanPearsonClassifier(0.3).fit(X, y, client_ids=ids)
    if damage == "feature x 1e6":
        Xd = X.copy()
        Xd[:, 2] *= 1e6
    else:
        Xd = sp.csr_array(np.c_[X[:, :3], np.ones(600), X[:, 3:]])
    fit = NeymanPearsonClassifier(0.3).fit(Xd, y, client_ids=ids)
    assert clean.result_.status == fit.result_.status == "optimal"
    assert fit.result_.rounds <= 2 * clean.result_.rounds
    if sp.issparse(Xd):
        value = np_reference(Xd.toarray(), y, ids, 0.3, np.full(7, 1e-2))[0]
    else:           # the same model on X with coef₂ in units of 1e-6 (ridge 1e-2/1e12)
        value = np_reference(X, y, ids, 0.3, np.r_[1e-2, 1e-2, 1e-14, 1e-2, 1e-2, 1e-2])[0]
    assert fit.result_.objective == pytest.approx(value, rel=1e-6, abs=1e-7)


def test_templates_warn_about_badly_scaled_features_and_estimators_do_not():
    import warnings
    datasets = pytest.importorskip("sklearn.datasets")
    from constrfl.problems import neyman_pearson
    data = datasets.load_breast_cancer()
    X, y = data.data, data.target
    ids = np.arange(len(y)) % 2
    with pytest.warns(UserWarning, match=r"neyman_pearson: feature scales differ by .*x "
                                         r".*standardize the columns"):
        neyman_pearson(X, y, ids, 0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        neyman_pearson((X - X.mean(0)) / X.std(0), y, ids, 0.2)     # standardized: quiet
        NeymanPearsonClassifier(R, alpha=1000.0, method="cproxal").fit(X, y, client_ids=ids)


def test_wide_sparse_fit_uses_compact_hessians_and_names_its_penalty_publicly():
    """Above d = 500 a sparse X fits by the sum of the Hessians (only sums leave the
    clients, inner="auto"), or by newton-basis with private=False (every client's
    Hessian is a few sparse entries); the same inner names as cf.solve are accepted (the
    same model by Newton-CG), and a refusal names no private class."""
    import scipy.sparse as sp
    rng = np.random.default_rng(0)
    X = sp.random(400, 600, density=0.02, random_state=rng, format="csr")
    y = (X @ rng.standard_normal(600) > 0).astype(int)
    ids = np.repeat(np.arange(4), 100)
    est = NeymanPearsonClassifier(0.3).fit(X, y, client_ids=ids)
    assert est.result_.status == "optimal"
    assert est.result_.settings["inner"] == "newton"
    shown = NeymanPearsonClassifier(0.3, solver_options={"private": False})
    shown.fit(X, y, client_ids=ids)
    assert shown.result_.settings["inner"] == "newton-basis"
    assert np.max(np.abs(shown.coef_ - est.coef_)) <= 1e-4
    cg = NeymanPearsonClassifier(0.3, solver_options={"inner": "newton-cg"})
    cg.fit(X, y, client_ids=ids)
    assert cg.result_.settings["inner"] == "newton-cg"
    assert np.max(np.abs(cg.coef_ - est.coef_)) <= 1e-4
    l1 = NeymanPearsonClassifier(0.3, regularizer=prox.L1(0.01),
                                    solver_options={"inner": "newton-cg"})
    with pytest.raises(ValueError, match="needs a smooth regularizer") as err:
        l1.fit(X, y, client_ids=ids)
    assert "_CoefPenalty" not in str(err.value) and "L1(lam=0.01)" in str(err.value)


def test_one_name_for_one_thing():
    """The template and the estimator both say ``sensitive_features``; string client
    labels name the clients as given; an estimator's bad bound names the estimator; an
    empty client says it is unnamed."""
    import inspect
    from constrfl.problems import fairness
    assert "sensitive_features" in inspect.signature(fairness).parameters
    assert "sensitive" not in inspect.signature(fairness).parameters
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 3))
    y = (X[:, 0] > 0).astype(int)
    sites = np.array(["White", "Black", "Asian"])[np.arange(120) % 3]
    est = NeymanPearsonClassifier(0.5).fit(X, y, client_ids=sites)
    assert set(est.result_.multipliers) == {"server", "White", "Black", "Asian"}
    for bad in (-1, 0.0, float("nan"), "0.2", True):
        with pytest.raises(ValueError, match=r"^NeymanPearsonClassifier: max_class1_loss"):
            NeymanPearsonClassifier(bad).fit(X, y, client_ids=sites)
    with pytest.raises(ValueError, match=r"^FairClassifier: max_disparity"):
        FairClassifier(-0.1).fit(X, y, sensitive_features=y, client_ids=sites)
    with pytest.raises(ValueError, match=r"client \(unnamed\): has neither"):
        Client()


def test_a_fitted_estimator_is_certified_and_takes_the_solvers_defaults():
    """cf.certify(clf, clf.result_) (and cf.certify(clf)) checks the fit against cvxpy on
    the problem the estimator solved; with inner='admm' and no beta the ADMM runs at its
    own default β of 2,000, with inner='newton' at Newton's 100: one source."""
    import constrfl as cf
    from constrfl.settings import ADMMSettings, NewtonSettings
    rng = np.random.default_rng(1)
    X = rng.standard_normal((150, 3))
    y = (X[:, 0] + 0.5 * rng.standard_normal(150) > 0).astype(int)
    ids = np.arange(150) % 3
    clf = NeymanPearsonClassifier(0.5).fit(X, y, client_ids=ids)
    cert = cf.certify(clf, clf.result_)
    assert cert.reference_status == "optimal" and cert.ok, cert
    assert cf.certify(clf).objective_gap == cert.objective_gap
    assert clf.result_.settings["beta"] == NewtonSettings().beta
    admm = NeymanPearsonClassifier(0.5, solver_options={"inner": "admm"}).fit(
        X, y, client_ids=ids)
    assert admm.result_.settings["beta"] == ADMMSettings().beta == 2000.0
    with pytest.raises(TypeError, match="fitted estimator"):
        cf.certify("not a problem", clf.result_)


def test_a_neyman_pearson_scorer_picks_a_bound_that_holds_out_of_sample():
    """GridSearchCV over the fitted bound: accuracy (the default) rewards a loose bound,
    whose class-1 loss breaks the application's bound 0.3 on held-out rows;
    neyman_pearson_scorer(0.3) picks one that keeps it there (minus the class-0 error
    when it does, below −1 when it does not)."""
    model_selection = pytest.importorskip("sklearn.model_selection")
    from constrfl.estimators import neyman_pearson_scorer
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 4))
    y = (X[:, 0] + X[:, 1] + 0.8 * rng.standard_normal(600) > 0).astype(int)
    ids = np.arange(600) % 3
    grid = {"max_class1_loss": [0.2, 0.3, 0.45, 0.7]}
    by_accuracy = model_selection.GridSearchCV(NeymanPearsonClassifier(), grid, cv=3)
    by_accuracy.fit(X, y, client_ids=ids)
    scorer = neyman_pearson_scorer(0.3)
    by_np = model_selection.GridSearchCV(NeymanPearsonClassifier(), grid, cv=3,
                                         scoring=scorer)
    by_np.fit(X, y, client_ids=ids)
    assert by_accuracy.best_params_["max_class1_loss"] > 0.3
    assert by_np.best_params_["max_class1_loss"] <= 0.3
    assert -1.0 <= by_np.best_score_ <= 0.0                # the bound held in every fold
    # the score by hand on one held-out split
    est = NeymanPearsonClassifier(0.2).fit(X[:400], y[:400], client_ids=ids[:400])
    s = est.decision_function(X[400:])
    ones = y[400:] == 1
    assert np.mean(np.logaddexp(0.0, -s[ones])) <= 0.3
    assert scorer(est, X[400:], y[400:]) == -np.mean(s[~ones] > 0)
    with pytest.raises(ValueError, match="max_class1_loss"):
        neyman_pearson_scorer(-1)
