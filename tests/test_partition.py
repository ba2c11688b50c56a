"""Tests for partition.py."""

import numpy as np
import pytest

from constrfl.problems.partition import dirichlet_split, split_by_column, stratified_split


def labels(n_pos=350, n_neg=650, seed=0):
    return np.random.default_rng(seed).permutation(np.repeat([1, 0], [n_pos, n_neg]))


def per_client_counts(y, client_ids, n_clients):
    """(n_clients, n_classes) table of class counts per client."""
    classes = np.unique(y)
    return np.array([[np.sum((client_ids == i) & (y == c)) for c in classes] for i in range(n_clients)])


def label_skew(y, client_ids, n_clients):
    """Mean total-variation distance between each client's and the global label distribution."""
    counts = per_client_counts(y, client_ids, n_clients)
    local = counts / counts.sum(axis=1, keepdims=True)
    overall = counts.sum(axis=0) / counts.sum()
    return 0.5 * np.abs(local - overall).sum(axis=1).mean()


def assert_valid(client_ids, n, n_clients):
    assert client_ids.shape == (n,) and client_ids.dtype == np.int64
    assert set(np.unique(client_ids)) == set(range(n_clients))  # in range and none empty


# ---------------------------------------------------------------- stratified


@pytest.mark.parametrize("n_clients", [1, 3, 7, 10])
def test_stratified_sizes_and_class_ratios(n_clients):
    y = labels()
    ids = stratified_split(y, n_clients, seed=4)
    assert_valid(ids, len(y), n_clients)
    counts = per_client_counts(y, ids, n_clients)
    assert (np.ptp(counts, axis=0) <= 1).all()  # per class: at most 1 apart
    assert np.ptp(counts.sum(axis=1)) <= 1  # client sizes: at most 1 apart
    np.testing.assert_array_equal(counts.sum(axis=0), [650, 350])


def test_stratified_multiclass_string_labels():
    y = np.array(["a"] * 10 + ["b"] * 7 + ["c"] * 5)
    ids = stratified_split(y, 4)
    assert_valid(ids, 22, 4)
    assert (np.ptp(per_client_counts(y, ids, 4), axis=0) <= 1).all()


def test_stratified_reproducible_and_shuffled():
    y = labels()
    np.testing.assert_array_equal(stratified_split(y, 5, seed=1), stratified_split(y, 5, seed=1))
    assert not np.array_equal(stratified_split(y, 5, seed=1), stratified_split(y, 5, seed=2))
    ids = stratified_split(y, 5, seed=1)
    assert not np.array_equal(ids[:100], np.arange(100) % 5)  # not dealt in row order


# ---------------------------------------------------------------- dirichlet


def test_dirichlet_valid_and_reproducible():
    y = labels()
    ids = dirichlet_split(y, 8, alpha=0.5, seed=3)
    assert_valid(ids, len(y), 8)
    np.testing.assert_array_equal(ids, dirichlet_split(y, 8, alpha=0.5, seed=3))
    assert not np.array_equal(ids, dirichlet_split(y, 8, alpha=0.5, seed=4))


def test_dirichlet_skew_grows_as_alpha_shrinks():
    y = labels()
    skew = [np.mean([label_skew(y, dirichlet_split(y, 10, alpha, seed=s), 10) for s in range(10)])
            for alpha in (1000.0, 1.0, 0.05)]
    assert 2 * skew[0] < skew[1] and 2 * skew[1] < skew[2]


@pytest.mark.parametrize("seed", range(20))
def test_dirichlet_tiny_alpha_leaves_no_client_empty(seed):
    y = labels(30, 20, seed)
    assert_valid(dirichlet_split(y, 25, alpha=1e-3, seed=seed), 50, 25)
    assert_valid(dirichlet_split(y, 50, alpha=1e-3, seed=seed), 50, 50)  # one row each


def test_dirichlet_min_per_class():
    y = labels()
    ids = dirichlet_split(y, 10, alpha=0.01, seed=0, min_per_class=5)
    assert_valid(ids, len(y), 10)
    assert per_client_counts(y, ids, 10).min() >= 5
    with pytest.raises(ValueError, match="min_per_class"):
        dirichlet_split(y, 10, alpha=1.0, min_per_class=36)  # class 1 has 350 < 360 rows
    with pytest.raises(ValueError, match="min_per_class"):
        dirichlet_split(y, 10, alpha=1.0, min_per_class=-1)


# ---------------------------------------------------------------- split_by_column


def test_split_by_column():
    values = np.array(["Male", "Female", "Female", "Other", "Male"])
    np.testing.assert_array_equal(split_by_column(values), [1, 0, 0, 2, 1])
    np.testing.assert_array_equal(split_by_column([3.0, -1.0, 3.0]), [1, 0, 1])
    assert split_by_column([7, 7]).dtype == np.int64


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("split", [stratified_split, lambda y, k: dirichlet_split(y, k, alpha=1.0)])
def test_bad_client_counts_and_shapes(split):
    y = labels(3, 2)
    with pytest.raises(ValueError, match="n_clients"):
        split(y, 0)
    with pytest.raises(ValueError, match="n_clients"):
        split(y, 6)
    with pytest.raises(ValueError, match="y must be a 1-D"):
        split(y.reshape(5, 1), 2)


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("nan")])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_split(labels(), 3, alpha)


def test_split_by_column_errors():
    with pytest.raises(ValueError, match="values must be a 1-D"):
        split_by_column(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="values must be non-empty"):
        split_by_column([])
