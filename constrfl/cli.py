"""The ``constrfl`` console script (also ``python -m constrfl``)."""
from __future__ import annotations

import argparse
import sys

from . import __version__, demo

DESCRIPTION = """\
Federated learning with general (local and global) constraints: the federated proximal
augmented Lagrangian of He, Peng & Sun (TMLR 2024), with KKT certificates and a cvxpy
check. The library is used from Python (import constrfl as cf; cf.solve(problem));
this script runs the demo."""

EPILOG = """\
examples:
  constrfl demo                          5 clients, 600 synthetic rows, tol 1e-6
  constrfl demo --clients 20 --tol 1e-8
  constrfl demo --help                   the demo's options"""


class CommandParser(argparse.ArgumentParser):
    """A command's parser: arguments it does not know are its usage error (argparse
    would pass them up to the top level, which shows the top-level usage)."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, unknown = super().parse_known_args(args, namespace)
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return namespace, unknown


def build_parser():
    parser = argparse.ArgumentParser(prog="constrfl", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"constrfl {__version__}")
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND",
                                     parser_class=CommandParser)
    demo_parser = commands.add_parser(
        "demo", description=demo.__doc__,
        help="solve a synthetic Neyman-Pearson problem over clients and certify it "
             "against cvxpy")
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(run=lambda args: demo.run(args, demo_parser.error))
    return parser


def main(argv=None):
    """Run the command; returns the exit status (2 for a usage error)."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
