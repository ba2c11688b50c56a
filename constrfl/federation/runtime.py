"""One party's side of the protocol, as any backend runs it.

A :class:`PartyRuntime` holds a :class:`~constrfl.parties.PartyContext` (the party's functions,
hence its data, the public regularizer and what the handlers derive from them for the
solve), its state (a plain dict, see :mod:`constrfl.parties`) and the last (sequence
number, reply).  It answers a repeated sequence number from that cache (so a retried or
resent message is harmless), runs the handler(s) a message type names (:func:`dispatch`,
reading the party side's dispatch table) and turns every exception of the handlers into
an error value for the backend to send.
"""
from __future__ import annotations

import numpy as np

from .. import status as st
from ..errors import PartyError
from ..parties import HANDLERS, init_state, restore_state    # the party side's hook
from ..messages import check_payload

__all__ = ["PartyRuntime", "dispatch"]


def _handlers(message_type):
    """The handlers of a (compound ``a+b``) message type, in order."""
    parts = message_type.split("+")
    unknown = [p for p in parts if p not in HANDLERS]
    if unknown:
        raise ValueError(f"no handler for message type {unknown[0]!r}")
    return tuple(HANDLERS[p] for p in parts)


def dispatch(message_type, msg, state, ctx):
    """Run the handler(s) of a (compound ``a+b``) message type; merge their replies.
    Each handler sees the context's view of the state it gets
    (:meth:`~constrfl.parties.PartyContext.view`: its scaled functions once the state holds a
    scaling)."""
    handlers = _handlers(message_type)
    if len(handlers) == 1:
        return handlers[0](msg, state, ctx.view(state))
    reply = {}
    for handler in handlers:
        r, state = handler(msg, state, ctx.view(state))
        if reply.keys() & r.keys():
            raise ValueError(f"compound message {message_type!r}: replies overlap in "
                             f"{sorted(reply.keys() & r.keys())}")
        reply.update(r)
    return reply, state


class PartyRuntime:
    """``call(seq, message_type, payload) -> reply dict | PartyError``."""

    def __init__(self, ctx, snapshot=None):
        self.ctx = ctx
        if snapshot is None:
            self.state, self.seq, self.reply = init_state(ctx.party), 0, None
        else:
            self.state, self.seq, self.reply = (restore_state(snapshot["state"]),
                                                snapshot["seq"], snapshot["reply"])

    def call(self, seq, message_type, payload):
        if seq == self.seq:
            return self.reply
        try:
            with np.errstate(all="ignore"):      # non-finite values are reported, not warned
                reply, state = dispatch(message_type, payload, self.state, self.ctx)
            check_payload(reply, f"reply to {message_type!r}")
        except PartyError as err:
            return err.named(self.ctx.party.name)
        except Exception as exc:     # a fault of ours in a handler: reported, not raised
            err = PartyError(st.CLIENT_ERROR, f"handler {message_type!r}",
                             f"{type(exc).__name__}: {exc}")
            err.__cause__ = exc
            return err.named(self.ctx.party.name)
        self.state, self.seq, self.reply = state, seq, reply
        return reply

    def snapshot(self):
        """The runtime's data (state, last sequence number and reply), for checkpoints."""
        return {"state": self.state, "seq": self.seq, "reply": self.reply}
