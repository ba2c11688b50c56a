"""Long runs are not silent (issue "A fresh install passes its own tests", item 5): the
progress line's numbers change every round, a round that runs past SLOW_ROUND says so
once at WARNING (printed by Python without any configuration), a ServerApp logs its
outer iterations."""
import logging
import subprocess
import sys
import time

import numpy as np

import constrfl as cf
from constrfl import progress
from constrfl.progress import status_text

from builders import np_problem


class Clock:
    """``time.perf_counter`` on a clock the test moves (real time goes on too)."""

    def __init__(self):
        self.skipped = 0.0

    def __call__(self):
        return REAL_CLOCK() + self.skipped


REAL_CLOCK = time.perf_counter


class SlowGrad:
    """A client objective whose ``at``-th gradient moves the clock on by ``seconds``
    and waits a little real time, so that the watch sees the round running."""

    def __init__(self, f, clock, at, seconds):
        self.f, self.clock, self.at, self.seconds, self.calls = f, clock, at, seconds, 0
        self.fn = cf.functions.Custom(f.value, self.grad, f.hess, dim=f.dim)

    def grad(self, w):
        self.calls += 1
        if self.calls == self.at:
            self.clock.skipped += self.seconds
            time.sleep(0.3)
        return self.f.grad(w)


def test_a_slow_round_says_so_once_at_warning(monkeypatch, caplog):
    """A round that runs longer than SLOW_ROUND is named at WARNING while it runs, once
    (on a clock the test moves by 10 minutes inside one round; the watch looks every
    0.01 s of real time)."""
    p = np_problem(3, 0.4)
    clock = Clock()
    slow = SlowGrad(p.clients[1].objective, clock, 4, 600.0)
    c = p.clients[1]
    p.clients[1] = cf.Client(objective=slow.fn, constraints=c.constraints, name=c.name)
    original = progress.watch_rounds
    monkeypatch.setattr("constrfl.execution.watch_rounds",
                        lambda fed: original(fed, every=0.01))
    monkeypatch.setattr(time, "perf_counter", clock)
    with caplog.at_level(logging.WARNING, logger="constrfl"):
        res = cf.solve(p, inner="newton")
    monkeypatch.undo()
    assert res.status == "optimal"
    slow_records = [r for r in caplog.records if "has run" in r.getMessage()]
    assert len(slow_records) == 1 and slow_records[0].levelno == logging.WARNING
    assert "newton.eval to 3 clients" in slow_records[0].getMessage()


def test_python_prints_the_warning_without_configuration():
    """The constrfl logger has no handler of its own: a WARNING reaches stderr through
    Python's last resort in a fresh process that configured nothing (an INFO does not)."""
    code = ("import constrfl.progress as p\n"
            "p.log.info('not shown')\n"
            "p.log.warning('shown')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert "shown" in out.stderr and "not shown" not in out.stderr


def test_the_progress_line_moves_with_the_rounds():
    """Between outer iterations the line shows the running subproblem's residual and
    its τ (fresh every round), and says at which outer iteration the KKT residuals were
    measured."""
    class Inner:
        certificate, tau = 2.1e-3, 1e-4
    text = status_text(time.perf_counter(), 1234, 3, {"k": 2, "stationarity": 4.2e-1,
                                                       "feasibility": 6e-1}, inner=Inner())
    assert "subproblem 2.1e-03 → 1.0e-04" in text
    assert "at outer 2: stationarity 4.2e-01, feasibility 6.0e-01" in text
    Inner.certificate = np.inf                        # not evaluated yet: not shown
    assert "subproblem" not in status_text(time.perf_counter(), 1, 0, None, inner=Inner())
