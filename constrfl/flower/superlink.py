"""``flower-superlink`` that answers a poll when there is something to answer.

    python -m constrfl.flower.superlink [--hold 1.0] <flower-superlink arguments>

flwr 1.42's SuperLink answers a SuperNode's ask for a message, and the ServerApp's ask
for replies, at once, also when there is none; the asker sleeps and asks again, so
every round waits up to a poll interval at each of these hops.  This command is
Flower's own ``flower-superlink`` (same arguments, same code, same process) with those
asks held until a message (a reply) arrives, for up to ``--hold`` seconds
(:func:`constrfl.flower.holds.hold_superlink`; 0: Flower's own answers).  Flower's
SuperNodes and ServerApps work with it unchanged; constrfl's count the held time
against their own waits, so they ask again at once.

On a flwr outside :data:`constrfl.flower.pinned.TESTED` it says so and runs
``flower-superlink`` with the same arguments instead.
"""
from __future__ import annotations

import argparse
import sys

from . import holds, pinned

__all__ = ["main"]

COMMAND = "constrfl.flower.superlink"


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog=f"python -m {COMMAND}", add_help=False,
        description="flower-superlink with held polls; any other argument is "
        "flower-superlink's (see flower-superlink --help).")
    ap.add_argument("--hold", type=float, default=holds.HOLD,
                    help="seconds an ask for messages or replies is held at most while "
                    "there is none (0: answered at once, as flwr)")
    ap.add_argument("--help-holds", action="help", help="this help")
    a, flwr_args = ap.parse_known_args(sys.argv[1:] if argv is None else argv)
    if pinned.stock_if_untested(COMMAND, flwr_args):
        return None
    if a.hold > 0:
        holds.hold_superlink(a.hold)
    from flwr.superlink.cli.flower_superlink import flower_superlink
    sys.argv = ["flower-superlink", *flwr_args]
    print(f"constrfl: SuperLink holds asks for messages and replies up to {a.hold:g} s",
          file=sys.stderr, flush=True)
    flower_superlink()


if __name__ == "__main__":
    sys.exit(main())
