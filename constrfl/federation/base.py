"""The boundary between the algorithms and the parties: :class:`Federation`.

The solvers reach the clients only through ``broadcast(message_type, payload)``, which
returns :class:`Sums`: for each *sum* field of the replies (:data:`constrfl.messages.FIELDS`)
its exact sum over the parties that sent it (:mod:`constrfl.exactsum`), never a single
site's value; the disclosed fields (``private=False`` only) per site.  It counts the
round and its bytes, and turns a client's error reply into the exception that ends the
solve with the matching status (:mod:`constrfl.errors`).  Backends implement
``_exchange``: deliver one payload per client and collect what comes back — an encoded
reply dict (:func:`~.runtime.encode_reply`), or the :class:`~constrfl.errors.SolveStop`
describing why there is none; a backend never raises for a client's fault.

The server's own party (f₀, c₀, h₀) answers the same messages through ``own``, a
:class:`~.runtime.PartyRuntime` in the server's process (``include_server=True``; no
traffic).  Every message carries a sequence number; a party answers a number it has
already answered from its cache, so a round interrupted half-way is simply sent again.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..control import SolveControl
from .. import status as st
from ..errors import PartyError, SolveStop
from ..exactsum import add_into, decode
from ..progress import log
from ..messages import (FLOAT, LAYOUT, SECURE_MIN_CLIENTS as MIN_CLIENTS,
                        SECURE_MIN_NEIGHBOURS, SECURE_NEIGHBOURS, SUMS,
                        MessageType as M, check_payload, floats, wire_bytes)
from .secure import SecureServer

__all__ = ["Federation", "Traffic", "Sums", "aggregate"]


class Sums(dict):
    """A round's answer as the server sees it: ``{field: Σ over the parties that sent
    it}`` (a float, or a float64 array), exact and independent of their order; NaN
    where a party's entry was not representable (:mod:`constrfl.exactsum`).
    ``parties``: how many answered; ``counts[field]``: how many sent the field;
    ``disclosed[field]``: ``{party: value}`` of a disclosed field (``private=False``)."""

    def __init__(self, sums, parties, counts, disclosed):
        super().__init__(sums)
        self.parties, self.counts, self.disclosed = parties, counts, disclosed

    def complete(self, field):
        """Whether every party that answered sent ``field``."""
        return self.counts.get(field, 0) == self.parties


def aggregate(message_type, replies, masked=()):
    """:class:`Sums` of encoded replies ``{party: reply}`` to ``message_type``
    (:func:`~.runtime.encode_reply`): the encodings of the replies of one layout added
    modulo 2²⁵⁶ as one array each; where layouts differ (a field some parties do not
    send), their sums field by field, still in the ring; each field decoded once.  The
    replies of the ``masked`` parties (a secure sum) must all be there and share one
    layout: their masks cancel only in the sum of all of them, a sum without one of them
    is noise and is refused.  A reply whose sums do not match its own layout, or a
    masked reply of another layout than the others', is its party's fault: a
    :class:`~constrfl.errors.PartyError` (``client_error``) naming it, which ends the
    solve with what it has, as a party's failing function does."""
    if masked:
        missing = sorted(set(masked) - set(replies))
        if missing:
            raise ValueError(f"secure sum refused: the uploads of {missing} are missing "
                             "(the masks cancel only in the sum of every client's)")
        layouts = [replies[n].get(LAYOUT) for n in masked]
        if len(set(layouts)) > 1:
            common = Counter(layouts).most_common(1)[0][0]  # (ties: the first seen)
            odd = [n for n, lay in zip(masked, layouts) if lay != common]
            raise PartyError(st.CLIENT_ERROR, f"reply to {message_type!r}",
                             f"its fields {replies[odd[0]].get(LAYOUT)!r} differ from the "
                             f"other clients' {common!r} (a secure sum needs one layout)"
                             ).named(odd[0])
    groups, disclosed = {}, {}       # layout -> [total, parties]; field -> {party: value}
    fields = {}                      # layout -> its fields (:func:`_fields`), entries
    for name, reply in replies.items():
        for key, value in reply.items():
            if key in (SUMS, LAYOUT):
                continue
            disclosed.setdefault(key, {})[name] = value
        if SUMS not in reply:
            continue
        sums, layout = np.asarray(reply[SUMS]), reply.get(LAYOUT)
        if layout not in fields:
            parsed = _fields(layout)
            fields[layout] = parsed, (-1 if parsed is None else sum(n for _, n, _ in parsed))
        if sums.shape != (fields[layout][1], 4):
            raise PartyError(st.CLIENT_ERROR, f"reply to {message_type!r}",
                             f"its sums (shape {sums.shape}) do not match their layout "
                             f"{layout!r}").named(name)
        group = groups.get(layout)
        if group is None:
            groups[layout] = [np.array(sums, dtype=np.uint64), 1]
        else:
            add_into(group[0], sums)
            group[1] += 1
    totals, counts, shapes = {}, {}, {}
    for layout, (total, parties) in groups.items():
        at = 0
        for key, n, array in fields[layout][0]:
            part = total[at:at + n]
            at += n
            shapes[key], counts[key] = array, counts.get(key, 0) + parties
            if key in totals:
                add_into(totals[key], part)
            else:
                totals[key] = part.copy() if len(groups) > 1 else part
    sums = {k: decode(v) if shapes[k] else decode(v[0]) for k, v in totals.items()}
    return Sums(sums, len(replies), counts, disclosed)


def _fields(layout):
    """``[(name, entries, is an array)]`` of a reply's ``layout`` (``"name:size;..."``,
    no size for a scalar: one entry), in order; None for what is not a layout (a size
    that is not a non-negative integer among them)."""
    try:
        parsed = [(key, int(size) if size else 1, bool(size))
                  for key, size in (entry.split(":") for entry in layout.split(";"))]
    except (AttributeError, ValueError):
        return None
    return parsed if all(n >= 0 for _, n, _ in parsed) else None


@dataclass
class Traffic:
    """Communication counters: rounds and bytes (8 per float)."""

    rounds: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


#: the entry of a checkpoint's parties that holds a secure sum's public keys (not a party)
SECURE_KEY = "@secure"


class Federation:
    """Base class: ``clients`` (names, in the fixed aggregation order), ``own`` (the
    server party's runtime or None), ``traffic``, and the per-round checks.

    ``secure``: the clients mask their uploads pairwise (:mod:`.secure`; the server's
    side is :class:`~.secure.SecureServer`), each with
    ``secure`` neighbours if an int, else :data:`~constrfl.messages.SECURE_NEIGHBOURS`:
    before the first message the federation runs the key agreement (one counted round,
    each client's public key up), then sends every client the others' public keys and
    the number of neighbours with the next message, and each round's cohort where it is
    not every client; the server's
    own party is not masked (its share is the server's own).  ``snapshots``: a resumed
    solve's, whose ``@secure`` entry holds the public keys (no new agreement)."""

    def __init__(self, clients, own=None, counted=True, control=None, secure=False,
                 snapshots=None):
        self.clients = list(clients)
        if secure and len(self.clients) < MIN_CLIENTS:
            raise ValueError(f"secure=True needs at least {MIN_CLIENTS} clients (with "
                             f"{len(self.clients)}, a client could subtract its own "
                             "upload from a sum and read the other's)")
        neighbours = SECURE_NEIGHBOURS if secure is True else int(secure)
        if secure and neighbours < SECURE_MIN_NEIGHBOURS:
            raise ValueError(f"secure={secure}: a client masks with at least "
                             f"{SECURE_MIN_NEIGHBOURS} neighbours")
        #: the secure sum's server side (None: the uploads are not masked)
        self.secure = (SecureServer(self.clients, neighbours,
                                    (snapshots or {}).get(SECURE_KEY))
                       if secure else None)
        self.own = own
        self.counted = counted
        self.traffic = Traffic()
        self.seq = 0              # sequence number of the last completed message
        self.round_started = None  # time.perf_counter() when the round out began (None:
        self.round_what = ""       # none is out), and what it is (for the watch)
        #: the solve's deadline and Ctrl-C (:class:`~constrfl.control.SolveControl`)
        self.control = SolveControl() if control is None else control

    # -- what the solvers call ------------------------------------------------------
    def broadcast(self, message_type, payload, to=None, per_client=None,
                  include_server=False, counted=True):
        """Send ``payload`` (merged with ``per_client[name]`` where given) to the clients
        ``to`` (default: all) and, with ``include_server``, to the server's own party
        when it has functions; return the :class:`Sums` of their replies.
        ``counted=False``: an observer's message, outside the method's traffic."""
        self.control.check()
        check_payload(payload, message_type=message_type)
        for extra in (per_client or {}).values():
            check_payload(extra, "per-client payload", message_type)
        if to is None:
            names = self.clients
        else:
            to = set(to)
            names = [c for c in self.clients if c in to]
        payloads = {n: payload if not per_client or n not in per_client
                    else {**payload, **per_client[n]} for n in names}
        if self.secure:
            if len(names) < MIN_CLIENTS:
                raise ValueError(f"secure sum refused: a round to {len(names)} clients (at "
                                 f"least {MIN_CLIENTS}: with fewer, a sum shows a client's "
                                 "upload to the others or to the server)")
            if self.secure.peers is None:
                self._agree_keys()
            transport = self.secure.transport(names)
            payloads = {n: {**p, **transport[n]} for n, p in payloads.items()}
        seq = self.seq + 1
        self.round_what = f"{message_type} to {len(names)} clients"
        self.round_started = time.perf_counter()
        try:
            replies = self._exchange(seq, message_type, payloads)
        finally:
            self.round_started = None
        own = (self.own.call(seq, message_type, {**payload, **(per_client or {}).get("server", {})})
               if include_server and self.own is not None else None)
        for r in [replies[n] for n in names] + [own]:
            if isinstance(r, SolveStop):
                raise r
        self.seq = seq
        if self.secure:
            self.secure.delivered(names)
        if self.counted and counted:
            t = self.traffic
            t.rounds += 1
            t.bytes_down += FLOAT * sum(floats(payloads[n]) for n in names)
            t.bytes_up += sum(wire_bytes(replies[n]) for n in names)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("round %d: %s to %d clients%s", self.traffic.rounds, message_type,
                      len(names), "" if self.counted and counted else " (not counted)")
        out = {n: replies[n] for n in names}
        if own is not None:
            out["server"] = own
        return aggregate(message_type, out, masked=names if self.secure else ())

    def _agree_keys(self):
        """The secure sum's key agreement: one round, each client's public key up."""
        seq = self.seq + 1
        replies = self._exchange(seq, M.SECURE_KEYS, {n: {} for n in self.clients})
        for n in self.clients:
            if isinstance(replies[n], SolveStop):
                raise replies[n]
        self.seq = seq
        self.secure.take_keys(replies)
        if self.counted:
            self.traffic.rounds += 1
            self.traffic.bytes_up += sum(wire_bytes(replies[n]) for n in self.clients)

    # -- what a backend implements --------------------------------------------------
    def _exchange(self, seq, message_type, payloads):
        """Deliver ``payloads[name]`` to each client; return ``{name: reply dict or
        SolveStop}``.  Must not raise for a client's fault."""
        raise NotImplementedError

    def snapshot(self):
        """``{name: runtime snapshot}`` of the parties whose state this backend holds
        (all of them in-process; only the server's own elsewhere), and a secure sum's
        public keys."""
        out = {} if self.own is None else {"server": self.own.snapshot()}
        if self.secure and self.secure.peers is not None:
            out[SECURE_KEY] = self.secure.snapshot()
        return out

    def multipliers(self, record="kkt", seq=None):
        """``{name: Multipliers}`` of the parties this backend runs, each one's record of
        its last KKT share of the kind ``record`` (:data:`constrfl.parties.al.RECORDS`)
        sent with message ``seq`` or before.  Not a message: a site's multipliers stay
        at the site (it can report them to its user); elsewhere only the server's own
        party is here, in-process every party."""
        return {} if self.own is None else {"server": self.own.multipliers(record, seq)}

    def close(self):
        """Release the backend's resources (nothing for the in-process one)."""
