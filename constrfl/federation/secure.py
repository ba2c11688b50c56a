"""Secure summation of the sum fields (Bonawitz et al., "Practical Secure Aggregation for
Privacy-Preserving Machine Learning", CCS 2017; docs/flower.md, "What the server sees"):
the server adds the clients' uploads and learns only their sum.

* **Key agreement**, once a solve, through the server (one round, ``secure.keys``): each
  client draws an X25519 key pair and sends its public key (a *public* field: it says
  nothing of the client's data); the next message brings every client's public key
  (``peers``, in the federation's client order), and each client derives, with every
  other client j, the shared key kᵢⱼ = HKDF-SHA256(X25519(skᵢ, pkⱼ)) (:func:`pair_keys`).
* **Masks**: a client adds to its encoded sums (:mod:`constrfl.exactsum`, the ring
  Z/2²⁵⁶) Σⱼ ±PRGᵢⱼ(seq), + for j above it in the client order, − below, over the clients
  j of the message's cohort (all of them but for a baseline's sampled rounds), the PRG
  AES-256-CTR under kᵢⱼ with the message's sequence number as the high half of its
  counter (:class:`Masks`): uniform, the same bits for a resent message, and cancelling
  exactly in the sum over the cohort — which the server can therefore read, and nothing
  else.  A sum that misses one client's upload is noise; the server never forms one
  (a round with a client missing ends the solve, ``client_failure``, as without masks).
* What a dropout reveals: nothing — its round is not summed; the solve ends resumable
  when the client is gone for good (the masks need every client of the cohort; this
  module has no secret-shared recovery of a lost client's masks).

Two clients could each subtract its own upload from the sum and read the other's: a
secure sum needs at least :data:`~constrfl.messages.SECURE_MIN_CLIENTS` = 3 (a round
to fewer is refused).  ``cryptography`` (as Flower's) provides
X25519, HKDF and AES; nothing here is hand-written cryptography.
"""
from __future__ import annotations

import numpy as np

from ..exactsum import LIMBS, RING_BYTES, add_signed_into

__all__ = ["SiteSecret", "pair_keys", "Masks", "KEY_BYTES", "keys_as_floats",
           "keys_from_floats"]

KEY_BYTES = 32
_INFO = b"constrfl secure sum v1"


def _crypto():
    try:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric.x25519 import (X25519PrivateKey,
                                                                      X25519PublicKey)
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError("secure aggregation needs the package cryptography: "
                                  "pip install cryptography (or constrfl's flower extra)",
                                  name="cryptography") from err
    return hashes, X25519PrivateKey, X25519PublicKey, Cipher, algorithms, modes, HKDF


def keys_as_floats(keys):
    """32-byte keys as float64 entries (4 each, their raw bits): what a payload holds."""
    return np.frombuffer(b"".join(keys), dtype=np.float64).copy()


def keys_from_floats(array):
    """The 32-byte keys of :func:`keys_as_floats`."""
    raw = np.ascontiguousarray(array, dtype=np.float64).tobytes()
    return [raw[i:i + KEY_BYTES] for i in range(0, len(raw), KEY_BYTES)]


class SiteSecret:
    """A client's X25519 key pair for one solve (its private half stays at the client)."""

    def __init__(self, private=None):
        _, X25519PrivateKey, *_ = _crypto()
        self.key = (X25519PrivateKey.generate() if private is None
                    else X25519PrivateKey.from_private_bytes(private))

    def private_bytes(self):
        from cryptography.hazmat.primitives import serialization as s
        return self.key.private_bytes(s.Encoding.Raw, s.PrivateFormat.Raw, s.NoEncryption())

    def public_bytes(self):
        from cryptography.hazmat.primitives import serialization as s
        return self.key.public_key().public_bytes(s.Encoding.Raw, s.PublicFormat.Raw)


def pair_keys(private, peers):
    """``(index, keys)``: this client's index in ``peers`` (the clients' public keys, in
    the federation's order: its own among them) and kᵢⱼ for each j (None for itself)."""
    hashes, X25519PrivateKey, X25519PublicKey, _, _, _, HKDF = _crypto()
    me = SiteSecret(private)
    own = me.public_bytes()
    if peers.count(own) != 1:
        raise ValueError("secure sum: this client's public key is not among the peers "
                         "(once): the key agreement of another solve?")
    index = peers.index(own)
    keys = []
    for j, public in enumerate(peers):
        if j == index:
            keys.append(None)
            continue
        shared = me.key.exchange(X25519PublicKey.from_public_bytes(public))
        keys.append(HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None,
                         info=_INFO).derive(shared))
    return index, keys


def _counter_blocks(seq, entries):
    """AES-CTR's counter blocks for message ``seq``: the 128-bit big-endian integers
    seq·2⁶⁴ + b, b = 0, 1, ... (two 16-byte blocks a ring element)."""
    blocks = np.empty((entries * RING_BYTES // 16, 2), dtype=">u8")
    blocks[:, 0] = seq
    blocks[:, 1] = np.arange(blocks.shape[0])
    return blocks.tobytes()


class Masks:
    """Client ``index``'s masks from its pair keys (:func:`pair_keys`), one AES-256 context
    per pair kept for the solve.  PRGᵢⱼ(seq) is AES-256-CTR under kᵢⱼ with the counter
    starting at seq·2⁶⁴ (different messages never share a block): the key stream
    E_kᵢⱼ(counter block) of :func:`_counter_blocks`, the library's AES applied to them
    (``tests/test_secure.py`` checks it is the library's CTR stream, bit for bit)."""

    def __init__(self, index, keys):
        _, _, _, Cipher, algorithms, modes, _ = _crypto()
        self.index = index
        self.blocks = [None if k is None else Cipher(algorithms.AES(k), modes.ECB()).encryptor()
                       for k in keys]

    def mask(self, seq, entries, cohort=None):
        """Σⱼ ±PRGᵢⱼ(seq) over the other clients j of ``cohort`` (indices; None: all), +
        for j > i, − for j < i, as ``entries`` ring elements: the masks of a message
        cancel exactly in the sum over its cohort."""
        counters = _counter_blocks(seq, entries)
        pairs = [j for j, block in enumerate(self.blocks)
                 if block is not None and (cohort is None or j in cohort)]
        size = len(counters)
        raw = np.empty((len(pairs), size + 16), dtype=np.uint8)   # (update_into's slack)
        for row, j in zip(raw, pairs):
            self.blocks[j].update_into(counters, row)
        streams = raw[:, :size].view(np.uint64).reshape(len(pairs), entries, LIMBS)
        out = np.zeros((entries, LIMBS), dtype=np.uint64)
        add_signed_into(out, streams, np.array(pairs) > self.index)
        return out
