"""Tests for datasets.py: UCI loaders (skipped without the data) and synthetic generators."""

import numpy as np
import pytest

from constrfl.problems.datasets import (ADULT_CATEGORICAL, ADULT_NUMERIC, Dataset,
                                       load_adult, load_breast_cancer_wisconsin, load_monks1,
                                       make_classification, make_fairness)
from conftest import dataset_dir


def check_common(ds, n, d):
    assert ds.X.shape == (n, d) and ds.y.shape == (n,)
    assert ds.X.dtype == np.float64 and ds.X.flags.c_contiguous
    assert np.isfinite(ds.X).all()
    assert set(np.unique(ds.y)) <= {0, 1}
    assert len(ds.feature_names) == d and ds.feature_names[-1] == "intercept"
    assert (ds.X[:, -1] == 1).all()


def assert_standardized(Z):
    np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-10)
    np.testing.assert_allclose(Z.std(axis=0), 1, rtol=1e-10)


# ---------------------------------------------------------------- Dataset


def test_dataset_coerces_and_validates():
    ds = Dataset(np.asfortranarray(np.ones((3, 2), dtype=np.int32)), [0, 1, 1], ["a", "b"], name="t")
    assert ds.X.dtype == np.float64 and ds.X.flags.c_contiguous and ds.y.dtype == np.int64
    assert ds.feature_names == ("a", "b") and ds.sensitive is None
    with pytest.raises(ValueError, match="y must have shape"):
        Dataset(np.ones((3, 2)), [0, 1], ["a", "b"], name="t")
    with pytest.raises(ValueError, match="feature_names"):
        Dataset(np.ones((3, 2)), [0, 1, 1], ["a"], name="t")
    with pytest.raises(ValueError, match=r"\{0, 1\}"):
        Dataset(np.ones((3, 2)), [0, 1, 2], ["a", "b"], name="t")
    with pytest.raises(ValueError, match="sensitive"):
        Dataset(np.ones((3, 2)), [0, 1, 1], ["a", "b"], [1, 0], name="t")
    with pytest.raises(AttributeError):
        ds.name = "other"


# ---------------------------------------------------------------- breast cancer


@pytest.fixture(scope="module")
def bcw_dir():
    return dataset_dir("breast-cancer-wisconsin")


def test_breast_cancer(bcw_dir):
    ds = load_breast_cancer_wisconsin(bcw_dir)
    check_common(ds, 699, 10)
    assert ds.y.sum() == 241 and ds.name == "breast-cancer-wisconsin"
    assert_standardized(ds.X[:, :-1])
    assert ds.feature_names[5] == "bare_nuclei"


def test_breast_cancer_imputes_median(bcw_dir):
    raw = [line.split(",")[6] for line in (bcw_dir / "breast-cancer-wisconsin.data").read_text().split()]
    missing = np.array([v == "?" for v in raw])
    assert missing.sum() == 16
    observed = np.array([float(v) for v in raw if v != "?"])
    median_rows = np.array([v != "?" and float(v) == np.median(observed) for v in raw])
    bare = load_breast_cancer_wisconsin(bcw_dir).X[:, 5]
    np.testing.assert_array_equal(bare[missing], bare[median_rows][0])


# ---------------------------------------------------------------- adult


@pytest.fixture(scope="module")
def adult():
    path = dataset_dir("adult")
    return path, load_adult(path, "train"), load_adult(path, "test")


def test_adult_train(adult):
    _, train, _ = adult
    check_common(train, 32_561, 106)
    assert train.y.sum() == 7_841 and train.sensitive.sum() == 10_771
    assert train.feature_names[:6] == ADULT_NUMERIC
    assert_standardized(train.X[:, :6])
    female = train.X[:, train.feature_names.index("sex=Female")]
    np.testing.assert_array_equal(female, train.sensitive)


def test_adult_one_hot_blocks(adult):
    _, train, _ = adult
    missing = {"workclass": 1_836, "occupation": 1_843, "native-country": 583}
    for attr in ADULT_CATEGORICAL:
        cols = [j for j, f in enumerate(train.feature_names) if f.startswith(attr + "=")]
        block = train.X[:, cols]
        assert set(np.unique(block)) == {0.0, 1.0}
        assert block.sum(axis=1).max() == 1
        assert (block.sum(axis=1) == 0).sum() == missing.get(attr, 0), attr
        names = [train.feature_names[j] for j in cols]
        assert names == sorted(names)


def test_adult_test_matches_train_columns(adult):
    _, train, test = adult
    check_common(test, 16_281, 106)
    assert test.feature_names == train.feature_names
    assert test.y.sum() == 3_846 and test.sensitive.sum() == 5_421
    # A level seen only in the train file gets a column, all zeros in the test split.
    j = train.feature_names.index("native-country=Holand-Netherlands")
    assert train.X[:, j].sum() == 1 and test.X[:, j].sum() == 0


def test_adult_test_uses_train_statistics(adult):
    path, _, test = adult
    identity = (np.zeros(6), np.ones(6))
    raw_train = load_adult(path, "train", standardizer=identity).X[:, :6]
    raw_test = load_adult(path, "test", standardizer=identity).X[:, :6]
    expected = (raw_test - raw_train.mean(axis=0)) / raw_train.std(axis=0)
    np.testing.assert_allclose(test.X[:, :6], expected, atol=1e-12)
    assert np.abs(test.X[:, :6].mean(axis=0)).max() > 1e-3  # not re-standardized on test rows


def test_adult_both_and_drop_sensitive(adult):
    path, train, test = adult
    both = load_adult(path, "both", drop_sensitive=True)
    assert both.X.shape == (48_842, 104) and both.name == "adult-both"
    assert not any(f.startswith("sex=") for f in both.feature_names)
    np.testing.assert_array_equal(both.sensitive, np.concatenate([train.sensitive, test.sensitive]))
    keep = [j for j, f in enumerate(train.feature_names) if not f.startswith("sex=")]
    np.testing.assert_array_equal(both.X[:32_561], train.X[:, keep])


# ---------------------------------------------------------------- monks-1


@pytest.fixture(scope="module")
def monks_dir():
    return dataset_dir("monks-1")


def test_monks1(monks_dir):
    train, test = load_monks1(monks_dir, "train"), load_monks1(monks_dir, "test")
    check_common(train, 124, 18)
    check_common(test, 432, 18)
    assert train.feature_names == test.feature_names
    assert train.y.sum() == 62 and test.y.sum() == 216
    for ds in (train, test):
        assert (ds.X[:, :-1].sum(axis=1) == 6).all()  # one level per attribute
    assert len(np.unique(test.X, axis=0)) == 432  # the test file is the full attribute grid
    assert load_monks1(monks_dir, "both").X.shape == (556, 18)


# ---------------------------------------------------------------- parsing on tiny files


ADULT_ROW = "{age}, {wc}, 1000, Bachelors, 13, Never-married, Sales, Own-child, White, {sex}, 0, 0, 40, US, {label}\n"


def write_adult(folder):
    folder.mkdir()
    (folder / "adult.data").write_text(
        ADULT_ROW.format(age=20, wc="Private", sex="Male", label="<=50K")
        + ADULT_ROW.format(age=40, wc="State-gov", sex="Female", label=">50K") + "\n")
    (folder / "adult.test").write_text(
        "|1x3 Cross validator\n"
        + ADULT_ROW.format(age=30, wc="?", sex="Female", label=">50K.")
        + ADULT_ROW.format(age=60, wc="Never-worked", sex="Male", label="<=50K."))
    return folder


def test_adult_parsing_edge_cases(tmp_path):
    test = load_adult(write_adult(tmp_path / "adult"), "test")
    np.testing.assert_array_equal(test.y, [1, 0])
    np.testing.assert_array_equal(test.sensitive, [1, 0])
    np.testing.assert_allclose(test.X[:, 0], [0.0, 3.0])  # train ages 20, 40: mean 30, std 10
    wc = [j for j, f in enumerate(test.feature_names) if f.startswith("workclass=")]
    assert [test.feature_names[j] for j in wc] == ["workclass=Private", "workclass=State-gov"]
    assert (test.X[:, wc] == 0).all()  # missing "?" and unseen "Never-worked"


def test_loaders_report_missing_files_and_bad_split(tmp_path):
    with pytest.raises(FileNotFoundError, match="breast-cancer-wisconsin.data"):
        load_breast_cancer_wisconsin(tmp_path)
    with pytest.raises(FileNotFoundError, match="monks-1.train"):
        load_monks1(tmp_path)
    with pytest.raises(ValueError, match="split"):
        load_adult(tmp_path, "validation")
    with pytest.raises(ValueError, match="standardizer"):
        load_adult(write_adult(tmp_path / "adult"), standardizer=(np.zeros(2), np.ones(2)))


def test_monks_rejects_out_of_range_level(tmp_path):
    (tmp_path / "monks-1.train").write_text("@relation x\n\n@data\n1,1,1,3,1,1,1\n")
    with pytest.raises(ValueError, match="a_i"):
        load_monks1(tmp_path)


# ---------------------------------------------------------------- synthetic


def test_make_classification():
    ds = make_classification()
    check_common(ds, 600, 9)
    assert ds.y.sum() == 210 and ds.sensitive is None
    assert_standardized(ds.X[:, :-1])
    np.testing.assert_array_equal(ds.X, make_classification().X)
    assert not np.array_equal(ds.X, make_classification(seed=1).X)
    ds = make_classification(n_samples=101, n_features=3, class_ratio=0.5, seed=3)
    check_common(ds, 101, 4)
    assert ds.y.sum() == 50


def test_make_classification_separation_moves_class_means():
    def gap(sep):
        ds = make_classification(separation=sep, seed=2)
        return np.linalg.norm(ds.X[ds.y == 1].mean(axis=0) - ds.X[ds.y == 0].mean(axis=0))
    assert gap(0.0) < 0.5 < 1.0 < gap(2.0)


def test_make_classification_rejects_bad_arguments():
    with pytest.raises(ValueError, match="class_ratio"):
        make_classification(class_ratio=0.0)
    with pytest.raises(ValueError, match="n_features"):
        make_classification(n_features=0)
    with pytest.raises(ValueError, match="n_samples"):
        make_fairness(n_samples=1)


def fit_logistic(X, y, iters=30):
    """Unregularized logistic regression by Newton's method."""
    w = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-X @ w))
        w -= np.linalg.solve((X * (p * (1 - p))[:, None]).T @ X, X.T @ (p - y))
    return w


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_make_fairness_has_group_disparity(seed):
    ds = make_fairness(seed=seed)
    check_common(ds, 2000, 9)
    s = ds.sensitive
    assert s.dtype == np.int64 and set(np.unique(s)) == {0, 1}
    assert 0.2 < s.mean() < 0.4
    assert ds.y[s == 0].mean() - ds.y[s == 1].mean() > 0.1
    z = ds.X @ fit_logistic(ds.X, ds.y)
    loss = np.logaddexp(0, z) - ds.y * z
    assert loss[s == 1].mean() - loss[s == 0].mean() > 0.05


def test_make_fairness_reproducible():
    a, b = make_fairness(n_samples=300, n_features=4), make_fairness(n_samples=300, n_features=4)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.sensitive, b.sensitive)
    assert a.X.shape == (300, 5)
    assert not np.array_equal(a.sensitive, make_fairness(n_samples=300, n_features=4, seed=1).sensitive)
