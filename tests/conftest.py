"""Shared test helpers: where the UCI data live (skip cleanly when absent)."""
import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def pytest_configure(config):
    """The kernels' filter of numba's inliner warning (constrfl/kernels.py), for every
    test: pytest's per-test warning capture drops a filter set at import."""
    from constrfl.kernels import INLINER_WARNING
    config.addinivalue_line(
        "filterwarnings", f"ignore:{INLINER_WARNING}:numba.core.errors.NumbaIRAssumptionWarning")


def data_root():
    """``$CONSTRFL_DATA`` if set, else ``../shared/data`` beside the repository."""
    root = Path(os.environ.get("CONSTRFL_DATA", SHARED_DATA))
    return root if root.is_dir() else None


def dataset_dir(name):
    """The folder of one UCI data set, or skip the calling test."""
    root = data_root()
    if root is None or not (root / name).is_dir():
        pytest.skip(f"UCI data folder {name!r} not available")
    return root / name
