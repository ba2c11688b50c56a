"""The ``constrfl`` console script: ``constrfl demo [options]``."""
from __future__ import annotations

import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: constrfl demo [--clients N] [--samples N] [--max-class1-loss R] "
              "[--tol T] [--seed S]")
        return 0 if argv else 2
    if argv[0] != "demo":
        print(f"constrfl: unknown command {argv[0]!r} (try 'constrfl demo')", file=sys.stderr)
        return 2
    from .demo import main as demo
    return demo(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
