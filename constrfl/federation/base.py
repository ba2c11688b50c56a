"""The boundary between the algorithms and the parties: :class:`Federation`.

The solvers reach the clients only through ``broadcast(message_type, payload)``, which
returns the replies in the fixed order of ``federation.clients`` (never arrival order),
counts the round and its bytes, and turns a client's error reply into the exception
that ends the solve with the matching status (:mod:`constrfl.errors`).  Backends
implement ``_exchange``: deliver one payload per client and collect what comes back —
a reply dict, or the :class:`~constrfl.errors.SolveStop` describing why there is none;
a backend never raises for a client's fault.

The server's own party (f₀, c₀, h₀) answers the same messages through ``own``, a
:class:`~.runtime.PartyRuntime` in the server's process (``include_server=True``; no
traffic).  Every message carries a sequence number; a party answers a number it has
already answered from its cache, so a round interrupted half-way is simply sent again.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from ..control import SolveControl
from ..errors import SolveStop
from ..progress import log
from ..messages import FLOAT, check_payload, floats

__all__ = ["Federation", "Traffic"]


@dataclass
class Traffic:
    """Communication counters: rounds and bytes (8 per float)."""

    rounds: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


class Federation:
    """Base class: ``clients`` (names, in the fixed aggregation order), ``own`` (the
    server party's runtime or None), ``traffic``, and the per-round checks."""

    def __init__(self, clients, own=None, counted=True, control=None):
        self.clients = list(clients)
        self.own = own
        self.counted = counted
        self.traffic = Traffic()
        self.seq = 0              # sequence number of the last completed message
        #: the solve's deadline and Ctrl-C (:class:`~constrfl.control.SolveControl`)
        self.control = SolveControl() if control is None else control

    # -- what the solvers call ------------------------------------------------------
    def broadcast(self, message_type, payload, to=None, per_client=None,
                  include_server=False, counted=True):
        """Send ``payload`` (merged with ``per_client[name]`` where given) to the clients
        ``to`` (default: all) and return ``{name: reply}`` in client order, then
        ``"server": reply`` with ``include_server`` when the server has functions.
        ``counted=False``: an observer's message, outside the method's traffic."""
        self.control.check()
        check_payload(payload)
        names = self.clients if to is None else [c for c in self.clients if c in set(to)]
        payloads = {n: payload if not per_client or n not in per_client
                    else {**payload, **per_client[n]} for n in names}
        seq = self.seq + 1
        replies = self._exchange(seq, message_type, payloads)
        own = (self.own.call(seq, message_type, {**payload, **(per_client or {}).get("server", {})})
               if include_server and self.own is not None else None)
        for r in [replies[n] for n in names] + [own]:
            if isinstance(r, SolveStop):
                raise r
        self.seq = seq
        if self.counted and counted:
            t = self.traffic
            t.rounds += 1
            if per_client:
                t.bytes_down += FLOAT * sum(floats(payloads[n]) for n in names)
            else:
                t.bytes_down += FLOAT * len(names) * floats(payload)
            t.bytes_up += FLOAT * sum(floats(replies[n]) for n in names)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("round %d: %s to %d clients%s", self.traffic.rounds, message_type,
                      len(names), "" if self.counted and counted else " (not counted)")
        out = {n: replies[n] for n in names}
        if own is not None:
            out["server"] = own
        return out

    # -- what a backend implements --------------------------------------------------
    def _exchange(self, seq, message_type, payloads):
        """Deliver ``payloads[name]`` to each client; return ``{name: reply dict or
        SolveStop}``.  Must not raise for a client's fault."""
        raise NotImplementedError

    def snapshot(self):
        """``{name: runtime snapshot}`` of the parties whose state this backend holds
        (all of them in-process; only the server's own elsewhere)."""
        return {} if self.own is None else {"server": self.own.snapshot()}

    def close(self):
        """Release the backend's resources (nothing for the in-process one)."""
