"""θ of the primal-dual curvature weights (docs/algorithms.md §5, (N3)), measured: on
random Neyman-Pearson problems, the rounds of ``cf.solve`` (the federated Newton, tol
1e-6) with a trial's Hessian weighing the active constraints' ∇²c by θy + (1 − θ)p for
each θ (θ = 0, the AL's own p, always among them), against θ = 0.

    python validation/primal_dual.py [--seeds 1,2,3] [--problems 24] [--thetas 0,0.5,0.75,1]
        [--update-results]          # -> validation/results/primal_dual.md

A sweep (one seed) draws ``--problems`` problems: n clients (3–9), rows a client
(15–79), d (10–249) and r (0.2, 0.3 or 0.5) at random, X and y from scikit-learn's
``make_classification`` (10 informative features at most), ridge 1e-3, the clients by
``stratified_split``.  Needs scikit-learn (``pip install -e ".[sklearn]"``).
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C                                                # noqa: E402

import constrfl as cf                                             # noqa: E402
from constrfl import augmented                                    # noqa: E402
from constrfl.problems import neyman_pearson                      # noqa: E402
from constrfl.problems.partition import stratified_split          # noqa: E402


def problems(seed, count):
    """The problems of one sweep."""
    from sklearn.datasets import make_classification
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n, rows, d = int(rng.integers(3, 10)), int(rng.integers(15, 80)), int(rng.integers(10, 250))
        data_seed, r = int(rng.integers(1000)), float(rng.choice([0.2, 0.3, 0.5]))
        X, y = make_classification(n_samples=n * rows, n_features=d,
                                   n_informative=min(d, 10), random_state=data_seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # (unscaled features: as drawn)
            problem = neyman_pearson(X, y, stratified_split(y, n, seed=0), r,
                                     regularizer=cf.prox.SquaredL2(1e-3))
        out.append(problem)
    return out


def solve(problem, theta):
    """``(rounds, status)`` of the solve with θ = ``theta``."""
    saved = augmented.PRIMAL_DUAL_SHARE
    augmented.PRIMAL_DUAL_SHARE = theta
    try:
        res = cf.solve(problem, tol=1e-6, max_time=60)
    finally:
        augmented.PRIMAL_DUAL_SHARE = saved
    return res.rounds, res.status


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--problems", type=int, default=24)
    p.add_argument("--thetas", default="0,0.5,0.75,1")
    C.add_output_args(p, "primal_dual.md")
    a = p.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    thetas = sorted({0.0, *(float(t) for t in a.thetas.split(","))})   # θ = 0: the base
    t0 = time.perf_counter()
    summary, detail = [], []
    for seed in seeds:
        runs = [[solve(problem, t) for t in thetas] for problem in problems(seed, a.problems)]
        found = np.array([[r for r, _ in row] for row in runs], dtype=float)
        unsolved = [sum(row[j][1] != "optimal" for row in runs) for j in range(len(thetas))]
        base = found[:, 0]
        for j, t in enumerate(thetas):
            ratio = float(np.exp(np.mean(np.log(found[:, j] / base))))
            summary.append([str(seed), f"{t:g}", f"{found[:, j].sum():.0f}", f"{ratio:.3f}",
                            str(int((found[:, j] < base).sum())),
                            str(int((found[:, j] > base).sum())), str(unsolved[j])])
            print(" | ".join(summary[-1]), flush=True)
        detail += [[str(seed), str(i)] + [f"{v:.0f}" for v in row]
                   for i, row in enumerate(found)]
    text = C.header("The primal-dual weights' θ on random NP problems",
                    time.perf_counter() - t0)
    text += ("\nRounds (deterministic) of `cf.solve(problem, tol=1e-6)` with θ set; the "
             "ratio is the geometric mean over the sweep's problems of rounds / rounds "
             "at θ = 0 (the AL's own weights p); fewer / more: problems with fewer / more "
             "rounds than at θ = 0; not optimal: solves that ended otherwise (60 s "
             "limit).\n\n")
    text += C.md_table(["seed", "θ", "rounds (sum)", "ratio (geometric mean)", "fewer",
                        "more", "not optimal"], summary)
    text += "\n## Each problem's rounds\n\n"
    text += C.md_table(["seed", "problem"] + [f"θ = {t:g}" for t in thetas], detail)
    C.write(C.output_path(a), text)


if __name__ == "__main__":
    main()
