"""One way to run a solve, for every method (the proximal AL methods and the baselines):
the state (fresh, or restored from a resumed result), the method's loop under Ctrl-C
handling and the progress line, every way out of it mapped to a status
(:mod:`constrfl.status`), the elapsed time, and the fields every result fills alike."""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from . import status as st
from .control import checkpoint, interruptible, restore
from .errors import SolveStop
from .progress import progress_line, watch_rounds
from .settings import to_saved

__all__ = ["Outcome", "run", "bookkeeping"]


@dataclasses.dataclass
class Outcome:
    """How a solve's loop ended: its status and message, the exception kept as the
    result's ``error`` (a party's fault, a callback's, a numerical failure; else None),
    and the seconds the solve took, those of the solve it resumes included."""

    status: str
    message: str
    error: BaseException | None
    elapsed: float


def run(fed, resume, fresh, loop, describe, progress, start):
    """``(state, Outcome)``: the solver state is ``fresh()``, or the resumed result's
    (:func:`constrfl.control.restore` also sets ``fed``'s counters); ``loop(state) ->
    (status, message)`` runs the method; ``describe(state)`` is the progress line's text;
    ``start`` is when the solve began (``fed.control`` holds its deadline)."""
    if resume is not None:
        s, previous = restore(fed, resume), resume.time
    else:
        s, previous = fresh(), 0.0
    error = None
    try:
        with interruptible(fed.control), watch_rounds(fed), \
                progress_line(lambda: describe(s), progress):
            status, message = loop(s)
    except SolveStop as stop:
        status, message = stop.status, str(stop)
        error = stop if (stop.__cause__ is not None or stop.status in st.FAILED) else None
    except KeyboardInterrupt:
        status, message = st.INTERRUPTED, "interrupted (KeyboardInterrupt)"
    except np.linalg.LinAlgError as err:     # the server's arithmetic: its last iterate
        status, message = st.NUMERICAL_ERROR, f"the server's linear algebra failed: {err}"
        error = err
    return s, Outcome(status, message, error, previous + time.perf_counter() - start)


def bookkeeping(problem, method, settings, tol, fed, s, outcome):
    """The :class:`~constrfl.result.SolveResult` fields every method fills alike: the
    status, message, error and time of ``outcome``, the traffic, the checkpoint of the
    solver state ``s`` and the settings it ran with."""
    return dict(method=method, status=outcome.status, message=outcome.message,
                error=outcome.error, time=outcome.elapsed, rounds=fed.traffic.rounds,
                bytes_up=fed.traffic.bytes_up, bytes_down=fed.traffic.bytes_down,
                state=checkpoint(problem, fed, s), settings=to_saved(method, settings, tol))
