"""``flower-superlink`` that answers a poll when there is something to answer.

    python -m constrfl.flower.warm.superlink [--hold 1.0] [--all-middleware]
                                        <flower-superlink arguments>

flwr 1.42's SuperLink answers a SuperNode's ask for a message, and the ServerApp's ask
for replies, at once, also when there is none; the asker sleeps and asks again, so
every round waits up to a poll interval at each of these hops.  This command is
Flower's own ``flower-superlink`` (same arguments, same code, same process) with those
asks held until a message (a reply) arrives, for up to ``--hold`` seconds
(:func:`constrfl.flower.warm.holds.hold_superlink`; 0: Flower's own answers).  Flower's
SuperNodes and ServerApps work with it unchanged; constrfl's count the held time
against their own waits, so they ask again at once.  Its middlewares that act on one
API only see that API's requests (:mod:`constrfl.flower.warm.scoped`; ``--all-middleware``:
every request passes all of them, as in flwr).

On a flwr outside :data:`constrfl.flower.warm.pinned.TESTED` it says so and runs
``flower-superlink`` with the same arguments instead.
"""
from __future__ import annotations

import sys

from . import holds, scoped, waits

__all__ = ["main"]

COMMAND = "constrfl.flower.warm.superlink"


def main(argv=None):
    ap = waits.command_parser(COMMAND, "with held polls")
    ap.add_argument("--hold", type=float, default=holds.HOLD,
                    help="seconds an ask for messages or replies is held at most while "
                    "there is none (0: answered at once, as flwr)")
    ap.add_argument("--all-middleware", action="store_true",
                    help="every request through every middleware, as flwr (default: "
                    "the Control and Fleet APIs' own middlewares on their API only)")
    parsed = waits.command_args(ap, argv, COMMAND, "--help-holds", pulls=False)
    if parsed is None:                      # an untested flwr: Flower's own command
        return None
    a, flwr_args = parsed
    if a.hold > 0:
        holds.hold_superlink(a.hold)
    if not a.all_middleware:
        scoped.scope_superlink_middleware()
    from flwr.superlink.cli.flower_superlink import flower_superlink
    waits.run_as_flower(COMMAND, flower_superlink, flwr_args,
                        f"SuperLink holds asks for messages and replies up to {a.hold:g} s"
                        + ("" if a.all_middleware else "; API middlewares on their API"))


if __name__ == "__main__":
    sys.exit(main())
