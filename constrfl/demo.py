"""constrfl demo (or python -m constrfl.demo): Neyman-Pearson classification
(30) on synthetic data split over clients, solved by the federated proximal augmented
Lagrangian (Algorithm 1) with the iteration table, then certified against cvxpy on the
pooled problem.  Exit status 0 when the solve ends "optimal", 1 otherwise."""
from __future__ import annotations

import argparse
import math


def _checked(convert, ok, what):
    """An argparse ``type``: ``convert`` the text, then require ``ok(value)``."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value
    parse.__name__ = what            # argparse names the type in some messages
    return parse


positive_int = _checked(int, lambda v: v >= 1, "a positive integer")
nonnegative_int = _checked(int, lambda v: v >= 0, "a non-negative integer")
positive_float = _checked(float, lambda v: math.isfinite(v) and v > 0,
                          "a finite positive number")


def add_arguments(parser):
    """The demo's options (shared by ``constrfl demo`` and ``python -m constrfl.demo``)."""
    parser.add_argument("--clients", type=positive_int, default=5, metavar="N",
                        help="number of clients n (default: %(default)s)")
    parser.add_argument("--samples", type=positive_int, default=600, metavar="N",
                        help="synthetic rows in total, 35%% of them class 1; every client "
                             "needs rows of both classes (default: %(default)s)")
    parser.add_argument("--max-class1-loss", type=positive_float, default=0.2, metavar="R",
                        help="the bound r of (30): each client's mean class-1 logistic "
                             "loss must be <= R (default: %(default)s)")
    parser.add_argument("--tol", type=positive_float, default=1e-6, metavar="T",
                        help="KKT tolerance ε₁ = ε₂ of Definition 1 (default: %(default)s)")
    parser.add_argument("--seed", type=nonnegative_int, default=0, metavar="S",
                        help="seed of the data, the split and the start point "
                             "(default: %(default)s)")
    return parser


def run(args, error):
    """Build, solve, certify and print; ``error(message)`` reports a usage error (it
    does not return).  Returns the exit status."""
    import numpy as np

    import constrfl as cf
    from constrfl.problems import neyman_pearson
    from constrfl.problems.datasets import make_classification
    from constrfl.problems.partition import stratified_split

    try:
        data = make_classification(n_samples=args.samples, seed=args.seed)
    except ValueError as err:
        error(f"argument --samples: {err}")
    if args.clients > args.samples:
        error(f"argument --clients: {args.clients} clients but only {args.samples} samples")
    ids = stratified_split(data.y, args.clients, seed=args.seed)
    if any(np.bincount(ids[data.y == c], minlength=args.clients).min() == 0 for c in (0, 1)):
        error(f"argument --samples: {args.samples} rows ({int(data.y.sum())} of class 1) are "
              f"too few for {args.clients} clients: each needs rows of both classes")
    problem = neyman_pearson(data.X, data.y, ids, max_class1_loss=args.max_class1_loss)
    print(f"Neyman-Pearson: {args.samples} synthetic rows, {data.X.shape[1]} features, "
          f"{args.clients} clients, class-1 loss <= {args.max_class1_loss} at every client\n")
    res = cf.solve(problem, method="fedproxal", tol=args.tol, seed=args.seed, verbose=True)
    print(f"\n{res}\nrounds {res.rounds}, bytes up {res.bytes_up:,}, down {res.bytes_down:,}")
    print("\ncvxpy (Clarabel) on the pooled problem, same KKT code on both points:")
    print(cf.certify(problem, res))
    return 0 if res.status == "optimal" else 1


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m constrfl.demo", description=__doc__)
    args = add_arguments(parser).parse_args(argv)
    return run(args, parser.error)


if __name__ == "__main__":
    raise SystemExit(main())
