"""One party's side of the protocol, as any backend runs it.

A :class:`PartyRuntime` holds a :class:`~.handlers.Site` (the party's functions, hence
its data, and the public regularizer), its state (a
plain dict, see :mod:`.handlers`) and the last (sequence number, reply).  It answers a
repeated sequence number from that cache (so a retried or resent message is harmless)
and turns every exception of the handlers into an error value for the backend to send.
"""
from __future__ import annotations

import numpy as np

from .. import status as st
from ..errors import PartyError
from ..parties import dispatch, init_state
from .messages import check_payload

__all__ = ["PartyRuntime"]


class PartyRuntime:
    """``call(seq, message_type, payload) -> reply dict | PartyError``."""

    def __init__(self, site, snapshot=None):
        self.site = site
        if snapshot is None:
            self.state, self.seq, self.reply = init_state(site.party), 0, None
        else:
            self.state, self.seq, self.reply = (snapshot["state"], snapshot["seq"],
                                                snapshot["reply"])

    def call(self, seq, message_type, payload):
        if seq == self.seq:
            return self.reply
        try:
            with np.errstate(all="ignore"):      # non-finite values are reported, not warned
                reply, state = dispatch(message_type, payload, self.state, self.site)
            check_payload(reply, f"reply to {message_type!r}")
        except PartyError as err:
            return err.named(self.site.party.name)
        except Exception as exc:     # a fault of ours in a handler: reported, not raised
            err = PartyError(st.CLIENT_ERROR, f"handler {message_type!r}",
                             f"{type(exc).__name__}: {exc}")
            err.__cause__ = exc
            return err.named(self.site.party.name)
        self.state, self.seq, self.reply = state, seq, reply
        return reply

    def snapshot(self):
        """The runtime's data (state, last sequence number and reply), for checkpoints."""
        return {"state": self.state, "seq": self.seq, "reply": self.reply}
