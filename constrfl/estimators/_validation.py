"""Input checks shared by the estimators' ``fit`` (and, without scikit-learn, by
``predict``): arrays, labels, client ids, seeds and ``server_data``."""
from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp


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


def _pair(data, k, shape):
    try:
        parts = tuple(data)
    except TypeError:
        parts = ()
    if len(parts) != k:
        raise ValueError(f"server_data must be a tuple {shape}")
    return parts
