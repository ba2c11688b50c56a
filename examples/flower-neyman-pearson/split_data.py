"""Split breast-cancer-wisconsin into one CSV per site and one for the server.

    python split_data.py [--sites 5] [--out DIR] [--data DIR] [--seed 0]

Reads ``<data>/breast-cancer-wisconsin/breast-cancer-wisconsin.data`` (default data
directory: ``$CONSTRFL_DATA``, else ``../shared/data`` beside the repository), holds out
a stratified 15% for the server's global constraint and splits the rest over the sites
(stratified).  Without the data file it writes a synthetic data set of the same shape
(and says so).  Each CSV: the 9 standardized features and the intercept column, then
the label (1 = malignant), values written with 17 significant digits (exact).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from constrfl.problems.datasets import load_breast_cancer_wisconsin, make_classification
from constrfl.problems.partition import stratified_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
from npapp.task import DEFAULT_SITES_DIR, site_names  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def load(data_root):
    folder = Path(data_root) / "breast-cancer-wisconsin"
    if (folder / "breast-cancer-wisconsin.data").is_file():
        d = load_breast_cancer_wisconsin(folder)
        return d.X, d.y, f"breast-cancer-wisconsin ({folder})"
    d = make_classification(n_samples=699, n_features=9, class_ratio=0.345, seed=0)
    return d.X, d.y, "synthetic (breast-cancer-wisconsin not found in " + str(folder) + ")"


def write(path, X, y):
    cols = [f"f{j}" for j in range(X.shape[1])] + ["label"]
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", fmt="%.17g",
               header=",".join(cols), comments="")


def split(out, n_sites=5, data_root=None, seed=0, server_share=0.15):
    data_root = data_root or os.environ.get("CONSTRFL_DATA", REPO.parent / "shared" / "data")
    X, y, source = load(data_root)
    rng = np.random.default_rng(seed)
    server = np.zeros(len(y), bool)
    for label in (0, 1):                                  # stratified hold-out
        rows = np.flatnonzero(y == label)
        server[rng.choice(rows, int(round(server_share * len(rows))), replace=False)] = True
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write(out / "server.csv", X[server], y[server])
    ids = stratified_split(y[~server], n_sites, seed=seed)
    for i, name in enumerate(site_names(n_sites)):
        rows = ids == i
        write(out / f"{name}.csv", X[~server][rows], y[~server][rows])
    return source, int(server.sum()), [int((ids == i).sum()) for i in range(n_sites)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, default=5)
    ap.add_argument("--out", default=str(DEFAULT_SITES_DIR))
    ap.add_argument("--data", default=None)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    source, n_server, rows = split(a.out, a.sites, a.data, a.seed)
    print(f"{source}: server {n_server} rows, sites {rows} rows -> {a.out}")


if __name__ == "__main__":
    main()
