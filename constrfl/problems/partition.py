"""Partitioning rows among federated clients.

Every function returns ``client_ids``: an int64 array with one entry per row, taking
values 0..n_clients-1, so that client ``i`` holds ``X[client_ids == i]``. Randomized
splits are reproducible from ``seed`` (via :func:`numpy.random.default_rng`).
"""

from __future__ import annotations

import operator

import numpy as np

__all__ = ["stratified_split", "dirichlet_split", "split_by_column"]


def _as_1d(a, name):
    a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {a.shape}")
    return a


def _check_clients(n_clients, n_samples):
    n_clients = operator.index(n_clients)
    if n_clients < 1:
        raise ValueError(f"n_clients must be >= 1, got {n_clients}")
    if n_clients > n_samples:
        raise ValueError(f"n_clients={n_clients} exceeds the number of rows in y ({n_samples})")
    return n_clients


def stratified_split(y, n_clients, seed=0) -> np.ndarray:
    """Equal shares with equal class ratios.

    Rows of each class are shuffled; then the classes, one after another, are dealt
    round-robin to the clients (the deal continues across classes). Hence, for every
    class, client counts differ by at most 1, and client sizes differ by at most 1.
    ``y`` may hold any sortable labels.
    """
    y = _as_1d(y, "y")
    n_clients = _check_clients(n_clients, len(y))
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(np.flatnonzero(y == c)) for c in np.unique(y)])
    client_ids = np.empty(len(y), dtype=np.int64)
    client_ids[order] = np.arange(len(y)) % n_clients
    return client_ids


def dirichlet_split(y, n_clients, alpha, seed=0, min_per_class=0) -> np.ndarray:
    """Label-skewed split: per class, client shares ~ Dirichlet(alpha, ..., alpha).

    For each class, ``min_per_class`` shuffled rows are first dealt to every client; the
    remaining rows of the class are divided by a multinomial draw with probabilities from
    a fresh Dirichlet(alpha) sample. Small ``alpha`` gives strong skew, large ``alpha``
    approaches a stratified split. Guarantees: every client gets at least
    ``min_per_class`` rows of every class and at least one row overall (an empty client
    takes a random row from the currently largest client).

    Raises ValueError if ``alpha <= 0``, ``min_per_class < 0``, ``n_clients`` is not in
    1..len(y), or some class has fewer than ``n_clients * min_per_class`` rows.
    """
    y = _as_1d(y, "y")
    n_clients = _check_clients(n_clients, len(y))
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    min_per_class = operator.index(min_per_class)
    if min_per_class < 0:
        raise ValueError(f"min_per_class must be >= 0, got {min_per_class}")
    classes, counts = np.unique(y, return_counts=True)
    if counts.min() < n_clients * min_per_class:
        raise ValueError(f"min_per_class={min_per_class} needs {n_clients * min_per_class} rows of "
                         f"each class, but class {classes[counts.argmin()]!r} has {counts.min()}")
    rng = np.random.default_rng(seed)
    client_ids = np.empty(len(y), dtype=np.int64)
    for c in classes:
        rows = rng.permutation(np.flatnonzero(y == c))
        reserved = n_clients * min_per_class
        share = rng.multinomial(len(rows) - reserved, rng.dirichlet(np.full(n_clients, alpha)))
        client_ids[rows[:reserved]] = np.arange(reserved) % n_clients
        client_ids[rows[reserved:]] = np.repeat(np.arange(n_clients), share)
    sizes = np.bincount(client_ids, minlength=n_clients)
    for empty in np.flatnonzero(sizes == 0):
        donor = sizes.argmax()
        client_ids[rng.choice(np.flatnonzero(client_ids == donor))] = empty
        sizes[donor] -= 1
        sizes[empty] += 1
    return client_ids


def split_by_column(values) -> np.ndarray:
    """One client per distinct value: client ``i`` holds the rows equal to
    ``np.unique(values)[i]`` (distinct values in sorted order)."""
    values = _as_1d(values, "values")
    if len(values) == 0:
        raise ValueError("values must be non-empty")
    return np.unique(values, return_inverse=True)[1].astype(np.int64)
