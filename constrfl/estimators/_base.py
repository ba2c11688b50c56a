"""Scikit-learn-style estimators for the classification templates.

:class:`NeymanPearsonClassifier` (template (30)) and :class:`FairClassifier` (template (32))
wrap ``problems.neyman_pearson`` / ``problems.fairness`` and :func:`constrfl.solve` behind
``fit`` / ``predict`` / ``predict_proba`` / ``decision_function`` / ``score`` /
``get_params`` / ``set_params``::

    from constrfl.estimators import NeymanPearsonClassifier
    clf = NeymanPearsonClassifier(max_class1_loss=0.2).fit(X, y, client_ids=site)
    clf.predict(X_new); clf.coef_, clf.intercept_, clf.result_.kkt

**scikit-learn is optional.**  When it is installed the estimators derive from its
``ClassifierMixin`` and ``BaseEstimator`` and validate their input with its
``validate_data``, so ``clone``, ``Pipeline``, ``GridSearchCV`` and ``check_estimator``
work: ``check_estimator(NeymanPearsonClassifier())`` and
``check_estimator(FairClassifier())`` pass, unmodified (FairClassifier fits without a
disparity constraint, and warns, when no ``sensitive_features`` are given, as in those
checks; see its docstring).  Without it, a small stand-in base class gives the same
``get_params`` / ``set_params`` (read off the ``__init__`` signature), ``score``
(accuracy) and input checks on NumPy arrays.

The model
---------
A linear classifier: ``decision_function(X) = X @ coef_[0] + intercept_[0]``;
``predict`` returns ``classes_[1]`` where it is > 0, else ``classes_[0]``;
``predict_proba`` is the logistic sigmoid of it (columns in ``classes_`` order).  The
weights solve a constrained *training* problem, so these are scores, not calibrated
probabilities.  The objective is the template's, plus the penalty
``(alpha/2)‖coef‖² + regularizer(coef)``:

* ``fit_intercept=True`` appends a column of ones to X internally; its weight is
  ``intercept_``.  **If X already ends with a column of ones** (the loaders of
  :mod:`constrfl.problems.datasets` append one), that column is taken as the intercept
  instead of adding a second one: its ``coef_`` entry is 0, ``regularizer`` acts on the
  other ``n_features − 1`` columns, and the model is exactly that fitted on X without
  the column.  (With ``fit_intercept=False`` a ones column is an ordinary feature.)
  **The penalty and the regularizer act on coef only**; the intercept is
  free (as in scikit-learn's LogisticRegression).  Because it is free, the solver works
  with the features centred by their pooled column means ``m`` (score
  ``coef·(x − m) + b′``, and ``intercept_ = b′ − coef·m``): an exact reparametrization
  (same losses, constraints and solution) that keeps the solve well conditioned when the
  features are far from 0; with features of mean 100 it is the difference between 8
  outer iterations and 200 without convergence.  A ``scipy.sparse`` X is not centred
  (that would densify it) and stays sparse.
* **Column scales.**  The solver's columns are also divided by scales σⱼ (sparse ones
  too): the column's standard deviation, capped at ``√(aⱼ·beta)``, where aⱼ is coef_j's
  ridge weight (``alpha`` plus the l2 part of a SquaredL2/ElasticNet ``regularizer``).
  This too is exact: the solver's point is ``c̃ = σ·coef``, and the penalty keeps its
  meaning on the *original* coef as the weighted penalty ``(α/2)‖c̃/σ‖² + R(c̃/σ)``,
  whose prox is exact coordinate by coordinate for a separable regularizer (with a
  non-separable one, L1Ball, L2Ball or Nuclear, the columns are not scaled).  The cap:
  in the solver's coordinates the ridge's curvature is aⱼ/σⱼ², and the outer proximal
  loop contracts by 1/(1 + beta·curvature) where the data are flat; the cap keeps that
  curvature ≥ 1/beta.  The rule is
  unit-free: raw features cost the rounds of standardized features fitted with the
  equivalent weighted ridge (``prox.SquaredL2(alpha / s**2)``).  Measured on
  scikit-learn's raw breast-cancer data, 5 clients, fedproxal (NP, r = 0.3): alpha = 10,
  33 rounds with the cap against 145 uncapped (standardized data: 20); alpha = 1e-2, 55
  against 143 (standardized: 36).  The price: a feature × 1e6 keeps most of its scale
  (NP, 600 Gaussian rows, 6 features, 3 clients: 83 rounds against 26 on the clean data;
  uncapped, 26).
* ``result_`` (``w``, ``kkt``) is in the solver's coordinates,
  ``result_.w = [σ·coef, b′]``.  In a real deployment the means and scales cost every
  client one message (its column sums, sums of squares and row count) that
  ``result_.rounds`` and ``bytes_up`` do not count.  ``tol`` is absolute in these
  coordinates.
* ``alpha > 0`` (default 1e-2) makes the objective strongly convex.  It matters: on
  linearly separable data (the standardized breast-cancer data are separable, as are
  most small or high-dimensional data sets) the losses can be driven to 0 by scaling w, the unpenalized
  problem has no minimizer, and the solver cannot reach ``status == "optimal"``.

Labels
------
``y`` may hold any two labels; ``classes_ = np.unique(y)`` (sorted) and **``classes_[1]``
plays the role of class 1** of the templates: for the Neyman-Pearson classifier it is the
*protected* class whose mean logistic loss is bounded by ``max_class1_loss`` on every
client (relabel, e.g. ``y == "malignant"``, to choose which class is protected).

Failure is loud
---------------
``fit`` checks ``result_.status``.  Unless it is ``"optimal"`` (KKT residuals, recomputed
at the returned point, within ``tol``; in particular no constraint is violated by more
than ε₂, the second entry of ``tol``), ``on_failure="raise"`` (the default) raises :class:`ConvergenceError`, which
carries the :class:`~constrfl.result.SolveResult` as ``err.result``, and leaves the
estimator unfitted.  ``on_failure="warn"`` keeps the model, sets the fitted attributes
and emits a :class:`ConvergenceWarning` instead; then ``result_.status`` and
``result_.kkt`` say how far from optimal and feasible it is.  An unattainable bound ends
in status ``"infeasible"``, hence in the same error.

``score`` is the accuracy (scikit-learn's convention); what the constraint controls is a
loss, so judge a Neyman-Pearson model by its class-1 loss or recall as well.

Cross-validation
----------------
Per-row arguments of ``fit`` (``client_ids``, ``sensitive_features``) are split with
the rows by ``GridSearchCV`` and ``cross_val_score``.  The default folds (stratified
by class) test new rows of the same clients; a training fold may leave a small client
without one class, which is fitted as it is (see each ``fit``).  To test on clients
left out of training, group the folds by client::

    GridSearchCV(NeymanPearsonClassifier(), grid, cv=GroupKFold(5)).fit(
        X, y, groups=client_ids, client_ids=client_ids)
"""
from __future__ import annotations

import contextlib
import inspect
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, log_expit

from .. import problems
from ..api import METHODS, solve
from ..prox import Boxed, ElasticNet, Regularizer, SquaredL2, Zero, rescaled_pieces

try:                                                    # scikit-learn is optional
    from sklearn.base import BaseEstimator as _BaseEstimator
    from sklearn.base import ClassifierMixin as _ClassifierMixin
    from sklearn.exceptions import ConvergenceWarning, NotFittedError
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_is_fitted
    try:
        from sklearn.utils.validation import validate_data as _sk_validate_data   # >= 1.6
    except ImportError:                                 # 1.3 - 1.5
        def _sk_validate_data(estimator, *args, **kwargs):
            return estimator._validate_data(*args, **kwargs)
    HAVE_SKLEARN = True
except ImportError:
    HAVE_SKLEARN = False

__all__ = ["NeymanPearsonClassifier", "FairClassifier", "ConvergenceError",
           "ConvergenceWarning", "NotFittedError", "HAVE_SKLEARN"]


class ConvergenceError(RuntimeError):
    """``fit`` did not reach ``status == "optimal"``; ``.result`` is the SolveResult."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


# -- stand-ins for scikit-learn's base classes ---------------------------------------------

if not HAVE_SKLEARN:
    class ConvergenceWarning(UserWarning):
        """The solve behind ``fit`` stopped before ``status == "optimal"``."""

    class NotFittedError(ValueError, AttributeError):
        """The estimator is used before ``fit`` (as scikit-learn's NotFittedError)."""

    class _BaseEstimator:
        """``get_params`` / ``set_params`` read off the ``__init__`` signature, as in
        scikit-learn: every ``__init__`` argument is stored unchanged under its name."""

        @classmethod
        def _get_param_names(cls):
            sig = inspect.signature(cls.__init__)
            return sorted(p.name for p in sig.parameters.values()
                          if p.name != "self" and p.kind != p.VAR_KEYWORD)

        def get_params(self, deep=True):
            out = {}
            for name in self._get_param_names():
                value = getattr(self, name)
                if deep and hasattr(value, "get_params") and not isinstance(value, type):
                    out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
                out[name] = value
            return out

        def set_params(self, **params):
            valid = self._get_param_names()
            nested = {}
            for key, value in params.items():
                name, sep, sub = key.partition("__")
                if name not in valid:
                    raise ValueError(f"Invalid parameter {name!r} for estimator {self!r}. "
                                     f"Valid parameters are: {valid!r}.")
                if sep:
                    nested.setdefault(name, {})[sub] = value
                else:
                    setattr(self, name, value)
            for name, sub in nested.items():
                getattr(self, name).set_params(**sub)
            return self

        def __repr__(self):
            default = {p.name: p.default for p in
                       inspect.signature(type(self).__init__).parameters.values()}
            args = ", ".join(f"{k}={v!r}" for k, v in self.get_params(deep=False).items()
                             if not _same(v, default.get(k, inspect.Parameter.empty)))
            return f"{type(self).__name__}({args})"

    class _ClassifierMixin:
        _estimator_type = "classifier"

        def score(self, X, y, sample_weight=None):
            """Mean accuracy of ``predict(X)`` against ``y``."""
            return float(np.average(self.predict(X) == np.asarray(y), weights=sample_weight))

    def check_is_fitted(estimator):
        if not estimator.__sklearn_is_fitted__():
            raise NotFittedError(f"This {type(estimator).__name__} instance is not fitted "
                                 "yet. Call 'fit' with appropriate arguments before using "
                                 "this estimator.")


def _store_params(estimator, params):
    """``__init__``'s arguments stored unchanged under their names (scikit-learn's
    convention: ``get_params`` reads them back by the signature)."""
    for name, value in params.items():
        if name != "self":
            setattr(estimator, name, value)


def _same(a, b):
    try:
        return bool(a is b or a == b)
    except Exception:                                   # arrays and the like
        return False


# -- the penalty on coef (not the intercept) -----------------------------------------------

class _CoefPenalty(Regularizer):
    """The estimator's penalty in the solver's coordinates ``w = (c̃, b̃)``, where
    ``c̃ = σ·coef`` (σ > 0 the column scales of :class:`_Coordinates`; 1 without
    scaling): ``P(w) = (α/2)‖u‖² + R(u)`` with ``u = c̃/σ = coef``, none on the intercept.

    prox, per coordinate of coef: ``prox_{tP}(v) = σ·prox_{t'(R + (α/2)·²)}(v/σ)`` with
    ``t' = t/σ²`` (substitute c̃ = σu in ``tP + ½‖c̃ − v‖²`` and divide by σ²), and
    ``prox_{t'(R + (α/2)‖·‖²)}(x) = prox_{t'R/(1+t'α)}(x/(1+t'α))``: exact for any convex
    R when σ ≡ 1, for a separable R (coordinate-wise t') otherwise.  Subgradients:
    ``∂P(w)_j = (α u_j + ∂R(u)_j)/σ_j``.
    """

    def __init__(self, alpha, inner, k, scale=None):
        self.alpha, self.inner, self.k = float(alpha), inner, int(k)
        self.scale = np.ones(self.k) if scale is None else np.asarray(scale, dtype=np.float64)
        self.separable = inner is None or inner.separable
        self.exact_dist = inner is None or inner.exact_dist
        if not self.separable and np.any(self.scale != 1.0):
            raise ValueError("scaled coordinates need a separable regularizer")

    def _split(self, t):
        t = np.asarray(t, dtype=np.float64)
        return t if t.ndim == 0 else t[:self.k]

    def value(self, w):
        u = w[:self.k] / self.scale
        return 0.5 * self.alpha * float(u @ u) + (0.0 if self.inner is None
                                                  else self.inner.value(u))

    def prox(self, v, t):
        out = np.array(v, dtype=np.float64)
        tk = self._split(t) / self.scale ** 2
        s = 1.0 + tk * self.alpha
        u = out[:self.k] / self.scale / s
        if self.inner is not None:
            u = self.inner.prox(u, tk / s)
        out[:self.k] = self.scale * u
        return out

    def subgradients(self, w, atol=0.0):
        """Separable ``inner`` only: ``(α·u + ∂R(u))/σ`` on coef, ``{0}`` on the rest."""
        u = np.asarray(w[:self.k], dtype=np.float64) / self.scale
        lo = np.zeros(np.shape(w))
        hi = np.zeros(np.shape(w))
        lo[:self.k] = hi[:self.k] = self.alpha * u
        if self.inner is not None:
            ilo, ihi = self.inner.subgradients(u, atol)
            lo[:self.k] += ilo
            hi[:self.k] += ihi
        lo[:self.k] /= self.scale
        hi[:self.k] /= self.scale
        return lo, hi

    def dist(self, w, g, atol=0.0):
        if self.separable:
            return super().dist(w, g, atol)
        c, gc = w[:self.k], g[:self.k] + self.alpha * w[:self.k]      # σ ≡ 1 here
        return max(self.inner.dist(c, gc, atol), float(np.max(np.abs(g[self.k:]), initial=0.0)))

    def pieces(self, dim):
        """With R's pieces (q, λ, lo, hi) in u = c̃/σ: ``((α + q)/σ², λ/σ, σ·lo, σ·hi)``
        on coef, nothing on the intercept (None when R is not piecewise quadratic)."""
        inner = (Zero() if self.inner is None else self.inner).pieces(self.k)
        if inner is None:
            return None
        coef = rescaled_pieces((self.alpha + inner[0], *inner[1:]), 1.0 / self.scale)
        return tuple(np.concatenate([a, b]) for a, b in zip(coef, Zero().pieces(dim - self.k)))

    def cvxpy(self, w):
        import cvxpy as cp
        u = cp.multiply(1.0 / self.scale, w[:self.k])
        expr, cons = (0.0, []) if self.inner is None else self.inner.cvxpy(u)
        return 0.5 * self.alpha * cp.sum_squares(u) + expr, cons

    def __repr__(self):
        inner = "" if self.inner is None else f" + {self.inner!r}"
        return f"the estimator's penalty (½·{self.alpha:g}·‖coef‖²{inner})"

    def check_dim(self, dim):
        if not self.k <= dim <= self.k + 1:
            raise ValueError(f"penalty on {self.k} coefficients, problem dimension {dim}")
        if self.inner is not None:
            self.inner.check_dim(self.k)


# -- the solver's coordinates ---------------------------------------------------------------

def _ridge_weight(regularizer):
    """The l2 weight of a separable regularizer (``½·l2·coef²`` per coordinate): its
    lam for SquaredL2, l2 for ElasticNet (also inside a Boxed); 0 otherwise."""
    inner = regularizer.inner if isinstance(regularizer, Boxed) else regularizer
    if isinstance(inner, SquaredL2):
        return inner.lam
    if isinstance(inner, ElasticNet):
        return inner.l2
    return 0.0


def _column_std(F):
    """Population standard deviation of each column of a dense or sparse F."""
    if sp.issparse(F):
        F = sp.csr_array(F)
        mean = np.asarray(F.mean(axis=0)).ravel()
        sq = np.asarray(F.multiply(F).mean(axis=0)).ravel()
        return np.sqrt(np.maximum(sq - mean ** 2, 0.0))
    return np.asarray(F, dtype=np.float64).std(axis=0)


def _ends_with_ones(X):
    """True when the last column of X (dense or sparse) is all ones."""
    if X.shape[1] == 0:
        return False
    last = X[:, [X.shape[1] - 1]]
    if sp.issparse(last):
        return last.nnz == X.shape[0] and bool(np.all(last.data == 1.0))
    return bool(np.all(last == 1.0))


class _Coordinates:
    """The exact reparametrization the solver works in (see the module doc).

    The first ``k`` columns of X are the features ``F`` (all columns, or all but the
    last when ``fit_intercept`` and X already ends with a column of ones: that column
    *is* the intercept, no second one is added).  The solver's design is
    ``[(F − m)/σ, 1]`` (``[(F − m)/σ]`` without an intercept), with ``m`` the column
    means of a dense F when there is an intercept (0 for a sparse F: centring would
    densify it) and ``σ`` the column scales (set by the estimator, see
    ``_column_scales``; 1 by default).  A solver point ``(c̃, b̃)`` is the
    model ``coef = c̃/σ``, ``intercept = b̃ − m·coef``; the ones column's coef is 0.
    """

    def __init__(self, X, fit_intercept, scale=None):
        self.n_features = X.shape[1]
        self.fit_intercept = bool(fit_intercept)
        self.ones = self.fit_intercept and _ends_with_ones(X)
        self.k = self.n_features - 1 if self.ones else self.n_features
        F = X[:, :self.k]
        self.sparse = sp.issparse(X)
        self.mean = (np.asarray(F.mean(axis=0), dtype=np.float64).ravel()
                     if self.fit_intercept and not self.sparse else np.zeros(self.k))
        self.scale = np.ones(self.k) if scale is None else scale

    def design(self, X):
        """The solver's rows for rows ``X`` (a client's or the server's)."""
        F = X[:, :self.k]
        if sp.issparse(F) and not np.any(self.mean):        # sparse stays sparse
            Z = sp.csr_array(F, dtype=np.float64) @ sp.diags_array(1.0 / self.scale)
            if not self.fit_intercept:
                return sp.csr_array(Z)
            return sp.hstack([Z, np.ones((X.shape[0], 1))], format="csr")
        if sp.issparse(F):              # sparse server rows, dense centred clients
            F = F.toarray()
        Z = (np.asarray(F, dtype=np.float64) - self.mean) / self.scale
        if not self.fit_intercept:
            return np.ascontiguousarray(Z)
        return np.hstack([Z, np.ones((X.shape[0], 1))])

    def model(self, w):
        """``(coef (n_features,), intercept)`` of a solver point ``w``."""
        coef = np.zeros(self.n_features)
        coef[:self.k] = np.asarray(w[:self.k], dtype=np.float64) / self.scale
        intercept = float(w[self.k] - coef[:self.k] @ self.mean) if self.fit_intercept else 0.0
        return coef, intercept


# -- shared machinery ----------------------------------------------------------------------

_RESERVED = ("method", "tol", "beta", "seed")


class _ConstrainedLogistic(_ClassifierMixin, _BaseEstimator):
    """Binary linear classifier whose weights solve a constrfl template (see module doc)."""

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

    def _coordinates(self, X):
        """The solver's coordinates for this fit (see :class:`_Coordinates`)."""
        coords = _Coordinates(X, self.fit_intercept)
        coords.scale = self._column_scales(X[:, :coords.k])
        return coords

    def _column_scales(self, F):
        """σ_j of :class:`_Coordinates`: ``std_j`` capped at ``√(a_j·beta)``, with
        ``a_j`` coef_j's ridge weight (alpha plus the regularizer's own ½·l2·coef² part);
        ``std_j`` alone where ``a_j = 0``; 1 for constant columns, and 1 throughout for a
        non-separable regularizer (see the module doc)."""
        k = F.shape[1]
        if self.regularizer is not None and not self.regularizer.separable:
            return np.ones(k)
        std = _column_std(F)
        beta = self.beta
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not beta > 0:
            return np.where(std > 0, std, 1.0)           # solve() names the bad beta
        a = self.alpha + np.broadcast_to(_ridge_weight(self.regularizer), (k,))
        sigma = np.where(a > 0, np.minimum(std, np.sqrt(a * float(beta))), std)
        return np.where(sigma > 0, sigma, 1.0)

    def _penalty(self, coords):
        if self.alpha == 0 and self.regularizer is None:
            return None
        return _CoefPenalty(self.alpha, self.regularizer, coords.k, coords.scale)

    def _solve_and_store(self, problem, coords, classes, options):
        res = solve(problem, method=self.method, tol=self.tol, beta=self.beta,
                    seed=_seed(self.random_state), **options)
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


def _ids(client_ids, n):
    if client_ids is None:
        return np.zeros(n, dtype=np.int64)
    ids = np.asarray(client_ids)
    if ids.shape != (n,):
        raise ValueError(f"client_ids has shape {ids.shape}, expected ({n},): one client "
                         "label per row of X")
    if ids.dtype.kind == "f" and not np.isfinite(ids).all():
        raise ValueError("client_ids contains NaN or infinity")
    return ids


def _server_X(X0, d):
    X0 = _as_2d_float(X0, "server_data X")
    if X0.shape[1] != d:
        raise ValueError(f"server_data X has {X0.shape[1]} features, X has {d}")
    return X0


def _seed(random_state):
    """An integer seed for ``solve`` (its random start point) from ``random_state``."""
    top = np.iinfo(np.int32).max
    if random_state is None:
        return int(np.random.randint(top))              # numpy's global RNG, as scikit-learn
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be >= 0, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(top))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(top))
    raise ValueError(f"random_state must be None, an int, a RandomState or a Generator, "
                     f"got {random_state!r}")


def _as_2d_float(X, name):
    """Input check without scikit-learn (and for server_data): a 2-D float64 array, or
    a scipy.sparse matrix as CSR; at least one row and column, all finite."""
    if sp.issparse(X):
        if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"{name}: need a 2-D matrix with at least one sample and "
                             f"one feature, got shape {X.shape}")
        if X.dtype.kind == "c":
            raise ValueError(f"{name}: complex data not supported")
        X = sp.csr_array(X, dtype=np.float64)
        if not np.isfinite(X.data).all():
            raise ValueError(f"{name} contains NaN or infinity")
        return X
    X = np.asarray(X)
    if X.dtype.kind == "c":
        raise ValueError(f"{name}: complex data not supported")
    X = X.astype(np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array, got {X.ndim}-D; reshape with "
                         "X.reshape(-1, 1) (one feature) or X.reshape(1, -1) (one sample)")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name}: need at least one sample and one feature, got shape "
                         f"{X.shape}")
    if not np.isfinite(X).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return X


def _as_labels(y, n, name):
    if y is None:
        raise ValueError(f"{name} is required (got None)")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1 or (n is not None and y.shape[0] != n):
        raise ValueError(f"{name} has shape {y.shape}, expected ({n},)" if n is not None
                         else f"{name} must be 1-D, got shape {y.shape}")
    if y.dtype.kind == "f":
        if not np.isfinite(y).all():
            raise ValueError(f"{name} contains NaN or infinity")
        if np.any(y != np.round(y)):
            raise ValueError(f"Unknown label type: continuous ({name} holds non-integer "
                             "floats; a classifier needs class labels)")
    return y


# -- the estimators ------------------------------------------------------------------------

class NeymanPearsonClassifier(_ConstrainedLogistic):
    """Neyman-Pearson logistic classifier (template (30)), trained over clients.

    ``min (1/n) Σᵢ L(w; Dᵢ⁰) + (alpha/2)‖coef‖² + regularizer(coef)
    s.t. L(w; Dᵢ¹) ≤ max_class1_loss`` for every client i, where ``L`` is the mean
    logistic loss (31), ``Dᵢ¹`` client i's rows of the protected class ``classes_[1]``,
    ``Dᵢ⁰`` its rows of ``classes_[0]`` and n the number of clients holding such rows
    (a client without them has no objective term; one without ``Dᵢ¹`` no constraint).
    See the module docstring for labels, intercept, failure handling and
    cross-validation.

    Parameters
    ----------
    max_class1_loss : float > 0, the bound r on every client's class-1 mean logistic loss.
    alpha : float >= 0, strength of the L2 penalty on coef (the intercept is free).
    regularizer : None or a :mod:`constrfl.prox` regularizer on coef, added to the penalty
        (e.g. ``prox.L1(0.01)``; an array-valued one such as ``prox.Box`` has one entry
        per feature).
    method : ``"fedproxal"`` (federated, Algorithm 1) or ``"cproxal"`` (centralized).
    tol : ε or (ε₁, ε₂) of :func:`constrfl.solve`; ``"optimal"`` guarantees every
        constraint holds within ε₂.
    beta : the augmented Lagrangian's penalty β.
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
        client ``"client-<id>"``, rounds, history; ``result_.w`` includes the intercept).
    n_features_in_ : int.   feature_names_in_ : set by scikit-learn for DataFrames.
    """

    def __init__(self, max_class1_loss=0.2, *, alpha=1e-2, regularizer=None,
                 method="fedproxal", tol=1e-6, beta=100.0, fit_intercept=True,
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
        coords = self._coordinates(X)
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

    def __init__(self, max_disparity=0.1, *, alpha=1e-2, regularizer=None,
                 method="fedproxal", tol=1e-6, beta=100.0, fit_intercept=True,
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
        coords = self._coordinates(X)
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
                                        self.max_disparity, sensitive=in_b.astype(np.int64),
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


@contextlib.contextmanager
def _scaled_on_purpose():
    """The templates warn about badly scaled columns; the estimators' design is scaled
    by choice (the caps of ``_column_scales`` keep the penalty's curvature), so that
    warning would only mislead here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*feature scales differ",
                                category=UserWarning)
        yield


def _pair(data, k, shape):
    try:
        parts = tuple(data)
    except TypeError:
        parts = ()
    if len(parts) != k:
        raise ValueError(f"server_data must be a tuple {shape}")
    return parts
