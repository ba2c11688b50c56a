"""Flower's fixed waits (flwr 1.42) and the in-memory ways constrfl shortens them.

None of these waits can be set by an option, a configuration file or an environment
variable (the only one that can, ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``, is the
SuperExec's task poll).  Each function here changes them in the calling process only,
on a tested flwr (:data:`constrfl.flower.warm.pinned.TESTED`), and does nothing elsewhere;
nothing installed is modified.  See docs/flower.md ("Flower's fixed waits").
"""
from __future__ import annotations

import argparse
import sys
import time as _time

from . import pinned

__all__ = ["FIXED", "Backoff", "ShortWaits", "shorten_object_pulls",
           "shorten_supernode_sleeps", "adapt_task_polls"]

#: flwr 1.42.0's fixed waits on a deployed round: (where, seconds, what)
FIXED = (
    ("flwr/supernode/start_client_internal.py:263", 3.0,
     "the SuperNode sleeps when the SuperLink had no message for it"),
    ("flwr/supernode/start_client_internal.py:470", 0.5,
     "the SuperNode checks for the ClientApp's reply"),
    ("flwr/supernode/start_client_internal.py:506", 0.5,
     "the SuperNode waits for a reply object's content"),
    ("flwr/supercore/constant.py:48 (PULL_INITIAL_BACKOFF, bound as a default argument "
     "at flwr/supercore/inflatable/inflatable_utils.py:208 and :423)", 1.0,
     "first retry of an object pull that found the object not there yet: the "
     "ClientApp pulls the message before its SuperNode has stored it (the task is "
     "created first, start_client_internal.py:365 before :415), the SuperNode pulls "
     "it before the ServerApp has pushed all of it, the ServerApp pulls a reply "
     "before the SuperNode has pushed all of it"),
    ("flwr/supercore/constant.py:45 (OBJECT_PUSH_SESSION_TTL_SECONDS) with "
     "flwr/superlink/grid/http_grid.py:325 (pull_objects, max_time 7200 s)", 180.0,
     "a ServerApp pulling the reply of a site that died while pushing it waits in "
     "Grid.pull_messages until the SuperLink's push session expires"),
    ("flwr/supercore/superexec/run_superexec.py:277", 1.0,
     "the SuperExec asks for a task (FLWR_SUPEREXEC_TASK_POLL_INTERVAL, 0.01-60 s)"),
)

IDLE, REPLY = 3.0, 0.5        # start_client_internal.py's sleeps

#: seconds between a site's polls while work comes (its SuperNode asking the SuperLink
#: for a message, its SuperExec asking the SuperNode for a task).  Measured on the
#: example's warm deployment (5 sites, 2 shared cores, 6 alternated pairs): 0.2 s gave
#: 0.75-0.82 s a round and 85-88 CPU-s, 0.1 s 0.77-1.04 s and 90-109 CPU-s; 0.3 s
#: 0.87 s (polls cost CPU that the round needs; shorter polls cut little latency).
#: Against constrfl's SuperLink and SuperNode, which hold an ask until there is an
#: answer (:mod:`constrfl.flower.warm.holds`), a site asks again at once instead
SITE_POLL = 0.2


class Backoff:
    """A poll that is quick while there is work and costs nothing when there is none:
    ``fast`` seconds between polls until ``window`` seconds after the last
    :meth:`touch` (work seen), then twice the last wait each time, up to the caller's
    own wait (Flower's)."""

    def __init__(self, fast, window=5.0, clock=_time.monotonic):
        self.fast, self.window, self.clock = float(fast), float(window), clock
        self.touch()

    def touch(self):
        self.last, self.wait = self.clock(), self.fast

    def next(self, cap):
        if self.clock() - self.last >= self.window:
            self.wait = min(self.wait * 2, cap)
        return min(self.wait, cap)


class _Clock:
    """The ``time`` module as a polling loop sees it: its sleeps go through
    :meth:`wait`, which counts the time since the previous sleep ended (the ask in
    between, held by a server that answers when there is something:
    :mod:`constrfl.flower.warm.holds`) against the wait; anything else is ``time``'s."""

    def __init__(self, clock=_time):
        self._clock = clock
        self._woke = clock.monotonic()

    def wait(self, seconds):
        self._clock.sleep(max(0.0, seconds - (self._clock.monotonic() - self._woke)))
        self._woke = self._clock.monotonic()

    def __getattr__(self, name):
        return getattr(self._clock, name)


class ShortWaits(_Clock):
    """``start_client_internal``'s clock: ``sleep(3)`` (nothing to pull) waits
    ``idle.next(3)``, ``sleep(0.5)`` (a reply not there yet) waits ``reply`` and counts
    as work for ``idle``; any other sleep as asked."""

    def __init__(self, idle, reply, clock=_time):
        super().__init__(clock)
        self.idle, self.reply = idle, reply

    def sleep(self, seconds):
        if seconds == IDLE:
            seconds = self.idle.next(IDLE)
        elif seconds == REPLY:
            self.idle.touch()
            seconds = self.reply
        self.wait(seconds)


class _Polls(_Clock):
    """``run_superexec``'s clock: its one sleep, between task polls, waits
    ``polls.next(seconds)``."""

    def __init__(self, polls, clock=_time):
        super().__init__(clock)
        self.polls = polls

    def sleep(self, seconds):
        self.wait(self.polls.next(seconds))


def _tested():
    if pinned.tested():
        return True
    print(f"constrfl: Flower's fixed waits kept (flwr {pinned.installed()} is not one "
          f"of the tested {', '.join(pinned.TESTED)}.x)", file=sys.stderr, flush=True)
    return False


def shorten_supernode_sleeps(idle=SITE_POLL, reply=0.01, window=5.0):
    """The SuperNode loop of this process asks the SuperLink again after ``idle``
    seconds instead of 3 s while it has had work in the last ``window`` seconds (then
    backing off to 3 s), and checks for a reply every ``reply`` seconds instead of 0.5 s.
    Returns whether it did (a tested flwr)."""
    if not _tested():
        return False
    from flwr.supernode import start_client_internal as loop
    loop.time = ShortWaits(Backoff(idle, window), reply,
                           clock=getattr(loop.time, "_clock", _time))
    return True


def adapt_task_polls(fast=SITE_POLL, window=5.0):
    """The SuperExec loop of this process polls for a task every ``fast`` seconds until
    ``window`` seconds after the last :meth:`Backoff.touch` of the returned
    :class:`Backoff` (call it when a task starts), then backs off to its own interval
    (``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``, 1 s by default).  ``None`` on an untested
    flwr."""
    if not _tested():
        return None
    from flwr.supercore.superexec import run_superexec as loop
    polls = Backoff(fast, window)
    loop.time = _Polls(polls, clock=getattr(loop.time, "_clock", _time))
    return polls


def command_parser(command, what):
    """The option parser of constrfl's stand-in for a Flower command (``command``, see
    :data:`.pinned.STOCK`): its own options, the rest being Flower's."""
    stock = pinned.STOCK[command]
    return argparse.ArgumentParser(
        prog=f"python -m {command}", add_help=False,
        description=f"{stock} {what}; any other argument is {stock}'s (see {stock} --help).")


def command_args(parser, argv, command, help_flag, pulls=True):
    """What the commands share before they start: ``parser`` (their own options, from
    :func:`command_parser`) gains ``--pull-backoff`` (``pulls``) and ``help_flag`` and
    reads ``argv`` (None: the command line); on an untested flwr the process becomes
    Flower's command (:func:`.pinned.stock_if_untested`) and this returns None, else the
    object pulls are shortened and it returns ``(options, flwr_args)``."""
    if pulls:
        parser.add_argument("--pull-backoff", type=float, default=0.02,
                            help="first retry of an object pull, doubling up to 1 s (flwr: "
                            "1 s up to 10 s; 0: flwr's)")
    parser.add_argument(help_flag, action="help", help="this help")
    a, flwr_args = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if pinned.stock_if_untested(command, flwr_args):
        return None
    if pulls and a.pull_backoff > 0:
        shorten_object_pulls(a.pull_backoff)
    return a, flwr_args


def run_as_flower(command, entry, flwr_args, banner):
    """Say ``constrfl: <banner>`` on stderr and run Flower's ``entry`` point of
    ``command``'s stock command with ``flwr_args``, in this process."""
    sys.argv = [pinned.STOCK[command], *flwr_args]
    print(f"constrfl: {banner}", file=sys.stderr, flush=True)
    entry()


def shorten_object_pulls(initial=0.02, cap=1.0, max_time=None):
    """Object pulls of this process retry after ``initial`` seconds (doubling up to
    ``cap``) instead of 1 s (up to 10 s), and give up after ``max_time`` seconds
    (default: flwr's 7200 s, or 500 tries per object).  A ServerApp whose site died
    while pushing a reply otherwise waits in ``Grid.pull_messages`` until the
    SuperLink's push session expires (``OBJECT_PUSH_SESSION_TTL_SECONDS``, 180 s),
    whatever its own timeout; given up, the reply is Flower's ``MESSAGE_UNAVAILABLE``
    error.  Returns whether it did (a tested flwr)."""
    if not _tested():
        return False
    from flwr.supercore.inflatable import inflatable_utils as pulls
    limits = dict(initial_backoff=float(initial), backoff_cap=float(cap))
    if max_time is not None:
        limits["max_time"] = float(max_time)
    for fn in (pulls.pull_objects, pulls.pull_and_inflate_object_from_tree):
        fn.__kwdefaults__.update(limits)
    return True
