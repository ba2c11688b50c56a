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
    if not Path(path).is_file():
        raise FileNotFoundError(
            f"{path} not found: write the CSVs with `python split_data.py --sites N --out "
            f"DIR` and run with sites-dir=DIR (default {DEFAULT_SITES_DIR})")
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


def solve_options(run_config):
    """``(method, tol, options)``: the run config's solve, as the ServerApp calls it (and as
    ``cf.solve`` takes it, for checking the federated answer in one process)."""
    method = str(run_config["method"])
    if method == "fedproxal":
        options = dict(inner=str(run_config["inner"]), max_outer=int(run_config["max-outer"]))
    else:
        options = dict(rounds=int(run_config["rounds"]), penalty="quadratic",
                       penalty_weight=float(run_config["penalty-weight"]))
    return method, float(run_config["tol"]), dict(options, secure=run_config["secure"])


def accepted_statuses(method):
    """The statuses a run ends ``finished:completed`` with; any other makes the ServerApp
    raise (after saving the result), so that Flower reports the run ``finished:failed``.
    fedproxal promises a KKT point at ``tol``; a baseline runs its ``rounds`` and
    certifies nothing, so running them all (``max_iterations``) is its normal end."""
    if method == "fedproxal":
        return ("optimal", "optimal_inaccurate")
    return ("optimal", "max_iterations")


def problem(root, n, r):
    """The whole problem in one process (for checking the federated answer)."""
    root = Path(root)
    return cf.Problem([make_client(root / f"{s}.csv", s, n, r) for s in site_names(n)],
                      server=make_server(root / "server.csv", r))


def point_latest(run_dir):
    """``<results>/latest`` → ``run_dir`` (a symbolic link replaced at once: each run
    keeps its own directory, and ``latest`` names the newest)."""
    link = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    os.symlink(run_dir.name, tmp)
    os.replace(tmp, link)
