"""The server sees only sums (issue "Solvers that need only sums"): what Federation.broadcast
hands the solvers, the protocol's declarations, and the exact sum's order independence."""
import numpy as np
import pytest

import constrfl as cf
from constrfl import functions as fn, prox
from constrfl.errors import PartyError
from constrfl.exactsum import encode
from constrfl.federation import Federation, Sums
from constrfl.federation.base import aggregate
from constrfl.federation.runtime import PartyRuntime
from constrfl.messages import (FIELDS, DISCLOSED, LAYOUT, PUBLIC, SUM, SUMS, TRANSPORT_FIELDS,
                              MessageType as M, check_payload, check_reply)
from constrfl.parties import PartyContext

from builders import np_problem


def least_squares_sites(n=4, rows=15, d=40, seed=0):
    """The issue's curious-server case: 4 sites, each fn.LeastSquares(X, y) with 15 rows
    and 40 features and ‖w‖² ≤ 4, L1 0.01."""
    rng = np.random.default_rng(seed)
    data = [(rng.standard_normal((rows, d)), rng.standard_normal(rows)) for _ in range(n)]
    clients = [cf.Client(fn.LeastSquares(X, y), [fn.SquaredNorm() - 4], name=f"site-{i}")
               for i, (X, y) in enumerate(data)]
    return cf.Problem(clients, regularizer=prox.L1(0.01)), data


def record_broadcasts(monkeypatch):
    seen, original = [], Federation.broadcast

    def spy(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        seen.append((args[0], out))
        return out
    monkeypatch.setattr(Federation, "broadcast", spy)
    return seen


def _correlation(a, b):
    a, b = a - a.mean(), b - b.mean()
    return abs(float(a @ b)) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-300)


@pytest.mark.parametrize("inner", ["newton", "newton-cg", "admm"])
def test_a_curious_server_holds_no_single_sites_statistics(monkeypatch, inner):
    """Everything broadcast hands the solver is a Sums of sums (nothing disclosed); no
    array of it correlates with a site's XᵢᵀXᵢ (off the diagonal) or Xᵢᵀyᵢ the way the
    per-site Hessian did (1.000000); the sums themselves equal the pooled Hessian."""
    p, data = least_squares_sites()
    if inner == "newton-cg":                                 # a smooth P
        p = cf.Problem(p.clients, regularizer=prox.SquaredL2(0.01))
    seen = record_broadcasts(monkeypatch)
    res = cf.solve(p, inner=inner)
    assert res.status == "optimal", res.message
    assert seen and all(isinstance(s, Sums) and not s.disclosed for _, s in seen)
    d = p.dim
    iu = np.triu_indices(d, 1)
    grams = [(X.T @ X / len(X))[iu] for X, _ in data]
    moments = [X.T @ y for X, y in data]
    worst = 0.0
    for _, sums in seen:
        for key, v in sums.items():
            v = np.asarray(v, dtype=float)
            if v.size == d * (d + 1) // 2:            # a Hessian triangle
                H = np.zeros((d, d))
                H[np.triu_indices(d)] = v
                v = H[iu]
                worst = max(worst, *(_correlation(v, g) for g in grams))
            elif v.size == d:
                worst = max(worst, *(_correlation(v, m) for m in moments))
    assert worst < 0.9, worst
    if inner == "newton":
        hess = [s["hess"] for k, s in seen if "hess" in s]
        assert hess, "the Newton rounds carried Hessian sums"


def test_what_broadcast_returns_is_the_exact_sum_of_the_sites(monkeypatch):
    """The Hessian sum a round brings is Σᵢ of the sites' own (recomputed here from
    their data), not one of them."""
    p, data = least_squares_sites()
    seen = record_broadcasts(monkeypatch)
    cf.solve(p, inner="newton", max_outer=1)
    kind, first = seen[0]
    d = p.dim
    H = np.zeros((d, d))
    H[np.triu_indices(d)] = first["hess"]
    pooled = sum(X.T @ X / len(X) for X, _ in data)          # + the AL's constraint terms
    off = np.triu_indices(d, 1)
    assert _correlation(H[off], pooled[off]) > 0.999


def test_every_field_is_declared_and_checked():
    """The table declares every message type's fields; an undeclared payload or reply
    field, and a disclosed one without private=False, are refused at the boundary."""
    assert set(FIELDS) == {v for k, v in vars(M).items() if k.isupper()}
    # the transport's fields ride on any payload: no message declares one of its own
    assert not any(f.payload & TRANSPORT_FIELDS for f in FIELDS.values())
    with pytest.raises(ValueError, match="undeclared fields \\['secret'\\]"):
        check_payload({"w": np.zeros(2), "secret": 1.0}, message_type=M.NEWTON_EVAL)
    with pytest.raises(ValueError, match="undeclared fields \\['X'\\]"):
        check_reply(M.NEWTON_EVAL, {"values": np.zeros(1), "X": np.zeros(3)})
    disclosed = [k for k, v in FIELDS[M.NEWTON_BASIS].reply.items() if v == DISCLOSED]
    with pytest.raises(ValueError, match="only private=False"):
        check_reply(M.NEWTON_BASIS, {disclosed[0]: np.zeros(3)})
    check_reply(M.NEWTON_BASIS, {disclosed[0]: np.zeros(3)}, disclose=True)


def test_a_site_that_does_not_disclose_refuses_newton_basis():
    """A runtime that does not allow disclosure answers a request for its compact form
    with an error naming it (not with the data)."""
    p = np_problem(2)
    runtime = PartyRuntime(PartyContext(p.clients[0]))
    reply = runtime.call(1, M.NEWTON_BASIS, {"start": 0, "count": 10})
    assert isinstance(reply, cf.PartyError) and "private=False" in str(reply)
    with pytest.raises(ValueError, match="private=False"):
        cf.solve(p, inner="newton-basis")


@pytest.mark.parametrize("inner", ["newton", "newton-cg", "admm"])
def test_the_sites_order_does_not_change_a_bit(inner):
    """Exact sums: the same clients in another order give the same point, rounds and
    bytes, bit for bit (a float sum over the sites would depend on the order)."""
    p = np_problem(5, 0.4)
    a = cf.solve(p, inner=inner)
    b = cf.solve(cf.Problem(p.clients[::-1], server=p.server, regularizer=p.regularizer),
                 inner=inner)
    assert a.status == "optimal"
    assert a.w.tobytes() == b.w.tobytes()
    assert (a.rounds, a.bytes_up) == (b.rounds, b.bytes_up)
    for name in a.multipliers:
        assert a.multipliers[name].ineq.tobytes() == b.multipliers[name].ineq.tobytes()


def test_the_maths_page_lists_every_field_as_declared():
    """docs/algorithms.md §9's table of who sees what is the protocol's FIELDS, row by
    row (a field added to one and not the other fails here)."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs" / "algorithms.md").read_text()
    section = text[text.index("## 9."):text.index("## 10.")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`") and cells[0][1:-1] in FIELDS:
            rows[cells[0][1:-1]] = [set() if c == "–" else {x.strip() for x in c.split(",")}
                                    for c in cells[1:]]
    assert set(rows) == set(FIELDS)
    for name, f in FIELDS.items():
        payload, sums, disclosed, kept = rows[name]
        assert payload == set(f.payload), name
        assert sums == {k for k, v in f.reply.items() if v == SUM}, name
        assert disclosed == {k for k, v in f.reply.items() if v in (DISCLOSED, PUBLIC)}, name
        assert kept == set(f.private), name


@pytest.mark.parametrize("masked", [False, True])
def test_an_upload_that_does_not_match_its_layout_is_its_clients_fault(masked):
    """Sums cut short, of no layout, or of a layout with a negative size (whose sizes
    add up to the entries sent) are the sending client's client_error (named),
    plain or masked: never summed, never an exception out of the server."""
    reply = {SUMS: encode(np.ones(3)), LAYOUT: "a:2;b:"}
    names = ["a", "b", "c"] if masked else ()
    for bad in ({**reply, SUMS: reply[SUMS][:-1]}, {SUMS: reply[SUMS]},
                {**reply, LAYOUT: "a:5;b:-2"}):
        with pytest.raises(PartyError, match="do not match their layout|differ") as err:
            aggregate("admm.step", {"a": reply, "b": reply, "c": bad}, masked=names)
        assert err.value.party == "c" and err.value.status == "client_error"
    assert aggregate("admm.step", {"a": reply, "b": reply, "c": reply},
                     masked=names)["a"].tolist() == [3.0, 3.0]


def test_a_solve_with_a_cut_upload_ends_with_its_clients_error(monkeypatch):
    """A client's upload cut short in the middle of a solve ends it with client_error
    naming the client and the last iterate, as a failing function does (it raised a
    ValueError out of cf.solve)."""
    from constrfl.federation import runtime
    call, count = runtime.PartyRuntime.call, [0]

    def cut(self, seq, message_type, payload):
        reply = call(self, seq, message_type, payload)
        count[0] += 1
        if count[0] == 20 and isinstance(reply, dict) and SUMS in reply:
            reply = {**reply, SUMS: reply[SUMS][:-1]}
        return reply
    monkeypatch.setattr(runtime.PartyRuntime, "call", cut)
    res = cf.solve(np_problem(4, 0.4))
    assert res.status == "client_error" and "client-" in res.message
    assert "do not match their layout" in res.message and np.all(np.isfinite(res.w))
