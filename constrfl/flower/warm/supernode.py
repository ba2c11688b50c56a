"""``flower-supernode`` with its fixed waits shortened and its task polls held.

    python -m constrfl.flower.warm.supernode [--idle-wait 0.2] [--reply-wait 0.01]
                                        [--pull-backoff 0.02] [--hold 1.0]
                                        <flower-supernode arguments>

flwr 1.42's SuperNode loop sleeps a fixed 3 s whenever the SuperLink has no message
for it and 0.5 s between checks for the ClientApp's reply; its object pulls first
retry after 1 s (:data:`constrfl.flower.warm.waits.FIXED`); no option or environment
variable sets them.  After a site replies, the server's next message comes once every
site has replied: the SuperNode has asked in between, found nothing, and sleeps 3 s,
so every round costs about 3 s more than its work.

This command is Flower's own ``flower-supernode`` (same arguments, same code, same
process) with those waits shortened in this process only
(:func:`~constrfl.flower.warm.waits.shorten_supernode_sleeps`,
:func:`~constrfl.flower.warm.waits.shorten_object_pulls`); nothing installed is modified.
Shorter waits cost CPU: an idle SuperNode asks the SuperLink every ``--idle-wait``
seconds (one HTTP request, a few ms of CPU on each side), counting the time the ask took
(a SuperLink that holds asks, ``python -m constrfl.flower.warm.superlink``, makes it ask
again at once).  A SuperExec's ask for a task is held until the SuperNode has stored a
message, for up to ``--hold`` seconds (:func:`~constrfl.flower.warm.holds.hold_supernode`;
0: answered at once, as flwr).

On a flwr outside :data:`constrfl.flower.warm.pinned.TESTED` it says so and runs
``flower-supernode`` with the same arguments instead.
"""
from __future__ import annotations

import sys

from . import holds, waits

__all__ = ["main"]

COMMAND = "constrfl.flower.warm.supernode"


def _parser():
    ap = waits.command_parser(COMMAND, "with shorter fixed waits")
    ap.add_argument("--idle-wait", type=float, default=waits.SITE_POLL,
                    help="seconds between asks when the SuperLink has nothing, while "
                    "messages come (the last less than 5 s ago; then backing off to "
                    "flwr's 3 s)")
    ap.add_argument("--reply-wait", type=float, default=0.01,
                    help="seconds between checks for the ClientApp's reply (flwr: 0.5)")
    ap.add_argument("--hold", type=float, default=holds.HOLD,
                    help="seconds the SuperExec's ask for a task is held at most while "
                    "there is none (0: answered at once, as flwr)")
    return ap


def main(argv=None):
    parsed = waits.command_args(_parser(), argv, COMMAND, "--help-waits")
    if parsed is None:                      # an untested flwr: Flower's own command
        return None
    a, flwr_args = parsed
    from flwr.supernode.cli.flower_supernode import flower_supernode
    waits.shorten_supernode_sleeps(a.idle_wait, a.reply_wait)
    if a.hold > 0:
        holds.hold_supernode(a.hold)
    waits.run_as_flower(COMMAND, flower_supernode, flwr_args,
                        f"SuperNode waits {a.idle_wait:g} s idle (flwr: 3), {a.reply_wait:g} s "
                        f"for a reply (flwr: 0.5), object pulls retried after "
                        f"{a.pull_backoff:g} s (flwr: 1), task asks held up to {a.hold:g} s")


if __name__ == "__main__":
    sys.exit(main())
