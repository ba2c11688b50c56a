"""The Neyman-Pearson classifier (template (30)); see :mod:`constrfl.estimators`."""
from __future__ import annotations

import numpy as np

from .. import problems
from ._base import _ConstrainedLogistic, _scaled_on_purpose
from ._sklearn import _store_params
from ._validation import _ids, _pair, _server_X


class NeymanPearsonClassifier(_ConstrainedLogistic):
    """Neyman-Pearson logistic classifier (template (30)), trained over clients.

    ``min (1/n) Σᵢ L(w; Dᵢ⁰) + (alpha/2)‖coef‖² + regularizer(coef)
    s.t. L(w; Dᵢ¹) ≤ max_class1_loss`` for every client i, where ``L`` is the mean
    logistic loss (31), ``Dᵢ¹`` client i's rows of the protected class ``classes_[1]``,
    ``Dᵢ⁰`` its rows of ``classes_[0]`` and n the number of clients holding such rows
    (a client without them has no objective term; one without ``Dᵢ¹`` no constraint).
    See :mod:`constrfl.estimators` for labels, intercept, failure handling and
    cross-validation.

    Parameters
    ----------
    max_class1_loss : float > 0, the bound r on every client's class-1 mean logistic loss.
    alpha : float >= 0, strength of the L2 penalty on coef (the intercept is free).
    regularizer : None or a :mod:`constrfl.prox` regularizer on coef, added to the penalty
        (e.g. ``prox.L1(0.01)``; an array-valued one such as ``prox.Box`` has one entry
        per feature).
    method : ``"fedproxal"`` (federated, Algorithm 1) or ``"cproxal"`` (centralized).
    tol : ε or (ε₁, ε₂) of :func:`constrfl.solve` (None: its default, 1e-6);
        ``"optimal"`` guarantees every constraint holds within ε₂.
    beta : the augmented Lagrangian's penalty β (None: the inner solver's default of
        :mod:`constrfl.settings`, 100 for Newton, 2,000 for ``inner="admm"``).
    fit_intercept : append a column of ones to X (its weight is ``intercept_``).
    random_state : None, int, RandomState or Generator: the seed of the solver's random
        start point (the solution itself does not depend on it beyond ``tol``).
    solver_options : None or a dict of further :func:`constrfl.solve` options
        (``rho``, ``max_outer``, ``local_solver``, ``verbose``, ...).
    on_failure : ``"raise"`` (:class:`ConvergenceError`) or ``"warn"``
        (:class:`ConvergenceWarning`, model kept) when the status is not ``"optimal"``.

    Attributes
    ----------
    classes_ : the two labels, sorted; ``classes_[1]`` is the protected class.
    coef_ : ndarray (1, n_features).   intercept_ : ndarray (1,) (0 without intercept).
    result_ : the :class:`~constrfl.result.SolveResult` (status, kkt, multipliers per
        client — its ``client_ids`` label when a string, else ``"client-<id>"`` —,
        rounds, history; ``result_.w`` includes the intercept).
    n_features_in_ : int.   feature_names_in_ : set by scikit-learn for DataFrames.
    """

    _bound = "max_class1_loss"         # the template's bound, checked in _check_params

    def __init__(self, max_class1_loss=0.2, *, alpha=1e-2, regularizer=None,
                 method="fedproxal", tol=None, beta=None, fit_intercept=True,
                 random_state=0, solver_options=None, on_failure="raise"):
        _store_params(self, locals())

    def fit(self, X, y, client_ids=None, server_data=None):
        """Solve the template on ``(X, y)``.

        client_ids : None (one client) or one label per row naming its client.  A
            client lacking rows of one class is fitted as it is (a small client, or a
            cross-validation fold): without ``classes_[1]`` rows it has no constraint,
            without ``classes_[0]`` rows no objective term (the objective is the mean
            over the clients holding such rows).  Cross-validation over clients:
            ``GridSearchCV(..., cv=GroupKFold()).fit(X, y, groups=ids, client_ids=ids)``
            validates on clients left out of training; the default (stratified) folds
            validate on new rows of the same clients.
        server_data : None or ``(X0, y0)``: the server's rows; adds the global constraint
            ``L(w; D₀¹) ≤ max_class1_loss`` on its rows of ``classes_[1]``.
        """
        X, y01, classes = self._validate_fit(X, y)
        options = self._check_params()
        ids = _ids(client_ids, X.shape[0])
        coords = self._coordinates(X, options)
        server = None
        if server_data is not None:
            X0, y0 = _pair(server_data, 2, "(X0, y0)")
            X0 = _server_X(X0, X.shape[1])
            server = (coords.design(X0), self._encode_server_labels(y0, classes))
        with _scaled_on_purpose():
            problem = problems.neyman_pearson(coords.design(X), y01.astype(np.float64), ids,
                                              max_class1_loss=self.max_class1_loss,
                                              server_data=server,
                                              regularizer=self._penalty(coords))
        return self._solve_and_store(problem, coords, classes, options)


def neyman_pearson_scorer(max_class1_loss):
    """A scorer ``(estimator, X, y) -> float`` for model selection under the Neyman-Pearson
    paradigm (``GridSearchCV(..., scoring=neyman_pearson_scorer(r))``), on held-out rows:
    when the mean logistic loss of the ``classes_[1]`` rows is within ``max_class1_loss``
    (the bound the application needs, whatever bound a candidate was fitted with), the
    score is minus the class-0 error rate (the share of ``classes_[0]`` rows predicted
    ``classes_[1]``), in [−1, 0]; otherwise it is −1 minus the excess, below every
    candidate that meets the bound.  (Accuracy, the default, rewards the loosest bound.)"""
    bound = float(max_class1_loss)
    if not (np.isfinite(bound) and bound > 0):
        raise ValueError(f"neyman_pearson_scorer: max_class1_loss must be a finite number "
                         f"> 0, got {max_class1_loss!r}")

    def score(estimator, X, y):
        y = np.asarray(y)
        positive = y == estimator.classes_[1]
        s = estimator.decision_function(X)
        class1 = float(np.mean(np.logaddexp(0.0, -s[positive]))) if positive.any() else 0.0
        if class1 > bound:
            return -1.0 - (class1 - bound)
        return -float(np.mean(s[~positive] > 0)) if (~positive).any() else 0.0
    return score
