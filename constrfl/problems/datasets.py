"""Data sets for constrained federated learning: UCI loaders and synthetic generators.

Every loader takes ``path``, the *directory* holding the original UCI files of one data
set (e.g. ``.../adult`` containing ``adult.data`` and ``adult.test``), and returns a
:class:`Dataset`. Design matrices are float64, C-contiguous, and end with an intercept
column of ones named ``"intercept"``; labels are int64 in {0, 1}.
:func:`load_maros_meszaros` reads one QP of the Maros–Meszaros test set (a ``.mat`` file).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .qp import QuadraticProgram

__all__ = [
    "Dataset",
    "ADULT_NUMERIC",
    "ADULT_CATEGORICAL",
    "load_breast_cancer_wisconsin",
    "load_adult",
    "load_monks1",
    "make_classification",
    "make_fairness",
    "load_maros_meszaros",
]

ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country",
)
ADULT_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
ADULT_CATEGORICAL = (
    "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
    "native-country",
)
BCW_FEATURES = (
    "clump_thickness", "uniformity_cell_size", "uniformity_cell_shape", "marginal_adhesion",
    "single_epithelial_cell_size", "bare_nuclei", "bland_chromatin", "normal_nucleoli", "mitoses",
)
MONKS_LEVELS = (3, 3, 2, 3, 4, 2)  # attributes a1..a6 take values 1..k


@dataclass(frozen=True)
class Dataset:
    """A binary classification data set.

    ``X`` (n, d) float64 C-contiguous, ``y`` (n,) int64 in {0, 1}, ``feature_names`` a
    tuple of d names, ``sensitive`` an optional (n,) int64 group indicator, ``name`` a label.
    Inputs are coerced to these types; inconsistent shapes raise ValueError.
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    sensitive: np.ndarray | None = None
    name: str = field(kw_only=True)

    def __post_init__(self):
        X = np.ascontiguousarray(self.X, dtype=np.float64)
        y = np.asarray(self.y).astype(np.int64, copy=False)
        names = tuple(self.feature_names)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
        if not np.isin(y, (0, 1)).all():
            raise ValueError("y must take values in {0, 1}")
        if len(names) != X.shape[1]:
            raise ValueError(f"feature_names has {len(names)} entries for {X.shape[1]} columns")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "feature_names", names)
        if self.sensitive is not None:
            s = np.asarray(self.sensitive).astype(np.int64, copy=False)
            if s.shape != y.shape:
                raise ValueError(f"sensitive must have shape {y.shape}, got {s.shape}")
            object.__setattr__(self, "sensitive", s)


def _file(path, filename):
    """Return ``path/filename``, raising FileNotFoundError if it is missing."""
    f = Path(path) / filename
    if not f.is_file():
        raise FileNotFoundError(f"expected UCI file {f} (path must be the data set's directory)")
    return f


def _check_split(split):
    if split not in ("train", "test", "both"):
        raise ValueError(f"split must be 'train', 'test' or 'both', got {split!r}")


def _standardize(Z, mean, std):
    """(Z - mean) / std, leaving constant columns (std == 0) centred only."""
    return (Z - mean) / np.where(std > 0, std, 1.0)


def _with_intercept(Z):
    return np.ascontiguousarray(np.column_stack([Z, np.ones(len(Z))]), dtype=np.float64)


def _one_hot(values, levels):
    """(n, len(levels)) indicator matrix; values not in ``levels`` give an all-zero row."""
    index = {v: j for j, v in enumerate(levels)}
    out = np.zeros((len(values), len(levels)))
    for i, v in enumerate(values):
        j = index.get(v)
        if j is not None:
            out[i, j] = 1.0
    return out


def load_breast_cancer_wisconsin(path) -> Dataset:
    """Breast Cancer Wisconsin (Original): 699 rows, 9 standardized features + intercept.

    ``path`` is the directory holding ``breast-cancer-wisconsin.data``. The sample-id
    column is dropped. The 16 missing (``?``) "bare nuclei" values are imputed with the
    median of the observed values of that column (before standardization). Each feature
    is then standardized to zero mean and unit (population, ddof=0) std over all rows.
    Label 1 = malignant (class 4), 0 = benign (class 2).
    """
    with open(_file(path, "breast-cancer-wisconsin.data"), newline="") as fh:
        rows = [r for r in csv.reader(fh) if r]
    if any(len(r) != 11 for r in rows):
        raise ValueError("breast-cancer-wisconsin.data rows must have 11 fields")
    Z = np.array([[np.nan if v.strip() == "?" else float(v) for v in r[1:10]] for r in rows])
    labels = np.array([int(r[10]) for r in rows])
    if not np.isin(labels, (2, 4)).all():
        raise ValueError("breast-cancer-wisconsin classes must be 2 or 4")
    missing = np.isnan(Z)
    Z[missing] = np.take(np.nanmedian(Z, axis=0), np.nonzero(missing)[1])
    Z = _standardize(Z, Z.mean(axis=0), Z.std(axis=0))
    return Dataset(_with_intercept(Z), (labels == 4).astype(np.int64),
                   BCW_FEATURES + ("intercept",), name="breast-cancer-wisconsin")


def _read_adult(file):
    """Parse an adult.data/adult.test file into a list of 15-field rows (labels unpunctuated)."""
    rows = []
    with open(file, newline="") as fh:
        for r in csv.reader(fh, skipinitialspace=True):
            if not r or r[0].startswith("|"):
                continue
            if len(r) != 15:
                raise ValueError(f"{file}: expected 15 fields, got {len(r)}: {r}")
            r = [v.strip() for v in r]
            r[14] = r[14].rstrip(".")
            if r[14] not in ("<=50K", ">50K"):
                raise ValueError(f"{file}: unknown label {r[14]!r}")
            rows.append(r)
    return rows


def load_adult(path, split="train", standardizer=None, drop_sensitive=False) -> Dataset:
    """UCI Adult / Census Income, one-hot encoded and standardized.

    ``path`` is the directory holding ``adult.data`` (train, 32,561 rows) and
    ``adult.test`` (test, 16,281 rows); ``split`` is "train", "test" or "both" (train rows
    then test rows). Label 1 = ">50K".

    Columns: the six :data:`ADULT_NUMERIC` columns, standardized; then, for each attribute
    of :data:`ADULT_CATEGORICAL` in that order, one indicator column ``"attr=level"`` per
    level seen in the train file (sorted, ``?`` excluded), so every split has the same
    columns; then ``"intercept"``. A missing ``?`` value or a level unseen in train gives
    all zeros for that attribute. ``standardizer`` is an optional ``(mean, std)`` pair of
    length-6 arrays for the numeric columns; by default the mean and population std of the
    train rows are used for every split.

    ``sensitive`` is 1 for Female and 0 for Male. The ``sex=...`` indicator columns stay in
    ``X`` unless ``drop_sensitive`` is true.
    """
    _check_split(split)
    train = _read_adult(_file(path, "adult.data"))
    rows = train
    if split != "train":
        test = _read_adult(_file(path, "adult.test"))
        rows = test if split == "test" else train + test
    col = {c: j for j, c in enumerate(ADULT_COLUMNS)}

    num_idx = [col[c] for c in ADULT_NUMERIC]
    Z = np.array([[float(r[j]) for j in num_idx] for r in rows])
    if standardizer is None:
        T = np.array([[float(r[j]) for j in num_idx] for r in train])
        mean, std = T.mean(axis=0), T.std(axis=0)
    else:
        mean, std = (np.asarray(a, dtype=np.float64) for a in standardizer)
        if mean.shape != (len(ADULT_NUMERIC),) or std.shape != (len(ADULT_NUMERIC),):
            raise ValueError(f"standardizer must be (mean, std) arrays of length {len(ADULT_NUMERIC)}")
    blocks, names = [_standardize(Z, mean, std)], list(ADULT_NUMERIC)
    for c in ADULT_CATEGORICAL:
        if drop_sensitive and c == "sex":
            continue
        j = col[c]
        levels = sorted({r[j] for r in train} - {"?"})
        blocks.append(_one_hot([r[j] for r in rows], levels))
        names += [f"{c}={lv}" for lv in levels]

    y = np.array([r[14] == ">50K" for r in rows], dtype=np.int64)
    sensitive = np.array([r[col["sex"]] == "Female" for r in rows], dtype=np.int64)
    return Dataset(_with_intercept(np.hstack(blocks)), y, tuple(names) + ("intercept",),
                   sensitive, name=f"adult-{split}")


def _read_monks(file):
    """Parse a MONK's ARFF file into an int array of rows ``class, a1, ..., a6``."""
    with open(file) as fh:
        rows = [ln.strip().split(",") for ln in fh if ln.strip() and not ln.startswith("@")]
    A = np.array(rows, dtype=np.int64)
    if A.ndim != 2 or A.shape[1] != 7:
        raise ValueError(f"{file}: rows must have 7 fields (class, a1..a6)")
    if not np.isin(A[:, 0], (0, 1)).all() or not ((A[:, 1:] >= 1) & (A[:, 1:] <= MONKS_LEVELS)).all():
        raise ValueError(f"{file}: class must be 0/1 and attribute a_i in 1..{MONKS_LEVELS}")
    return A


def load_monks1(path, split="train") -> Dataset:
    """MONK's problem 1: six categorical attributes, one-hot encoded (17 columns) + intercept.

    ``path`` is the directory holding ``monks-1.train`` (124 rows) and ``monks-1.test``
    (432 rows); ``split`` is "train", "test" or "both" (train rows then test rows).
    Attribute ``a_i`` is encoded with its full level set 1..k (k = 3, 3, 2, 3, 4, 2) as
    columns ``"a_i=v"``, so the splits agree. No standardization. Note that the UCI test
    file is the full grid of all 432 attribute combinations, so it contains every train row
    (and "both" repeats them).
    """
    _check_split(split)
    parts = {"train": ["train"], "test": ["test"], "both": ["train", "test"]}[split]
    A = np.vstack([_read_monks(_file(path, f"monks-1.{p}")) for p in parts])
    blocks, names = [], []
    for i, k in enumerate(MONKS_LEVELS, start=1):
        blocks.append(_one_hot(A[:, i], range(1, k + 1)))
        names += [f"a{i}={v}" for v in range(1, k + 1)]
    return Dataset(_with_intercept(np.hstack(blocks)), A[:, 0], tuple(names) + ("intercept",),
                   name=f"monks-1-{split}")


def _check_generator_args(n_samples, n_features):
    if n_samples < 2:
        raise ValueError(f"n_samples must be >= 2, got {n_samples}")
    if n_features < 1:
        raise ValueError(f"n_features must be >= 1, got {n_features}")


def _finish(Z, y, sensitive, name):
    """Standardize Z column-wise, append the intercept and wrap as a Dataset."""
    Z = _standardize(Z, Z.mean(axis=0), Z.std(axis=0))
    names = tuple(f"x{j}" for j in range(Z.shape[1])) + ("intercept",)
    return Dataset(_with_intercept(Z), y, names, sensitive, name=name)


def make_classification(n_samples=600, n_features=8, class_ratio=0.35, separation=1.0,
                        seed=0) -> Dataset:
    """Two Gaussian classes with identity covariance and means ``separation`` apart.

    Exactly ``round(class_ratio * n_samples)`` rows have label 1 (must leave both classes
    non-empty). Class 0 ~ N(0, I); class 1 ~ N(separation * u, I) for a random unit vector
    ``u``. Rows are shuffled, features standardized, and an intercept column appended.
    """
    _check_generator_args(n_samples, n_features)
    n_pos = round(class_ratio * n_samples)
    if not 0 < n_pos < n_samples:
        raise ValueError(f"class_ratio={class_ratio} leaves a class empty for n_samples={n_samples}")
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(n_features)
    u /= np.linalg.norm(u)
    y = rng.permutation(np.repeat([0, 1], [n_samples - n_pos, n_pos]))
    Z = rng.standard_normal((n_samples, n_features)) + separation * np.outer(y, u)
    return _finish(Z, y, None, "classification")


def make_fairness(n_samples=2000, n_features=8, seed=0) -> Dataset:
    """Synthetic data with a binary sensitive attribute ``s`` (kept out of ``X``).

    ``s`` = 1 (the minority group) with probability 0.3. The label rate depends on the
    group: P(y=1 | s=1) = 0.3, P(y=1 | s=0) = 0.5. Features are
    ``N(0, I) + 1.5 * y * u + 1.0 * s * v`` for random unit vectors ``u, v``, with the
    noise scaled by 2 in the minority group, so a single (unconstrained) logistic
    regression fits the minority group worse: its loss is larger. Features are
    standardized and an intercept column appended.
    """
    _check_generator_args(n_samples, n_features)
    rng = np.random.default_rng(seed)
    u, v = rng.standard_normal((2, n_features))
    u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
    s = (rng.random(n_samples) < 0.3).astype(np.int64)
    y = (rng.random(n_samples) < np.where(s == 1, 0.3, 0.5)).astype(np.int64)
    noise = rng.standard_normal((n_samples, n_features)) * np.where(s == 1, 2.0, 1.0)[:, None]
    Z = noise + 1.5 * np.outer(y, u) + 1.0 * np.outer(s, v)
    return _finish(Z, y, s, "fairness")


def load_maros_meszaros(path):
    """One Maros–Meszaros QP ``min ½xᵀPx + qᵀx + r  s.t.  l ≤ Ax ≤ u`` from its ``.mat``
    file (as in qpsolvers/maros_meszaros_qpbenchmark: keys P, q, r, A, l, u; ±1e20 = ±∞),
    read in place with ``scipy.io.loadmat``. Returns a
    :class:`~constrfl.problems.qp.QuadraticProgram` named after the file's stem; pass
    it on with ``federated_qp(qp.P, qp.q, qp.A, qp.l, qp.u, qp.r, name=qp.name)``."""
    from scipy.io import loadmat                 # 50 ms to import, for this loader only
    f = Path(path)
    if not f.is_file():
        raise FileNotFoundError(f"expected a Maros-Meszaros .mat file, got {f}")
    d = loadmat(f)
    missing = {"P", "q", "r", "A", "l", "u"} - set(d)
    if missing:
        raise ValueError(f"{f}: missing keys {sorted(missing)}")
    return QuadraticProgram(d["P"], d["q"], d["A"], d["l"], d["u"], float(np.ravel(d["r"])[0]),
                            name=f.stem)
