"""The boundary between the algorithms and the parties: the transport (see :mod:`.base`).

(The messages themselves, their types, payload rules and byte counting, are the
protocol both sides speak: :mod:`constrfl.messages`.)

* :mod:`.runtime`: one party's runtime (state, idempotent re-delivery, errors as values)
  and the dispatch of a message type to the party side's handlers
  (:mod:`constrfl.parties`, the pure handlers ``(message, state, ctx) -> (reply, state)``);
* :mod:`.base`: :class:`Federation`, what the solvers call;
* :mod:`.inprocess`: the default backend, every party in this process.
"""
from .base import Federation, Sums, Traffic
from .inprocess import InProcessFederation
from .runtime import PartyRuntime

__all__ = ["Federation", "Sums", "Traffic", "InProcessFederation", "PartyRuntime"]
