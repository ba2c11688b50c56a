"""What every solve loop shares: Ctrl-C handling, the checked callback, option checks."""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import numbers
import signal
import threading
import time

import numpy as np

from . import status as st
from .errors import SolveStop

__all__ = ["SolveControl", "interruptible", "checked_callback", "checkpoint", "restore",
           "positive", "count", "real"]


@dataclasses.dataclass
class SolveControl:
    """What ends a solve between rounds, owned by the solve: its ``deadline`` (a
    ``time.perf_counter()`` value, from ``max_time``; None: none) and a Ctrl-C
    (``interrupted``).  The federation consults it before every round (and a backend
    within one), the server's model operator at each of its products
    (:class:`~constrfl.solvers.subspace.ModelHessian`)."""

    deadline: float | None = None
    interrupted: bool = False

    def past_deadline(self):
        """Whether ``max_time`` has run out."""
        return self.deadline is not None and time.perf_counter() > self.deadline

    def check(self):
        """Raise the :class:`~constrfl.errors.SolveStop` that ends the solve now, if any."""
        if self.interrupted:
            raise SolveStop("interrupted (Ctrl-C)", st.INTERRUPTED)
        if self.past_deadline():
            raise SolveStop("max_time reached", st.TIME_LIMIT)


def checkpoint(problem, fed, solver_state):
    """A result's ``state``: the server's solver state, the parties' runtimes this
    backend holds, the traffic counters, and what identifies the problem."""
    return {"solver": solver_state, "parties": fed.snapshot(),
            "traffic": dataclasses.asdict(fed.traffic), "seq": fed.seq,
            "problem": {"dim": problem.dim, "owners": problem.party_names}}


def restore(fed, resume):
    """Set ``fed``'s counters from a resumed result; return a copy of its solver state
    (the resumed result itself stays as it was)."""
    state = copy.deepcopy(resume.state)
    fed.traffic, fed.seq = type(fed.traffic)(**state["traffic"]), state["seq"]
    return state["solver"]


@contextlib.contextmanager
def interruptible(control):
    """Ctrl-C during the solve asks it (its :class:`SolveControl`) to stop before the
    next round (status ``"interrupted"``, everything kept); a second Ctrl-C raises
    KeyboardInterrupt.  Only in the main thread, and only where Python's default handler
    is in place."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def handler(signum, frame):
        if control.interrupted:
            raise KeyboardInterrupt
        control.interrupted = True

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def checked_callback(callback):
    """The callback wrapped: True or StopIteration → stop; an exception → stop, kept."""
    if callback is None:
        return None
    if not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")

    def call(record):
        try:
            return callback(record) is True
        except StopIteration:
            return True
        except Exception as exc:
            raise SolveStop(f"the callback raised {type(exc).__name__}: {exc}") from exc
    return call


def real(x):
    """A real number that is not a boolean."""
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def positive(x, name):
    if not real(x) or not np.isfinite(x) or x <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {x!r}")
    return float(x)


def count(x, name):
    """A positive integer (booleans are not integers)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral) or x < 1:
        raise ValueError(f"{name} must be a positive integer, got {x!r}")
    return int(x)
