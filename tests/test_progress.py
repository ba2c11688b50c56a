"""Progress of a long solve (issue 22, item 10): the ``constrfl`` logger's records and
the status line on a terminal."""
import io
import logging
import time

import constrfl as cf
import constrfl.execution
from constrfl.progress import progress_line
from builders import np_problem


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_logger_records_every_round_and_every_outer_iteration(caplog):
    p = np_problem(3)
    with caplog.at_level(logging.DEBUG, logger="constrfl"):
        res = cf.solve(p, inner="newton", progress=False)
    rounds = [r for r in caplog.records if r.levelno == logging.DEBUG
              and "(not counted)" not in r.getMessage()]
    outer = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(rounds) == res.rounds > 0
    assert len(outer) == res.outer_iterations
    assert f"stationarity {res.kkt.stationarity:.2e}" in outer[-1].getMessage()


def test_without_logging_configured_a_solve_prints_nothing(capsys):
    cf.solve(np_problem(3), inner="newton")
    out, err = capsys.readouterr()
    assert out == "" and err == ""          # pytest's capture is no terminal: no line


def test_the_status_line_is_drawn_on_a_terminal_and_erased_at_the_end():
    screen = Terminal()
    calls = []

    def describe():
        calls.append(1)
        return f"constrfl: {len(calls)} rounds"
    with progress_line(describe, stream=screen, after=0.0, every=0.01):
        time.sleep(0.1)
    text = screen.getvalue()
    assert len(calls) >= 2 and "\rconstrfl: 1 rounds" in text
    assert text.endswith("\r" + " " * len(f"constrfl: {len(calls)} rounds") + "\r")


def test_no_status_line_off_a_terminal_or_for_a_short_block():
    for stream, after in ((io.StringIO(), 0.0), (Terminal(), 10.0)):
        with progress_line(lambda: "x", stream=stream, after=after, every=0.01):
            time.sleep(0.05)
        assert stream.getvalue() == ""


def test_a_solve_shows_its_rounds_and_residuals(monkeypatch):
    """A solve on a terminal: the line names rounds, the outer iteration and the last
    residuals (here drawn from the start: ``after`` 0)."""
    import constrfl.progress as progress
    screen = Terminal()
    monkeypatch.setattr(progress.sys, "stderr", screen)
    real = progress.progress_line

    def eager(describe, enabled=None, **kw):
        return real(describe, enabled, stream=screen, after=0.0, every=0.001)
    monkeypatch.setattr(cf.execution, "progress_line", eager)
    res = cf.solve(np_problem(3), inner="admm")
    text = screen.getvalue()
    assert "rounds · outer" in text and "stationarity" in text
    assert res.status == "optimal"
