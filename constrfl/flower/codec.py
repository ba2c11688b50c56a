"""How constrfl's messages travel in Flower's records, and back, bit for bit.

* **Message types.**  A constrfl type ``"<phase>.<action>"`` (or a compound
  ``"a.b+c.d"``) becomes Flower's ``"<category>.<identifier>"``: the category is
  ``train`` for the messages that run local optimization, ``evaluate`` for the pure
  evaluations and ``query`` for the rest (and every compound), the identifier the
  constrfl type with ``.`` → ``_`` and ``+`` → ``__`` (``al.update+admm.start`` →
  ``query.al_update__admm_start``).
* **Payloads.**  A payload (a flat dict of float64 arrays and Python scalars,
  :func:`constrfl.messages.check_payload`) travels as one bytes value (``PAYLOAD``) of
  the message's ``ConfigRecord`` ``META``, beside the protocol's fields (sequence number,
  constrfl type, the solve's id, the site): a JSON header naming each entry (arrays by
  shape, Python bool, int, float and str scalars by type and value, floats by ``repr``;
  NumPy scalars refused) and the arrays' raw little-endian float64 bytes — bit-exact,
  NaN payloads, −0.0 and subnormals included.  Two parts travel as entries of their own
  in that record, where a Flower mod sees them without unpacking anything: a reply's
  encoded *sums* (``SUMS``, the uint64 limbs of :mod:`constrfl.exactsum`, ``(E, 4)``)
  as the raw little-endian bytes under ``SUMS_KEY`` (what :func:`~.secure.secure_sum_mod`
  masks: :func:`sums_of`, :func:`with_sums`), and the secure sum's transport fields (the
  ``masked`` mark, the peers' public keys, the number of neighbours, the round's cohort)
  under ``"secure.<name>"`` (what it reads: :func:`transport`).  One record: Flower sends
  every object of a message (the ``Message``, its ``RecordDict``, each record, each
  ``Array`` and each of its chunks) with a request of its own at every hop, so a message
  is 3 objects; the sums as an ``Array`` of an ``ArrayRecord`` made replies 6 objects
  and the warm path's rounds 0.12–0.25 s slower (measured: docs/flower.md, "Records").
* **Party errors** (a :class:`~constrfl.errors.PartyError`: the site's function
  failed) are an answer, not a transport failure: they travel as the reply's
  ``"error"`` ConfigRecord (status, slot, reason) and become the same PartyError at
  the server.  Flower's own ``Error`` replies (node unavailable, ClientApp crashed)
  are transport failures, handled by :class:`~.server.FlowerFederation`.
* **State** (:func:`pack_state`): a party runtime's snapshot as one byte string, kept
  in the ClientApp's ``context.state`` and in a site-local file, both exact.
"""
from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import numpy as np
from flwr.app import ConfigRecord, RecordDict

from ..errors import PartyError
from ..parties import HANDLERS
from ..messages import SUMS, TRANSPORT_FIELDS, MessageType as M

__all__ = ["flower_type", "known_types", "HELLO", "encode", "decode", "encode_error",
           "decode_error", "meta", "pack_state", "unpack_state", "state_to_records",
           "state_from_records", "SiteStore", "LOAD_CLIENT_APP_EXCEPTION", "SUMS_KEY",
           "SECURE_PREFIX", "transport", "sums_of", "with_sums",
           "CLIENT_APP_RAISED_EXCEPTION", "NODE_UNAVAILABLE"]

#: the constrfl types that run local optimization (Flower category ``train``) and the
#: pure evaluations (``evaluate``); everything else, and every compound, is ``query``
TRAIN = (M.ADMM_STEP, M.SGD_TRAIN, M.DUAL_TRAIN, M.ADAM_TRAIN)
EVALUATE = (M.NEWTON_EVAL, M.NEWTON_HVP, M.FEAS_EVAL, M.KKT_REPORT)

#: the discovery message: "which site are you?" (Flower type ``query.constrfl_hello``)
HELLO = "constrfl.hello"

#: Flower's error codes (``Error.code`` of an error reply; the values of its protocol, which
#: flwr keeps in a module of its own runtime): the ClientApp failed to load, raised, and
#: the node is not there
LOAD_CLIENT_APP_EXCEPTION, CLIENT_APP_RAISED_EXCEPTION, NODE_UNAVAILABLE = 1, 2, 5

#: the record of a message (its fields, and its payload's bytes under ``PAYLOAD``) and
#: of a party's error answer
META, ERROR, PAYLOAD = "constrfl", "error", "payload"
#: the record entry of a reply's encoded sums (raw uint64 bytes), and the prefix of the
#: secure sum's transport fields
SUMS_KEY, SECURE_PREFIX = "sums", "secure."


def flower_type(message_type):
    """Flower's ``"<category>.<identifier>"`` for a constrfl message type."""
    parts = message_type.split("+")
    category = ("train" if message_type in TRAIN else "evaluate" if message_type in EVALUATE
                else "query")
    return f"{category}." + "__".join(p.replace(".", "_") for p in parts)


def known_types():
    """The constrfl types a ClientApp answers: every handler, every ordered pair of
    distinct handlers (the compound rounds, e.g. ``al.update+admm.start``), the secure
    sum's key agreement and the discovery message."""
    singles = sorted(HANDLERS)
    return (singles + [f"{a}+{b}" for a in singles for b in singles if a != b]
            + [M.SECURE_KEYS, HELLO])


# -- payloads and states ------------------------------------------------------------------
#
# One byte format serves messages, ``context.state`` and the site's file: a JSON header
# (each entry: arrays by shape, scalars by type and value, floats by ``repr``, hence
# exactly) and the arrays' raw little-endian float64 bytes.  Exact, and cheap to
# (de)serialize every message.

_SCALAR = {"bool": bool, "int": int, "str": str, "float": float}
#: the arrays a payload, reply or state may hold: float64, and uint64 (a reply's sum
#: fields, encoded for the exact sum: :mod:`constrfl.exactsum`)
_DTYPES = {np.dtype(np.float64): "<f8", np.dtype(np.uint64): "<u8"}


def _pack(parts, what, header=None):
    """The bytes of ``parts`` (``{part: {key: float64 array or Python scalar}}``) after
    the JSON ``header``."""
    entries, chunks = [], []
    for part, values in parts.items():
        for k, v in values.items():
            if isinstance(v, np.ndarray) and v.dtype in _DTYPES:
                kind = _DTYPES[v.dtype]
                entries.append([part, k, "array" if kind == "<f8" else kind, list(v.shape)])
                chunks.append(np.ascontiguousarray(v, dtype=kind).tobytes())
            elif isinstance(v, (bool, int, float, str)) and not isinstance(v, np.generic):
                entries.append([part, k, type(v).__name__,
                                repr(v) if isinstance(v, float) else v])
            else:
                raise TypeError(f"{what}[{k!r}]: {type(v).__name__} is not plain data "
                                "(float64 or uint64 arrays and Python bool, int, float, "
                                "str only)")
    head = json.dumps({**(header or {}), "entries": entries}).encode()
    return b"".join([len(head).to_bytes(8, "little"), head, *chunks])


def _unpack(blob, at=0):
    """``(header, parts)`` from :func:`_pack`'s bytes at offset ``at`` (arrays
    writable)."""
    n = int.from_bytes(blob[at:at + 8], "little")
    header = json.loads(blob[at + 8:at + 8 + n])
    at += 8 + n
    parts = {}
    for part, k, kind, v in header.pop("entries"):
        if kind in ("array", "<u8"):
            count = int(np.prod(v))
            dtype = "<f8" if kind == "array" else kind
            value = np.frombuffer(blob, dtype, count, at).reshape(v).astype(dtype[1:])
            at += 8 * count
        else:
            value = _SCALAR[kind](v)
        parts.setdefault(part, {})[k] = value
    return header, parts


def encode(payload, fields):
    """The RecordDict of a payload plus the protocol ``fields`` (seq, type, ...): one
    ConfigRecord, the fields, the packed payload under ``PAYLOAD``, the encoded sums
    under ``SUMS_KEY`` and the secure sum's transport fields under ``"secure.<name>"``."""
    rest = {k: v for k, v in payload.items() if k != SUMS and k not in TRANSPORT_FIELDS}
    record = {**fields, PAYLOAD: _pack({"p": rest}, "payload")}
    if SUMS in payload:
        record[SUMS_KEY] = np.ascontiguousarray(payload[SUMS], dtype="<u8").tobytes()
    for k in sorted(TRANSPORT_FIELDS & payload.keys()):
        v = payload[k]
        record[SECURE_PREFIX + k] = (np.ascontiguousarray(v, dtype="<f8").tobytes()
                                     if k == "peers" else [int(i) for i in v]
                                     if k == "cohort" else int(v))
    return RecordDict({META: ConfigRecord(record)})


def transport(content):
    """The secure sum's transport fields of a content (``{}`` without them), as
    :class:`~constrfl.federation.secure.SecureClient` takes them."""
    rec = content.get(META)
    out = {} if rec is None else {k[len(SECURE_PREFIX):]: v for k, v in rec.items()
                                  if k.startswith(SECURE_PREFIX)}
    if "peers" in out:
        out["peers"] = np.frombuffer(out["peers"], dtype="<f8").astype(np.float64)
    return out


def sums_of(content):
    """A reply's encoded sums (a writable ``(E, 4)`` uint64 array), or None."""
    rec = content.get(META)
    if rec is None or SUMS_KEY not in rec:
        return None
    return np.frombuffer(rec[SUMS_KEY], dtype="<u8").reshape(-1, 4).astype(np.uint64)


def with_sums(content, sums):
    """Replace a reply's encoded sums by ``sums`` (the same layout), in place."""
    content[META][SUMS_KEY] = np.ascontiguousarray(sums, dtype="<u8").tobytes()


def meta(content):
    """The protocol fields of a content RecordDict (empty if it has none)."""
    rec = content.get(META)
    return {} if rec is None else {k: v for k, v in rec.items()
                                   if k not in (PAYLOAD, SUMS_KEY)
                                   and not k.startswith(SECURE_PREFIX)}


def decode(content):
    """The payload dict (or the :class:`PartyError` of an error answer) of a content,
    with its encoded sums; the secure sum's transport fields are :func:`transport`'s
    (the mod's, not the party's)."""
    if ERROR in content:
        return decode_error(content)
    payload = _unpack(content[META][PAYLOAD])[1].get("p", {})
    sums = sums_of(content)
    if sums is not None:
        payload[SUMS] = sums
    return payload


def encode_error(err, fields):
    """The content of a party's error answer."""
    return RecordDict({META: ConfigRecord(dict(fields)),
                       ERROR: ConfigRecord({"status": err.status, "slot": str(err.slot),
                                            "reason": str(err.reason)})})


def decode_error(content):
    e, m = content[ERROR], meta(content)
    return PartyError(e["status"], e["slot"], e["reason"]).named(m.get("site"))


# -- a party's state --------------------------------------------------------------------------
#
# One byte string serves both stores (``context.state``, as a bytes value of a
# ConfigRecord, and the site's file): :func:`_pack` of the state and the cached reply
# after a magic line, the header holding the protocol fields and the sequence number.

_MAGIC = b"constrfl-state-1\n"


def pack_state(snapshot, fields):
    """The bytes of a :class:`~constrfl.federation.PartyRuntime` snapshot (its state,
    last sequence number and reply, and a secure sum's keys) plus ``fields`` (e.g. the
    solve's id)."""
    return _MAGIC + _pack({"state": snapshot["state"] or {}, "reply": snapshot["reply"] or {},
                           "secure": snapshot.get("secure") or {}},
                          "state", {"fields": fields, "seq": snapshot["seq"],
                                    "has_reply": snapshot["reply"] is not None})


def unpack_state(blob):
    """``(snapshot, fields)`` from :func:`pack_state`'s bytes."""
    blob = bytes(blob)
    if not blob.startswith(_MAGIC):
        raise ValueError("not a constrfl site state")
    header, parts = _unpack(blob, len(_MAGIC))
    snapshot = {"state": parts.get("state", {}), "seq": header["seq"],
                "reply": parts.get("reply", {}) if header["has_reply"] else None,
                "secure": parts.get("secure", {})}
    return snapshot, header["fields"]


def state_to_records(blob):
    """``context.state``'s record of a packed state."""
    return ConfigRecord({"snapshot": blob})


def state_from_records(state):
    """``(snapshot, fields)`` from ``context.state`` (``(None, {})`` when it has none)."""
    rec = state.get(META)
    return (None, {}) if rec is None else unpack_state(rec["snapshot"])


class SiteStore:
    """A site's state file pair ``<path>.0`` / ``<path>.1``, written alternately in
    place (a rename costs a millisecond or more on some file systems; a write in place
    tens of microseconds).  Each slot holds a generation number, the length and a CRC
    of the packed state; :meth:`load` returns the valid slot of the highest generation,
    so a crash in the middle of a write leaves the previous state readable.  No fsync:
    this survives the restart of a process or SuperNode, not a power cut."""

    _HEAD = 20            # generation (8), length (8), CRC-32 (4)

    def __init__(self, path):
        self.path = Path(path)
        self.slots = [self.path.with_name(self.path.name + f".{i}") for i in (0, 1)]
        self.gen = None   # generation of the newest valid slot (None: not read yet)

    def _read(self, slot):
        try:
            data = slot.read_bytes()
        except FileNotFoundError:
            return -1, None
        if len(data) < self._HEAD:
            return -1, None
        gen, n = (int.from_bytes(data[i:i + 8], "little") for i in (0, 8))
        blob = data[self._HEAD:self._HEAD + n]
        if len(blob) != n or zlib.crc32(blob) != int.from_bytes(data[16:20], "little"):
            return -1, None                       # torn or foreign: ignored
        return gen, blob

    def load(self):
        """``(snapshot, fields)`` of the newest state (``(None, {})`` if none)."""
        gen, blob = max((self._read(s) for s in self.slots), key=lambda r: r[0])
        self.gen = gen
        return (None, {}) if blob is None else unpack_state(blob)

    def save(self, blob):
        """Write ``blob`` over the older slot."""
        if self.gen is None:
            self.gen = max(self._read(s)[0] for s in self.slots)
        self.gen += 1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = b"".join([self.gen.to_bytes(8, "little"), len(blob).to_bytes(8, "little"),
                         zlib.crc32(blob).to_bytes(4, "little"), blob])
        fd = os.open(self.slots[self.gen % 2], os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
