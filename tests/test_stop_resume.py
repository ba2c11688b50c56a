"""Stopping a solve (callback, time limit, Ctrl-C) keeps everything; a stopped solve,
saved and loaded in a fresh process, resumes to the uninterrupted solve bit for bit."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import constrfl as cf
from constrfl.result import FORMAT_VERSION
from builders import np_problem

TESTS = Path(__file__).resolve().parent
VARIANTS = {"admm": dict(inner="admm"), "newton": dict(inner="newton"), "cproxal": dict(method="cproxal"),
            "fedavg": dict(method="fedavg", penalty="quadratic", rounds=30)}


def same(a, b):
    """Bit-identical results: iterate, multipliers, counters, history."""
    assert a.w.tobytes() == b.w.tobytes()
    assert a.status == b.status and a.rounds == b.rounds
    assert (a.bytes_up, a.bytes_down) == (b.bytes_up, b.bytes_down)
    assert (a.outer_iterations, a.inner_iterations) == (b.outer_iterations, b.inner_iterations)
    for k, m in a.multipliers.items():
        assert m.ineq.tobytes() == b.multipliers[k].ineq.tobytes()
        assert m.eq.tobytes() == b.multipliers[k].eq.tobytes()
    assert json.dumps(a.to_dict()["history"]) == json.dumps(b.to_dict()["history"])


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_callback_stop_then_resume(variant):
    p = np_problem(4, 0.4, rows=300, server_separation=0.8)
    opts = VARIANTS[variant]
    full = cf.solve(p, **opts)
    third = (lambda r: r["round"] == 3) if "rounds" in opts else (lambda r: r["k"] == 2)
    res = cf.solve(p, callback=third, **opts)
    assert res.status == "stopped" and res.error is None
    assert res.outer_iterations == 3
    same(cf.solve(p, resume=res, **opts), full)


def test_callback_stopiteration_and_exception():
    p = np_problem(3, 0.4, rows=200)

    def stop(r):
        raise StopIteration
    res = cf.solve(p, callback=stop)
    assert res.status == "stopped" and res.outer_iterations == 1

    def broken(r):
        raise KeyError("oops")
    res = cf.solve(p, callback=broken)
    assert res.status == "stopped" and isinstance(res.error.__cause__, KeyError)
    assert "the callback raised KeyError" in res.message and len(res.history) == 1


def test_time_limit_inside_the_inner_loop():
    """max_time is checked every round: a budget far shorter than one subproblem stops
    the ADMM in the middle of it, and the result resumes to the uninterrupted answer."""
    p = np_problem(5, 0.4, rows=400)
    opts = dict(inner="admm", rho=0.01, adaptive_rho=False, beta=300.0)   # ~800 + 150 rounds
    cf.solve(p, max_outer=1, **opts)                  # compiled: the next time is the solve's
    full = cf.solve(p, max_outer=2, **opts)
    res = cf.solve(p, max_time=full.time / 4, max_outer=2, **opts)   # inside the first
    assert res.status == "time_limit"
    assert 0 < res.rounds < full.rounds and res.outer_iterations < 2
    again = cf.solve(p, resume=res)
    assert again.w.tobytes() == full.w.tobytes() and again.rounds == full.rounds


class Clock:
    """``time.perf_counter`` for a test: it stands still but where the test moves it."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class CountedGrad:
    """A client objective behind a Custom whose gradient counts its calls and, at call
    ``pause_at``, moves the ``clock`` on by ``pause`` seconds (a round that outlasts
    max_time, on a clock the test owns: no sleep, no dependence on the machine)."""

    def __init__(self, f, clock=None, pause_at=None, pause=0.0):
        self.f, self.clock, self.pause_at, self.pause = f, clock, pause_at, pause
        self.calls = 0
        self.fn = cf.functions.Custom(f.value, self.grad, f.hess, dim=f.dim)

    def grad(self, w):
        self.calls += 1
        if self.calls == self.pause_at:
            self.clock.now += self.pause
        return self.f.grad(w)


def test_time_limit_inside_a_round(monkeypatch):
    """max_time is also checked between the clients of a round: once it has run out
    during one client's turn the others are not asked, the round is not counted, and
    the result (the clients who answered keep their replies) resumes bit for bit.  The
    solve runs on a clock that moves only during that turn: the counts are exact."""
    clock = Clock()

    def problem():
        p = np_problem(4, 0.4, rows=200)
        spies = [CountedGrad(c.objective, *((clock, 5, 0.5) if i == 0 else ()))
                 for i, c in enumerate(p.clients)]
        p.clients = [cf.Client(objective=s.fn, constraints=c.constraints, name=c.name)
                     for s, c in zip(spies, p.clients)]
        return p, spies
    opts = dict(inner="newton")
    full = cf.solve(problem()[0], **opts)
    p, spies = problem()
    monkeypatch.setattr(time, "perf_counter", clock)
    res = cf.solve(p, max_time=0.3, **opts)
    monkeypatch.undo()
    assert res.status == "time_limit"
    # a client's gradients: 2 in the first round (its KKT share at w⁰ and its Newton
    # evaluation), then one a round, 3 in a round that takes the next start ahead (+ the
    # KKT share at μ⁺ and the next subproblem's evaluation); the first client's fifth, in
    # the third round (ahead), outlasted max_time: no one else got that round
    assert [s.calls for s in spies] == [6, 3, 3, 3]
    again = cf.solve(p, resume=res)
    same(again, full)


@pytest.mark.parametrize("variant", ["admm", "newton", "fedavg"])
def test_saved_max_outer_result_resumes_in_a_fresh_process(variant, tmp_path):
    """Stopped by max_outer=3 (rounds=10 for a baseline), saved, loaded and resumed in
    another process: bit-identical to the uninterrupted solve, rounds and bytes too."""
    p = np_problem(4, 0.4, rows=300, server_separation=0.8)
    opts = VARIANTS[variant]
    limit = {"rounds": 10} if "rounds" in opts else {"max_outer": 3}
    full = cf.solve(p, **opts)
    part = cf.solve(p, **dict(opts, **limit))
    assert part.status == "max_iterations"
    part.save(tmp_path / "part")
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(TESTS)!r})
        import constrfl as cf
        from builders import np_problem
        p = np_problem(4, 0.4, rows=300, server_separation=0.8)
        res = cf.load_result({str(tmp_path / 'part')!r})
        cf.solve(p, resume=res, **{dict(opts, **({k: v * 100 for k, v in limit.items()}
                                                   if "rounds" not in opts else {}))!r}
                 ).save({str(tmp_path / 'done')!r})
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    same(cf.load_result(tmp_path / "done"), full)


def test_save_format_is_plain_and_checked(tmp_path):
    p = np_problem(3, 0.4, rows=200)
    res = cf.solve(p, max_outer=2)
    path = res.save(tmp_path / "r")
    record = json.loads((path / "result.json").read_text())
    assert record["format"] == "constrfl-result" and record["version"] == FORMAT_VERSION
    with np.load(path / "arrays.npz", allow_pickle=False) as z:
        assert "w" in z.files
    back = cf.load_result(path)
    assert back.w.tobytes() == res.w.tobytes() and back.status == res.status
    json.dumps(res.to_dict())                                # plain types only
    record["version"] = 99
    (path / "result.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="format version 99"):
        cf.load_result(path)
    with pytest.raises(ValueError, match="belongs to another problem"):
        cf.solve(np_problem(4, 0.4, rows=200), resume=res)
    with pytest.raises(ValueError, match="only 'max_outer' may change"):
        cf.solve(p, resume=res, beta=5.0)
    with pytest.raises(ValueError, match="stopped at max_outer=2; pass a larger max_outer"):
        cf.solve(p, resume=res)
    done = cf.solve(p)
    with pytest.raises(ValueError, match="cannot be resumed"):
        cf.solve(p, resume=done)


def test_sigint_stops_a_long_solve_cleanly():
    """A real SIGINT to a process running a long solve: it prints its result line and
    exits normally, status "interrupted", with the iterations done so far.  The child
    takes Python's own Ctrl-C handler, as in a terminal: started from a background job
    it would inherit SIGINT ignored, and a solve rightly leaves an ignored SIGINT alone
    (the test then hung and its child ran on; it is killed whatever happens)."""
    code = textwrap.dedent(f"""
        import signal; signal.signal(signal.SIGINT, signal.default_int_handler)
        import sys; sys.path.insert(0, {str(TESTS)!r})
        import constrfl as cf
        from builders import np_problem
        p = np_problem(5, 0.4, rows=400)
        print("ready", flush=True)
        res = cf.solve(p, inner="admm", rho=0.001, adaptive_rho=False, beta=1000.0,
                       max_inner=10**7, tol=1e-14)      # a stop test it cannot meet
        print("RESULT", res.status, res.rounds, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(3.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    status, rounds = out.split("RESULT")[1].split()
    assert status == "interrupted" and int(rounds) > 0
