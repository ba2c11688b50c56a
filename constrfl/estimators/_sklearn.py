"""scikit-learn's base classes, exceptions and input checks when it is installed; small
stand-ins with the same behaviour on NumPy arrays when it is not (scikit-learn is
optional, see :mod:`constrfl.estimators`)."""
from __future__ import annotations

import inspect

import numpy as np

__all__ = ["HAVE_SKLEARN", "ConvergenceWarning", "NotFittedError", "check_is_fitted",
           "check_classification_targets", "_sk_validate_data", "_BaseEstimator",
           "_ClassifierMixin", "_store_params"]

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
    _sk_validate_data = check_classification_targets = None     # used only with sklearn


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
