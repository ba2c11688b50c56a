"""Argument checks shared by the problem templates: every error names the template,
the argument and, for labels, the client."""
from __future__ import annotations

import contextlib
import gc
import numbers
import warnings

import numpy as np
import scipy.sparse as sp

from ..functions import as_data_matrix, first_nonfinite

# Feature scales (column max |x|) more than this far apart draw a warning.
SCALE_RATIO_WARN = 100.0


def int_arg(caller, name, value, minimum=1, maximum=None):
    """``value`` as an int in [minimum, maximum], else ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise ValueError(f"{caller}: {name} must be an integer {bound}, got {value!r}")
    return int(value)


def real_arg(caller, name, value, positive=False):
    """``value`` as a finite float ≥ 0 (> 0 with ``positive``): TypeError when it is not
    a real number (strings, None and booleans are not), ValueError when out of range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{caller}: {name} must be a real number, got {value!r} "
                        f"({type(value).__name__})")
    if not (np.isfinite(value) and (value > 0 if positive else value >= 0)):
        raise ValueError(f"{caller}: {name} must be a finite "
                         f"{'positive' if positive else 'non-negative'} number, got {value!r}")
    return float(value)


def rows(caller, X, *, prefix="", **columns):
    """``(X, *columns)`` checked: X 2-D with ≥ 1 column (scipy.sparse kept as CSR), every
    column (``y=..., client_ids=...``, in the given order) one entry per row.
    ``prefix`` names the argument group in errors (``"server_data: "``)."""
    X = as_data_matrix(X, caller, f"{prefix}X")
    out = [X]
    for arg, a in columns.items():
        a = np.asarray(a)
        if a.shape != (X.shape[0],):
            raise ValueError(f"{caller}: {prefix}{arg} has shape {a.shape}, expected "
                             f"({X.shape[0]},): one entry per row of {prefix}X")
        out.append(a)
    bad = first_nonfinite(X)              # once for all rows: the clients' losses trust it
    if bad is not None:
        owner = ("" if "client_ids" not in columns else
                 f"client {client_name(columns['client_ids'][bad[0]])!r}: ")
        raise ValueError(f"{caller}: {owner}{prefix}X contains NaN or inf (first at row "
                         f"{bad[0]}, column {bad[1]})")
    return tuple(out)


def labels01(caller, name, y, ids=None, where="client"):
    """``y`` as float64 in {0, 1}; anything else (NaN included) raises ValueError naming
    each offending client (``ids``) or ``where`` and its count of bad rows.  No row is
    ever dropped."""
    y = np.asarray(y)
    try:
        good = np.isin(y, (0, 1)) & (y == y)           # NaN compares unequal
    except TypeError:
        good = np.zeros(y.shape, dtype=bool)
    if not good.all():
        if ids is None:
            parts = [f"{where}: {int((~good).sum())} of {y.size} rows"]
        else:
            parts = [f"client {plain(i)!r}: {int((~good & (ids == i)).sum())} of "
                     f"{int((ids == i).sum())} rows"
                     for i in np.unique(ids[~good])]
        example = y[~good][0]
        raise ValueError(f"{caller}: {name} must hold labels in {{0, 1}} (NaN is not one); "
                         f"{'; '.join(parts)} hold other values (e.g. {plain(example)!r}). "
                         "Map the labels to 0/1 first; no row is dropped")
    return y.astype(np.float64)


def groups(ids):
    """``[(label, rows)]`` in sorted label order, ``rows`` the indices of the label's
    rows in their order: one sort, O(N log N) (a comparison per label and row made
    building 100,000 clients quadratic)."""
    order = np.argsort(ids, kind="stable")
    labels, starts = np.unique(ids[order], return_index=True)
    return list(zip(labels, np.split(order, starts[1:])))


@contextlib.contextmanager
def bulk():
    """While a template builds its clients: Python's cyclic garbage collector paused
    (the functions and clients hold no cycles; its passes over the growing heap cost
    building 100,000 clients 5 of 14 s)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def client_name(label):
    """The name of the client of ``client_ids`` label ``label``: the label itself when it
    is a string (``client_ids=df["site"]`` names the clients by the sites), else
    ``"client-<label>"``."""
    label = plain(label)
    return label if isinstance(label, str) else f"client-{label}"


def warn_if_badly_scaled(caller, X, stacklevel=3):
    """UserWarning when the columns' scales (max |x_j| over the rows, all-zero columns
    left out) differ by more than ``SCALE_RATIO_WARN``: the solvers' tolerances are
    absolute and their speed depends on the conditioning.  One-hot and standardized
    columns have max |x| of order 1, so they do not trigger it."""
    scale = (abs(X).max(axis=0).toarray().ravel() if sp.issparse(X)
             else np.max(np.abs(X), axis=0))
    scale = np.asarray(scale, dtype=np.float64)
    live = np.flatnonzero(scale > 0)
    if live.size < 2:
        return
    hi, lo = live[np.argmax(scale[live])], live[np.argmin(scale[live])]
    ratio = scale[hi] / scale[lo]
    if ratio > SCALE_RATIO_WARN:
        warnings.warn(f"{caller}: feature scales differ by {ratio:.3g}x (max |x| of column "
                      f"{hi} is {scale[hi]:.3g}, of column {lo} {scale[lo]:.3g}): "
                      "standardize the columns (e.g. sklearn's StandardScaler) or use "
                      "constrfl's estimators, which scale internally; badly scaled "
                      "features cost many more rounds", UserWarning, stacklevel=stacklevel)


def plain(x):
    """A NumPy scalar as the plain Python value (for readable messages)."""
    return x.item() if isinstance(x, np.generic) else x
