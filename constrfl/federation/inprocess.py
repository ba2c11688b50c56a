"""The default :class:`~.base.Federation`: every party's handlers run in this process.

This is a simulation of the federation (one process, no network), with the same
messages, the same counted traffic and bit-identical results as the Flower backend.
"""
from __future__ import annotations

from .. import status as st
from ..errors import SolveStop
from ..parties import PartyContext
from .base import Federation
from .runtime import PartyRuntime

__all__ = ["InProcessFederation"]


class InProcessFederation(Federation):
    """Runs the clients of ``problem`` (and the server's own party) in this process.

    ``snapshots`` (from :meth:`snapshot`) restores the parties of a checkpoint;
    ``counted=False`` keeps no traffic (cProx-AL: the pooled problem, no federation);
    ``control``: the solve's :class:`~constrfl.control.SolveControl`; ``disclose``: the
    parties let their disclosed fields through (``private=False``); ``secure``: the
    clients mask their uploads (:mod:`.secure`), as on Flower: for tests and to measure
    what it costs.
    """

    def __init__(self, problem, snapshots=None, counted=True, control=None, disclose=False,
                 secure=False):
        snapshots = snapshots or {}
        P = problem.regularizer
        self.runtimes = {c.name: PartyRuntime(PartyContext(c, P), snapshots.get(c.name),
                                              disclose)
                         for c in problem.clients}
        own = (None if problem.server.is_empty
               else PartyRuntime(PartyContext(problem.server, P), snapshots.get("server"),
                                 disclose))
        super().__init__(list(self.runtimes), own, counted, control, secure, snapshots)

    def _exchange(self, seq, message_type, payloads):
        """The clients in turn; once ``max_time`` has run out, the rest of the round is
        not run (those who answered keep their reply cached for a resume)."""
        out = {}
        for n, p in payloads.items():
            out[n] = (SolveStop("max_time reached (during a round)", st.TIME_LIMIT)
                      if out and self.control.past_deadline()
                      else self.runtimes[n].call(seq, message_type, p))
        return out

    def snapshot(self):
        out = {n: r.snapshot() for n, r in self.runtimes.items()}
        out.update(super().snapshot())
        return out

    def multipliers(self, record="kkt", seq=None):
        out = {n: r.multipliers(record, seq) for n, r in self.runtimes.items()}
        out.update(super().multipliers(record, seq))
        return out
