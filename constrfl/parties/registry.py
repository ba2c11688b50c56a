"""The dispatch table: message type → the party's handler of it.

The modules of :mod:`constrfl.parties` register their handlers here (:func:`handles`)
when the package is imported; the transport (:func:`constrfl.federation.runtime.dispatch`,
the Flower ClientApp's list of answered types) reads :data:`HANDLERS` through
``constrfl.parties``, its one hook into the party side.
"""
from __future__ import annotations

__all__ = ["HANDLERS", "handles"]

#: ``{message type: handler (message, state, ctx) -> (reply, state)}``
HANDLERS = {}


def handles(message_type):
    """Register a handler for ``message_type`` (one handler per type)."""
    def register(fn):
        if message_type in HANDLERS:
            raise ValueError(f"two handlers for message type {message_type!r}")
        HANDLERS[message_type] = fn
        return fn
    return register
