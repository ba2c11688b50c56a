"""Secure aggregation on Flower, in the shape of Flower's own ``secaggplus_mod``: a
ClientApp mod that answers the secure sum's key agreement itself and masks the encoded
sums of every reply on their way out; its server-side counterpart is
:class:`~constrfl.flower.server.FlowerFederation` with ``secure`` (the key agreement round,
the peers' announcement and each round's cohort in the messages' ``secure.*`` fields, the
refusal of incomplete sums), on by default with 3 sites or more.

The mod (:func:`secure_sum_mod`) sits outermost in every constrfl ClientApp
(:func:`~constrfl.flower.client_app`), so the site's own code and the user's mods see the
plain reply; the masking is :class:`~constrfl.federation.secure.SecureClient`'s, the same
as in one process (``cf.solve(..., secure=True)``).  A message of a secure solve carries
``secure.*`` fields in its record (:mod:`.codec`: the ``masked`` mark, the peers' public
keys and the number of neighbours once, the round's cohort where it is not every site);
the mod

* answers ``query.secure_keys`` (the key agreement): a fresh X25519 key pair for the
  solve, its public half up (a resent agreement gets the same key);
* takes the peers' keys from the record, runs the ClientApp's handler, and adds its
  masks to the reply's encoded sums (the record's ``"sums"`` bytes): a resent message,
  answered from the site's cache, gets the same masked reply;
* keeps its keys in ``context.state`` and in a site-local file beside the site's state
  (``<site>.secure.state.0|1``), written before a reply leaves: a restarted SuperNode
  goes on masking with them; a site whose keys are gone answers ``client_error``
  instead of an unmasked upload.
"""
from __future__ import annotations

from flwr.app import Message

from .. import status as st
from ..errors import PartyError
from ..federation.secure import SecureClient, keys_as_floats
from ..messages import MessageType as M
from . import codec

__all__ = ["secure_sum_mod", "STATE_RECORD"]

#: the record of ``context.state`` holding the mod's keys
STATE_RECORD = "constrfl.secure"


def secure_sum_mod(site_of, store_of):
    """The Flower mod ``(msg, context, call_next) -> Message`` of a site's secure sum.
    ``site_of(context)``: the name of the site the node serves; ``store_of(context,
    name)``: its :class:`~.codec.SiteStore` of that name (the mod's is
    ``<site>.secure``)."""
    kept = {}                      # (site, solve) -> [SecureClient, agreement's seq]
    agreement = codec.flower_type(M.SECURE_KEYS)

    def load(context, site, solve):
        if (site, solve) not in kept:
            snapshot, fields = ((None, {}) if STATE_RECORD not in context.state else
                                codec.unpack_state(context.state[STATE_RECORD]["snapshot"]))
            if fields.get("solve") != solve:
                snapshot, fields = store_of(context, site + ".secure").load()
            if fields.get("solve") != solve:
                snapshot = None
            kept[(site, solve)] = ([SecureClient(), None] if snapshot is None else
                                   [SecureClient(snapshot["secure"]), snapshot["seq"]])
        return kept[(site, solve)]

    def save(context, site, solve, entry):
        blob = codec.pack_state({"state": {}, "reply": None, "secure": entry[0].snapshot(),
                                 "seq": entry[1] or 0}, {"solve": solve})
        store_of(context, site + ".secure").save(blob)
        context.state[STATE_RECORD] = codec.state_to_records(blob)

    def mod(msg, context, call_next):
        carried = codec.transport(msg.content)
        kind = msg.metadata.message_type
        if kind != agreement and not carried:
            return call_next(msg, context)
        fields = codec.meta(msg.content)
        site, solve, seq = site_of(context), fields["solve"], fields["seq"]
        entry = load(context, site, solve)
        out = {"seq": seq, "site": site, "solve": solve}
        if kind == agreement:
            client = entry[0]
            if entry[1] == seq and "private" in client.saved:     # a resent agreement
                reply = {"public_key": keys_as_floats([client.secret().public_bytes()])}
            else:
                reply, entry[1] = client.agree(), seq
                save(context, site, solve, entry)
            return Message(codec.encode(reply, out), reply_to=msg)
        client = entry[0]
        if "peers" in carried:
            client.announce(carried)
            save(context, site, solve, entry)
        reply = call_next(msg, context)
        if reply.has_error() or codec.ERROR in reply.content:
            return reply
        sums = codec.sums_of(reply.content)
        if sums is None:
            return reply
        try:
            masked = client.mask(seq, sums, carried.get("cohort"))
        except ValueError as exc:          # keys gone: never the plain sums
            err = PartyError(st.CLIENT_ERROR, "secure sum", str(exc)).named(site)
            return Message(codec.encode_error(err, out), reply_to=msg)
        codec.with_sums(reply.content, masked)
        return reply

    return mod
