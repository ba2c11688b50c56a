"""The boundary between the algorithms and the parties (see :mod:`.base`).

* :mod:`.messages`: message types, payload rules, byte counting;
* :mod:`.handlers`: a party's side, pure handlers ``(message, state, site) -> (reply, state)``;
* :mod:`.runtime`: one party's runtime (state, idempotent re-delivery, errors as values);
* :mod:`.base`: :class:`Federation`, what the solvers call;
* :mod:`.inprocess`: the default backend, every party in this process.
"""
from .base import Federation, Traffic
from ..parties import Site
from .inprocess import InProcessFederation
from .messages import MessageType
from .runtime import PartyRuntime

__all__ = ["Federation", "Traffic", "InProcessFederation", "MessageType", "PartyRuntime",
           "Site"]
