"""The fairness-constrained classifier (template (32)); see :mod:`constrfl.estimators`."""
from __future__ import annotations

import warnings

import numpy as np

from .. import problems
from ._base import _ConstrainedLogistic, _scaled_on_purpose
from ._sklearn import _store_params
from ._validation import _as_labels, _ids, _pair, _server_X


class FairClassifier(_ConstrainedLogistic):
    """Fairness-constrained logistic regression (template (32)), trained over clients.

    ``min (1/n) Σᵢ L(w; Dᵢ) + (alpha/2)‖coef‖² + regularizer(coef)
    s.t. |L(w; Dᵢᵃ) − L(w; Dᵢᵇ)| ≤ max_disparity`` for every client i holding rows of
    both groups (and for the server's rows when ``server_data`` is given), where ``a``,
    ``b`` are the two values of ``sensitive_features``.  The constraints are nonconvex,
    so ``"optimal"`` means an (ε₁, ε₂)-KKT point (feasible within ε₂), not a certified
    global minimum.  Parameters and attributes as :class:`NeymanPearsonClassifier`, with
    ``max_disparity`` (δ > 0) in place of ``max_class1_loss``.

    **Without** ``sensitive_features`` (as in scikit-learn's ``check_estimator``, or a
    pipeline that cannot route it) every row is in one group, so no disparity
    constraint applies: ``fit`` warns (UserWarning) and fits plain penalized logistic
    regression, as fairlearn's AdversarialFairnessClassifier treats missing sensitive
    features as one group.  (fairlearn's reductions raise instead.)
    """

    _bound = "max_disparity"           # the template's bound, checked in _check_params

    def __init__(self, max_disparity=0.1, *, alpha=1e-2, regularizer=None,
                 method="fedproxal", tol=None, beta=None, fit_intercept=True,
                 random_state=0, solver_options=None, on_failure="raise"):
        _store_params(self, locals())

    def fit(self, X, y, *, sensitive_features=None, client_ids=None, server_data=None,
            sensitive=None):
        """Solve the template on ``(X, y)``.

        sensitive_features : None, one value per row (two distinct values, the groups
            a < b), or the name of a column of a DataFrame X.  A named column stays a
            feature of the model (so it must be numeric, and ``predict`` takes the same
            columns); to leave it out, pass ``X.drop(columns=name)`` and ``X[name]``.
            None: no disparity constraint, see the class doc.
        client_ids : None (one client) or one client label per row.  A client lacking
            rows of one group gets no disparity constraint (its disparity is undefined);
            a UserWarning is emitted when that leaves no constraint at all.  A client
            lacking rows of one class is fitted as it is.  Cross-validation over clients:
            ``GridSearchCV(..., cv=GroupKFold()).fit(X, y, groups=ids, client_ids=ids,
            sensitive_features=s)`` validates on clients left out of training.
        server_data : None or ``(X0, y0, s0)``: the server's rows (both groups needed;
            ``s0`` as ``sensitive_features``, or a column name of a DataFrame X0), with
            the same disparity constraint.
        sensitive : deprecated name of ``sensitive_features`` (FutureWarning).
        """
        s = _sensitive_column(X, _renamed_sensitive(sensitive, sensitive_features))
        X, y01, classes = self._validate_fit(X, y)
        options = self._check_params()
        ids = _ids(client_ids, X.shape[0])
        s = None if s is None else _as_labels(s, X.shape[0], "sensitive_features")
        coords = self._coordinates(X, options)
        server, s0 = None, None
        if server_data is not None:
            X0, y0, s0 = _pair(server_data, 3, "(X0, y0, s0)")
            s0 = _sensitive_column(X0, s0)
            X0 = _server_X(X0, X.shape[1])
            s0 = _as_labels(s0, X0.shape[0], "server_data sensitive")
        given = [g for g in (s, s0) if g is not None]
        groups = np.unique(np.concatenate(given)) if given else None
        if given and len(groups) != 2:
            raise ValueError(f"sensitive_features must hold exactly 2 groups, got "
                             f"{len(groups)} ({groups[:5]!r})")
        if server_data is not None:
            y0 = self._encode_server_labels(y0, classes)
            if len(y0) != X0.shape[0]:
                raise ValueError("server_data: X0 and y0 differ in length")
            server = (coords.design(X0), y0, (s0 == groups[1]).astype(np.int64))
        in_b = np.zeros(X.shape[0], bool) if s is None else s == groups[1]
        with _scaled_on_purpose():
            problem = problems.fairness(coords.design(X), y01.astype(np.int64), ids,
                                        self.max_disparity,
                                        sensitive_features=in_b.astype(np.int64),
                                        server_data=server,
                                        regularizer=self._penalty(coords))
        if not any(p.n_ineq for p in problem.parties):
            why = ("no sensitive_features given" if s is None else
                   "no client holds rows of both sensitive groups")
            warnings.warn(f"FairClassifier.fit: {why} and there is no server_data, so no "
                          "disparity constraint applies (plain penalized logistic "
                          "regression)", UserWarning, stacklevel=2)
        return self._solve_and_store(problem, coords, classes, options)


def _renamed_sensitive(sensitive, sensitive_features):
    """``sensitive_features``, or the deprecated ``sensitive`` with a FutureWarning."""
    if sensitive is None:
        return sensitive_features
    if sensitive_features is not None:
        raise TypeError("FairClassifier.fit: pass sensitive_features only (sensitive is "
                        "its deprecated name)")
    warnings.warn("FairClassifier.fit(sensitive=...) is deprecated and will be removed: "
                  "use sensitive_features=... (fairlearn's name)", FutureWarning,
                  stacklevel=3)
    return sensitive


def _sensitive_column(X, sensitive_features):
    """The sensitive feature as given, or X's column of that name (a DataFrame X)."""
    if not isinstance(sensitive_features, str):
        return sensitive_features
    columns = getattr(X, "columns", None)
    if columns is None or sensitive_features not in columns:
        raise ValueError(f"sensitive_features={sensitive_features!r} names a column, but "
                         + ("X is not a DataFrame" if columns is None else
                            f"X has no such column ({list(columns)[:10]!r})"))
    return np.asarray(X[sensitive_features])
