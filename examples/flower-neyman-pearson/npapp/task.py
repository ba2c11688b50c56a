"""What a site and the server hold: Neyman-Pearson classification, eq. (30) of the paper.

    min (1/n) Σᵢ L(w; Dᵢ⁰)  s.t.  L(w; Dᵢ¹) ≤ r (every site i),  L(w; D₀¹) ≤ r (server)

L is the mean logistic loss; Dᵢ⁰/Dᵢ¹ the site's benign/malignant rows.  A site reads
only its own CSV (``f0..f9,label``, written by split_data.py); the server reads only
its own (the global constraint) and knows the sites by name.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

import constrfl as cf
from constrfl import functions as fn
from constrfl.problem import ServerSide

DEFAULT_SITES_DIR = Path(tempfile.gettempdir()) / "constrfl-np-sites"


def sites_dir(run_config):
    return Path(os.path.expanduser(run_config.get("sites-dir") or str(DEFAULT_SITES_DIR)))


def site_names(n):
    return [f"site-{i}" for i in range(n)]


def read_csv(path):
    """``(X, y)`` of a site's CSV (features then the 0/1 label, header line)."""
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return np.ascontiguousarray(data[:, :-1]), data[:, -1]


def make_client(path, name, n_sites, r):
    """Site ``name``'s objective (1/n)·L(w; D⁰) and constraint L(w; D¹) − r ≤ 0."""
    X, y = read_csv(path)
    X0, X1 = X[y == 0], X[y == 1]
    return cf.Client(objective=(1.0 / n_sites) * fn.LogisticLoss(X0, np.zeros(len(X0))),
                     constraints=[fn.LogisticLoss(X1, np.ones(len(X1))) - r], name=name)


def make_server(path, r):
    """The server's own function: the global constraint L(w; D₀¹) − r ≤ 0."""
    X, y = read_csv(path)
    X1 = X[y == 1]
    return cf.Server(constraints=[fn.LogisticLoss(X1, np.ones(len(X1))) - r])


def server_side(run_config):
    """What the ServerApp knows: the dimension, the sites' names, its own data."""
    root, n = sites_dir(run_config), int(run_config["num-sites"])
    server = make_server(root / "server.csv", float(run_config["max-class1-loss"]))
    dim = read_csv(root / "server.csv")[0].shape[1]
    return ServerSide(dim, site_names(n), server=server)


def problem(root, n, r):
    """The whole problem in one process (for checking the federated answer)."""
    root = Path(root)
    return cf.Problem([make_client(root / f"{s}.csv", s, n, r) for s in site_names(n)],
                      server=make_server(root / "server.csv", r))
