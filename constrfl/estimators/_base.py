"""The binary linear classifier behind both estimators: prediction, input checks, the
solve and its failure handling (see :mod:`constrfl.estimators`)."""
from __future__ import annotations

import contextlib
import numbers
import warnings

import numpy as np
from scipy.special import expit, log_expit

from ..api import METHODS, solve
from ..settings import ADMMSettings, NewtonSettings
from ..prox import Regularizer
from ._coordinates import _coef_penalty, _column_std, _Coordinates, _ridge_weight
from ._sklearn import (HAVE_SKLEARN, ConvergenceWarning, _BaseEstimator, _ClassifierMixin,
                       _sk_validate_data, check_classification_targets, check_is_fitted)
from ._validation import _as_2d_float, _as_labels, _seed


class ConvergenceError(RuntimeError):
    """``fit`` did not reach ``status == "optimal"``; ``.result`` is the SolveResult."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


# -- shared machinery ----------------------------------------------------------------------

_RESERVED = ("method", "tol", "beta", "seed")


class _ConstrainedLogistic(_ClassifierMixin, _BaseEstimator):
    """Binary linear classifier whose weights solve a constrfl template (see
    :mod:`constrfl.estimators`)."""

    # -- prediction ------------------------------------------------------------------------
    def decision_function(self, X):
        """``X @ coef_[0] + intercept_[0]``, shape (n_samples,); > 0 means classes_[1]."""
        X = self._validate_X(X)
        return X @ self.coef_[0] + self.intercept_[0]

    def predict(self, X):
        """``classes_[1]`` where ``decision_function(X) > 0``, else ``classes_[0]``."""
        positive = self.decision_function(X) > 0         # raises NotFittedError first
        return self.classes_[positive.astype(np.intp)]

    def predict_proba(self, X):
        """Sigmoid of the decision function: columns ``[1 − p, p]`` for ``classes_``."""
        s = self.decision_function(X)
        return np.column_stack([expit(-s), expit(s)])

    def predict_log_proba(self, X):
        """``log(predict_proba(X))``, computed without underflow."""
        s = self.decision_function(X)
        return np.column_stack([log_expit(-s), log_expit(s)])

    def __sklearn_is_fitted__(self):
        return hasattr(self, "result_")

    # -- scikit-learn tags: binary only ----------------------------------------------------
    def __sklearn_tags__(self):                         # scikit-learn >= 1.6
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = True
        return tags

    def _more_tags(self):                               # scikit-learn < 1.6
        return {"binary_only": True}

    # -- input checks ----------------------------------------------------------------------
    def _validate_X(self, X):
        check_is_fitted(self)
        if HAVE_SKLEARN:
            return _sk_validate_data(self, X, reset=False, dtype=np.float64,
                                     accept_sparse="csr")
        X = _as_2d_float(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                             f"expecting {self.n_features_in_} features as input.")
        return X

    def _validate_fit(self, X, y):
        """Checked (X, y) and the encoded labels: ``classes_[y01] == y``."""
        self._reset()                                   # a failed refit leaves no stale model
        if HAVE_SKLEARN:
            X, y = _sk_validate_data(self, X, y, dtype=np.float64, accept_sparse="csr")
            check_classification_targets(y)
        else:
            X = _as_2d_float(X, "X")
            y = _as_labels(y, X.shape[0], "y")
        classes, y01 = np.unique(y, return_inverse=True)
        if len(classes) != 2:
            raise ValueError(f"Only binary classification is supported: y must hold exactly "
                             f"2 classes, got {len(classes)} class"
                             f"{'es' if len(classes) != 1 else ''} ({classes[:5]!r})")
        return X, y01.reshape(-1), classes

    def _reset(self):
        for name in [a for a in vars(self) if a.endswith("_") and not a.startswith("_")]:
            delattr(self, name)

    def _check_params(self):
        bound = getattr(self, self._bound)
        if (isinstance(bound, bool) or not isinstance(bound, numbers.Real)
                or not np.isfinite(bound) or bound <= 0):
            raise ValueError(f"{type(self).__name__}: {self._bound} must be a finite number "
                             f"> 0, got {bound!r}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        a = self.alpha
        if isinstance(a, bool) or not isinstance(a, numbers.Real) or not np.isfinite(a) or a < 0:
            raise ValueError(f"alpha must be a finite number >= 0, got {a!r}")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be True or False, got {self.fit_intercept!r}")
        if self.regularizer is not None and not isinstance(self.regularizer, Regularizer):
            raise ValueError("regularizer must be None or a constrfl.prox.Regularizer, got "
                             f"{type(self.regularizer).__name__}")
        if self.on_failure not in ("raise", "warn"):
            raise ValueError(f"on_failure must be 'raise' or 'warn', got {self.on_failure!r}")
        opts = {} if self.solver_options is None else self.solver_options
        if not isinstance(opts, dict):
            raise ValueError(f"solver_options must be None or a dict, got "
                             f"{type(opts).__name__}")
        clash = sorted(set(opts) & set(_RESERVED))
        if clash:
            raise ValueError(f"solver_options must not set {clash}: they are the estimator's "
                             "parameters (random_state for seed)")
        return dict(opts)

    def _beta(self, options):
        """β of the fit: ``beta``, or the default of the settings record of the inner
        solver ``options`` ask for (one source: :mod:`constrfl.settings`)."""
        if self.beta is not None:
            return self.beta
        return (ADMMSettings if options.get("inner") == "admm" else NewtonSettings)().beta

    def _coordinates(self, X, options):
        """The solver's coordinates for this fit (see :class:`_Coordinates`)."""
        coords = _Coordinates(X, self.fit_intercept)
        coords.scale = self._column_scales(X[:, :coords.k], self._beta(options))
        return coords

    def _column_scales(self, F, beta):
        """σ_j of :class:`_Coordinates`: ``std_j`` capped at ``√(a_j·beta)``, with
        ``a_j`` coef_j's ridge weight (alpha plus the regularizer's own ½·q·coef² part);
        ``std_j`` alone where ``a_j = 0``; 1 for constant columns, and 1 throughout for a
        non-separable regularizer (see :mod:`constrfl.estimators`)."""
        k = F.shape[1]
        if self.regularizer is not None and not self.regularizer.separable:
            return np.ones(k)
        std = _column_std(F)
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not beta > 0:
            return np.where(std > 0, std, 1.0)           # solve() names the bad beta
        a = self.alpha + np.broadcast_to(_ridge_weight(self.regularizer, k), (k,))
        sigma = np.where(a > 0, np.minimum(std, np.sqrt(a * float(beta))), std)
        return np.where(sigma > 0, sigma, 1.0)

    def _penalty(self, coords):
        if self.alpha == 0 and self.regularizer is None:
            return None
        return _coef_penalty(self.alpha, self.regularizer, coords.k, coords.scale)

    def _solve_and_store(self, problem, coords, classes, options):
        # the columns are already centred and scaled (_Coordinates); cf.solve's row
        # scaling on top of them (its default, scaling="rows") slows the fit: NP, one
        # feature × 1e6, 163 rounds against 41 without it (27 on the clean data)
        given = {k: v for k, v in (("tol", self.tol), ("beta", self.beta)) if v is not None}
        res = solve(problem, method=self.method, seed=_seed(self.random_state),
                    **{"scaling": False, **given, **options})
        if res.status != "optimal":
            text = (f"{type(self).__name__}.fit: the solve stopped with status "
                    f"{res.status!r} ({res.message}); the model may violate its constraints "
                    "or be far from optimal.")
            hint = (" The constraint bound looks unattainable on some client (or the "
                    "server): loosen it, or fit an intercept." if res.status == "infeasible"
                    else " Try a larger alpha, standardized features, a looser tol or "
                    "solver_options={'max_outer': ...}.")
            if self.on_failure == "raise":
                self._reset()
                raise ConvergenceError(text + hint + " The SolveResult is err.result; "
                                       "on_failure='warn' keeps the model instead.", res)
            warnings.warn(text + " Inspect result_.status and result_.kkt.",
                          ConvergenceWarning, stacklevel=3)
        coef, intercept = coords.model(res.w)
        self.classes_ = classes
        self.coef_ = coef.reshape(1, -1)
        self.intercept_ = np.array([intercept])
        self.result_ = res
        self.problem_ = problem
        if not HAVE_SKLEARN:
            self.n_features_in_ = coords.n_features
        return self

    def _encode_server_labels(self, y0, classes):
        y0 = _as_labels(y0, None, "server_data y")
        unknown = ~np.isin(y0, classes)
        if unknown.any():
            raise ValueError(f"server_data holds labels {np.unique(y0[unknown])[:5]!r} not in "
                             f"classes_ {classes!r}")
        return (y0 == classes[1]).astype(np.float64)


@contextlib.contextmanager
def _scaled_on_purpose():
    """The templates warn about badly scaled columns; the estimators' design is scaled
    by choice (the caps of ``_column_scales`` keep the penalty's curvature), so that
    warning would only mislead here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*feature scales differ",
                                category=UserWarning)
        yield
