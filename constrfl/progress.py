"""Where a long solve is: the ``constrfl`` logger and a one-line progress display.

* The logger ``"constrfl"`` (standard :mod:`logging`): a DEBUG record per
  communication round from the federation (the round, its message type, how many
  clients), an INFO record per outer iteration of the proximal AL methods (its
  residuals) — shown once the application configures logging, e.g.
  ``logging.basicConfig(level=logging.INFO)`` — and a WARNING when a round has run
  longer than ``SLOW_ROUND`` seconds (:func:`watch_rounds`), which Python prints to
  stderr without any configuration (the logger has no handler of its own: Python's
  last resort prints warnings), so that a solve whose output goes to a file does not
  stay silent while it is stuck.
* :func:`progress_line`: while a solve runs, one status line on stderr (rounds, outer
  iterations, the running subproblem's residual, the last outer iteration's
  residuals, seconds), redrawn a few times a second by a background thread that only
  reads the solve's counters — when stderr is a terminal, and only once the solve has
  run ``after`` seconds; erased when the solve ends.
* :class:`IterationTable`: ``verbose=True``'s table on stdout, OSQP-like: a header, a
  row per iteration (per round for the baselines), a footer with the status.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time

import numpy as np

__all__ = ["log", "progress_line", "status_text", "watch_rounds", "IterationTable",
           "SLOW_ROUND"]

log = logging.getLogger("constrfl")
#: seconds a round may run before the solve says so (once a round) at WARNING
SLOW_ROUND = 60.0


@contextlib.contextmanager
def _in_background(body, name):
    """While the block runs, ``body(done)`` in a daemon thread; ``done`` (an Event) is
    set when the block ends, and the thread joined."""
    done = threading.Event()
    thread = threading.Thread(target=body, args=(done,), name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextlib.contextmanager
def watch_rounds(fed, limit=None, every=1.0):
    """While the block runs, a background thread checks every ``every`` seconds
    whether the federation's round in progress (``fed.round_started``, a
    ``time.perf_counter()`` value, and ``fed.round_what``) has run past ``limit``
    [``SLOW_ROUND``] seconds, and says so once a round at WARNING."""
    limit = SLOW_ROUND if limit is None else limit
    warned = [None]

    def check(done):
        while not done.wait(every):
            started = getattr(fed, "round_started", None)
            if started is None or warned[0] == started:
                continue
            elapsed = time.perf_counter() - started
            if elapsed > limit:
                warned[0] = started
                log.warning("constrfl: round %d (%s) has run %.1f s and goes on (a slow "
                            "party or a large message; max_time bounds a solve)",
                            fed.traffic.rounds + 1, fed.round_what, elapsed)

    with _in_background(check, "constrfl-watch"):
        yield


@contextlib.contextmanager
def progress_line(describe, enabled=None, *, stream=None, after=1.0, every=0.25):
    """Show ``describe()`` (a one-line status) on ``stream`` [stderr] every ``every``
    seconds from ``after`` seconds on, while the block runs.  ``enabled``: True, False,
    or None (on when the stream is a terminal)."""
    stream = sys.stderr if stream is None else stream
    if enabled is None:
        enabled = bool(getattr(stream, "isatty", lambda: False)())
    if not enabled:
        yield
        return
    width = [0]                                  # the widest line drawn

    def draw(done):
        if done.wait(after):
            return
        while True:
            text = describe()
            stream.write("\r" + text.ljust(width[0]))
            stream.flush()
            width[0] = max(width[0], len(text))
            if done.wait(every):
                return

    try:
        with _in_background(draw, "constrfl-progress"):
            yield
    finally:
        if width[0]:
            stream.write("\r" + " " * width[0] + "\r")
            stream.flush()


def status_text(start, rounds, outer, last, unit="outer", inner=None):
    """``constrfl: 1,234 rounds · outer 3 · subproblem 2.1e-03 → 1.0e-04 · at outer 2:
    stationarity 1.2e-03, feasibility 4.0e-05 · 12.3 s`` (``last``: the newest history
    record, or None; ``inner``: the running subproblem's state, whose residual and τ
    change every round)."""
    parts = [f"constrfl: {rounds:,} rounds", f"{unit} {outer}"]
    if inner is not None and np.isfinite(inner.certificate):
        parts.append(f"subproblem {inner.certificate:.1e} → {inner.tau:.1e}")
    if last is not None and "stationarity" in last:
        where = f"at {unit} {last['k']}: " if "k" in last else ""
        parts.append(f"{where}stationarity {last['stationarity']:.1e}, "
                     f"feasibility {last['feasibility']:.1e}")
    parts.append(f"{time.perf_counter() - start:.1f} s")
    return " · ".join(parts)


class IterationTable:
    """``verbose=True``: a header naming the solve and ``columns`` (``(name, width)``),
    a row for each record that :meth:`shows` (``format`` makes it), and the status."""

    columns = ()

    def __init__(self, verbose, method, problem):
        self.on = verbose
        if self.on:
            print(f"constrfl {method}: {problem.n_clients} clients, dim {problem.dim}, "
                  f"regularizer {problem.regularizer!r}")
            print(" ".join(f"{name:>{width}}" for name, width in self.columns))

    def shows(self, record):
        return True

    def format(self, record):
        raise NotImplementedError

    def __call__(self, record):
        if self.on and self.shows(record):
            print(self.format(record))

    def close(self, res):
        if self.on:
            print(f"status: {res.status} ({res.message}); time {res.time:.3f}s")
