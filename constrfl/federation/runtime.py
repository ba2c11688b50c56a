"""One party's side of the protocol, as any backend runs it.

A :class:`PartyRuntime` holds a :class:`~constrfl.parties.PartyContext` (the party's functions,
hence its data, the public regularizer and what the handlers derive from them for the
solve), its state (a plain dict, see :mod:`constrfl.parties`) and the last (sequence
number, reply).  It answers a repeated sequence number from that cache (so a retried or
resent message is harmless), runs the handler(s) a message type names (:func:`dispatch`,
reading the party side's dispatch table), checks the reply against the protocol's
declarations (:func:`~constrfl.messages.check_reply`: no undeclared field, no disclosed
one unless the site allows it) and encodes its *sum* fields for the exact sum
(:func:`encode_reply`); every exception of the handlers becomes an error value for the
backend to send.
"""
from __future__ import annotations

import numpy as np

from .. import status as st
from ..errors import PartyError
from ..parties import (HANDLERS, init_state, keep_records,   # the party side's hooks
                       reported_multipliers, restore_state, settle)
from ..exactsum import encode
from ..messages import LAYOUT, SUM, SUMS, MessageType as M, check_reply, fields_of
from .secure import SecureClient

__all__ = ["PartyRuntime", "dispatch", "encode_reply"]


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


def encode_reply(message_type, reply):
    """The reply as it leaves the site: its *sum* fields, flattened in their order into
    one vector, encoded for the exact sum (:func:`constrfl.exactsum.encode`: uint64
    limbs) under ``SUMS``, with their names and sizes under ``LAYOUT``
    (``"name:size;..."``, no size for a scalar); disclosed fields as they are."""
    declared = fields_of(message_type).reply
    out, parts, layout = {}, [], []
    for k, v in reply.items():
        if declared[k] != SUM:
            out[k] = v
        elif isinstance(v, np.ndarray):
            parts.append(v.ravel())
            layout.append(f"{k}:{v.size}")
        else:
            parts.append(np.array([v], dtype=np.float64))
            layout.append(f"{k}:")
    if parts:
        out[SUMS] = encode(np.concatenate(parts))
        out[LAYOUT] = ";".join(layout)
    return out


class PartyRuntime:
    """``call(seq, message_type, payload) -> encoded reply dict | PartyError``.

    ``disclose``: whether this site lets its own values of the *disclosed* fields reach
    the server (``private=False``; default False: only sums leave it).  A client of a
    secure sum (:mod:`.secure`) answers the key agreement itself (``secure.keys``: its
    public key), keeps its private key, the peers' public keys and how many neighbours
    it masks with (``secure`` of its snapshot) and masks the encoded sums of every reply."""

    def __init__(self, ctx, snapshot=None, disclose=False):
        self.ctx, self.disclose = ctx, disclose
        self.secure = SecureClient()            # the secure sum's client side
        if snapshot is None:
            self.state, self.seq, self.reply = init_state(ctx.party), 0, None
        else:
            self.state, self.seq, self.reply = (restore_state(snapshot["state"]),
                                                snapshot["seq"], snapshot["reply"])
            self.secure = SecureClient(snapshot.get("secure"))

    def call(self, seq, message_type, payload):
        if seq == self.seq:
            return self.reply
        try:
            if message_type == M.SECURE_KEYS:
                self.seq, self.reply = seq, self.secure.agree()
                return self.reply
            masked = "masked" in payload       # (the handlers read only their fields)
            if masked:
                self.secure.announce(payload)
            before = settle(payload, self.state)   # a step taken ahead: taken or undone
            with np.errstate(all="ignore"):      # non-finite values are reported, not warned
                reply, state = dispatch(message_type, payload, before, self.ctx)
            check_reply(message_type, reply, self.disclose)
            reply = encode_reply(message_type, reply)
            if masked and SUMS in reply:
                reply[SUMS] = self.secure.mask(seq, reply[SUMS], payload.get("cohort"))
        except PartyError as err:
            return err.named(self.ctx.party.name)
        except Exception as exc:     # a fault of ours in a handler: reported, not raised
            err = PartyError(st.CLIENT_ERROR, f"handler {message_type!r}",
                             f"{type(exc).__name__}: {exc}")
            err.__cause__ = exc
            return err.named(self.ctx.party.name)
        self.state, self.seq, self.reply = keep_records(before, state, seq), seq, reply
        return reply

    def multipliers(self, record="kkt", seq=None):
        """The multipliers of the party's last KKT share of the kind ``record`` (sent
        with message ``seq`` or before: :func:`~constrfl.parties.reported_multipliers`):
        the site's own, never sent."""
        return reported_multipliers(self.ctx.party, self.state, record, seq)

    def snapshot(self):
        """The runtime's data (state, last sequence number and reply, and a secure sum's
        keys), for checkpoints."""
        return {"state": self.state, "seq": self.seq, "reply": self.reply,
                "secure": self.secure.snapshot()}
