"""``python -m constrfl.demo``: Neyman-Pearson classification over 5 clients on
synthetic data, solved federatedly and certified against cvxpy."""
from __future__ import annotations

import argparse

import constrfl as cf
from constrfl.problems import neyman_pearson
from constrfl.problems.datasets import make_classification
from constrfl.problems.partition import stratified_split


def main(argv=None):
    ap = argparse.ArgumentParser(prog="constrfl demo", description=__doc__)
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--samples", type=int, default=600)
    ap.add_argument("--max-class1-loss", type=float, default=0.2)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    data = make_classification(n_samples=args.samples, seed=args.seed)
    ids = stratified_split(data.y, args.clients, seed=args.seed)
    problem = neyman_pearson(data.X, data.y, ids, max_class1_loss=args.max_class1_loss)
    print(f"Neyman-Pearson: {args.samples} synthetic rows, {data.X.shape[1]} features, "
          f"{args.clients} clients, class-1 loss <= {args.max_class1_loss} at every client\n")
    res = cf.solve(problem, method="fedproxal", tol=args.tol, seed=args.seed, verbose=True)
    print(f"\n{res}\nrounds {res.rounds}, bytes up {res.bytes_up:,}, down {res.bytes_down:,}")
    print("\ncvxpy (Clarabel) on the pooled problem, same KKT code on both points:")
    print(cf.certify(problem, res))
    return 0 if res.status == "optimal" else 1


if __name__ == "__main__":
    raise SystemExit(main())
