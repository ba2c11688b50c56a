"""Secure summation of the sum fields (Bonawitz et al., "Practical Secure Aggregation for
Privacy-Preserving Machine Learning", CCS 2017; docs/flower.md, "What the server sees"):
the server adds the clients' uploads and learns only their sum.

* **Key agreement**, once a solve, through the server (one round, ``secure.keys``): each
  client draws an X25519 key pair and sends its public key (a *public* field: it says
  nothing of the client's data); the next message brings every client's public key
  (``peers``, in the federation's client order) and the number of neighbours k, and
  each client derives, with each neighbour j (:func:`ring_neighbours`: the ⌈k/2⌉ clients
  on each side of it on the ring of the message's cohort, Bell et al., CCS 2020), the
  shared key kᵢⱼ = HKDF-SHA256(X25519(skᵢ, pkⱼ)) (:meth:`Masks.pair_key`).
* **Masks**: a client adds to its encoded sums (:mod:`constrfl.exactsum`, the ring
  Z/2²⁵⁶) Σⱼ ±PRGᵢⱼ(seq) over its neighbours j in the message's cohort (all clients but
  for a baseline's sampled rounds), + for j above it in the client order, − below, the
  PRG AES-128-CTR under kᵢⱼ with the message's sequence number as the high half of its
  counter (:class:`Masks`): uniform, the same bits for a resent message, and cancelling
  exactly in the sum over the cohort — which the server can therefore read, and nothing
  else (nor can it with fewer than k clients' help: the ring is k-connected).  A sum that misses one client's upload is noise; the server never forms one
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

import threading

import numba
import numpy as np

from ..exactsum import LIMBS, RING_BYTES, add_into, add_signed_into
from ..messages import SECURE_MIN_NEIGHBOURS

__all__ = ["SiteSecret", "ring_neighbours", "Masks", "SecureClient", "SecureServer", "KEY_BYTES",
           "keys_as_floats", "keys_from_floats"]

KEY_BYTES = 32                  # an X25519 key
PAIR_KEY_BYTES = 16             # a pair key: AES-128
#: a client of every round computes the masks of up to this many messages ahead, in at
#: most this many bytes, when at least AHEAD_LEAST fit (:meth:`Masks.mask_into`)
AHEAD_MESSAGES, AHEAD_BYTES, AHEAD_LEAST = 64, 1 << 16, 8
_INFO = b"constrfl secure sum v1"
#: :meth:`Masks.streams`' working memory, shared by the clients of a thread (in one
#: process they take turns: one buffer stays in cache where one each would not)
_WORKING = threading.local()


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


@numba.njit(cache=True)
def _bswap(x):
    """The bytes of a uint64 reversed."""
    out = np.uint64(0)
    for _ in range(8):
        out = (out << np.uint64(8)) | (x & np.uint64(0xFF))
        x >>= np.uint64(8)
    return out


@numba.njit(cache=True)
def _counters(out, seq, first):
    """out[s, b] ← the AES counter (seq + s)·2⁶⁴ + first + b as 16 big-endian bytes (two
    words)."""
    for s in range(out.shape[0]):
        out[s, :, 0] = _bswap(np.uint64(seq + s))
    for b in range(out.shape[1]):
        out[:, b, 1] = _bswap(np.uint64(first + b))


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


def ring_neighbours(position, size, neighbours):
    """The positions, in a cohort of ``size`` clients, of those the client at
    ``position`` shares masks with: the ``⌈neighbours/2⌉`` on each side of it on the ring
    of the cohort (the circulant Harary graph, Bell et al., CCS 2020, §3; symmetric), or
    every other client when that is as many.  Its vertex connectivity is the degree: the
    server together with fewer clients than that still reads only the sum of the others'
    uploads."""
    half = -(-neighbours // 2)
    if 2 * half >= size - 1:
        return [p for p in range(size) if p != position]
    return sorted({(position + s) % size for s in range(-half, half + 1) if s})


class Masks:
    """A client's masks for one solve, from its key pair (a :class:`SiteSecret`) and
    every client's public key (``peers``, in the federation's order: its own among
    them).  The pair key with
    client j is kᵢⱼ = HKDF-SHA256(X25519(skᵢ, pkⱼ)), derived when j is first a
    neighbour (:func:`ring_neighbours`) and kept, with its AES-128 context, for the
    solve.  PRGᵢⱼ(seq) is AES-128-CTR under kᵢⱼ with the counter starting at seq·2⁶⁴
    (different messages never share a block): the key stream of :meth:`streams`
    (``tests/test_secure.py`` checks it is the library's CTR stream, bit for bit)."""

    def __init__(self, secret, peers, neighbours):
        self.secret, self.crypto = secret, _crypto()
        own = self.secret.public_bytes()
        if peers.count(own) != 1:
            raise ValueError("secure sum: this client's public key is not among the peers "
                             "(once): the key agreement of another solve?")
        if not neighbours >= SECURE_MIN_NEIGHBOURS:
            raise ValueError(f"secure sum: asked to mask with {neighbours} neighbours (at "
                             f"least {SECURE_MIN_NEIGHBOURS}); it will not send its sums "
                             "with fewer")
        self.index, self.peers, self.neighbours = peers.index(own), peers, neighbours
        self.blocks = {}            # j -> the AES context under kᵢⱼ
        self.everyone = None        # the pairs of a round to every client (see pairs)
        self.ahead = 0, None        # the masks computed ahead: first message, the masks

    def pair_key(self, j):
        """kᵢⱼ: HKDF-SHA256 of the X25519 secret shared with client j."""
        hashes, _, X25519PublicKey, _, _, _, HKDF = self.crypto
        shared = self.secret.key.exchange(X25519PublicKey.from_public_bytes(self.peers[j]))
        return HKDF(algorithm=hashes.SHA256(), length=PAIR_KEY_BYTES, salt=None,
                    info=_INFO).derive(shared)

    def pairs(self, cohort):
        """This client's neighbours in ``cohort`` (a tuple of client indices in the
        federation's order; None: all clients): their AES contexts and whether each
        mask is added (j > i) or subtracted."""
        if cohort is None and self.everyone is not None:
            return self.everyone
        _, _, _, Cipher, algorithms, modes, _ = self.crypto
        members = list(range(len(self.peers)) if cohort is None else cohort)
        js = [members[p] for p in ring_neighbours(members.index(self.index), len(members),
                                                  self.neighbours)]
        for j in js:
            if j not in self.blocks:
                self.blocks[j] = Cipher(algorithms.AES(self.pair_key(j)),
                                        modes.ECB()).encryptor()
        pairs = [self.blocks[j] for j in js], np.array(js) > self.index
        if cohort is None:          # (kept; a baseline's sample is new each round)
            self.everyone = pairs
        return pairs

    def streams(self, seq, count, entries, cohort, into=None, start=0):
        """Σⱼ ±PRGᵢⱼ for the ``count`` messages from ``seq`` on, ``entries`` ring elements
        each from element ``start`` on, added into ``into`` (a C-contiguous
        ``(count·entries, 4)`` uint64 array; default zeros) and returned as a
        ``(count, entries, 4)`` array: the AES blocks E_kᵢⱼ(s·2⁶⁴ + b),
        b = 2·start, 2·start + 1, ... (two 16-byte blocks a ring element) for each
        message s."""
        blocks, plus = self.pairs(cohort)
        size = count * entries * RING_BYTES
        need = (len(blocks) + 1) * size + 16                       # (update_into's slack)
        memory = getattr(_WORKING, "memory", None)
        if memory is None or memory.size < need:  # (kept: fresh pages cost more than AES)
            memory = _WORKING.memory = np.empty(need, dtype=np.uint8)
            _WORKING.counters = None
        counters, raw = memory[:size], memory[size:need]
        if _WORKING.counters != (seq, count, entries, start):  # (another client's, kept)
            _counters(counters.view(np.uint64).reshape(count, -1, 2), seq, 2 * start)
            _WORKING.counters = seq, count, entries, start
        for k, block in enumerate(blocks):
            block.update_into(counters, raw[k * size:])
        out = np.zeros((count * entries, LIMBS), dtype=np.uint64) if into is None else into
        add_signed_into(out, raw[:-16].view(np.uint64).reshape(len(blocks), -1, LIMBS), plus)
        return out.reshape(count, entries, LIMBS)

    def mask_into(self, seq, sums, cohort=None):
        """sums ← sums + Σⱼ ±PRGᵢⱼ(seq) (``sums``: encoded ring elements, a C-contiguous
        ``(entries, 4)`` uint64 array) over this client's neighbours j in ``cohort`` (a
        tuple of client indices in the federation's order; None: all clients), + for
        j > i, − for j < i: the masks of a message cancel exactly in the sum over its
        cohort.

        The masks depend on nothing but the keys and the message's number, so a client
        of every round computes those of its next messages ahead, in one pass
        (:data:`AHEAD_BYTES` at most, each as long as the message that asked): a
        message of that batch takes the start of its mask from it, and computes alone
        only what a longer message needs beyond it.  A message outside the batch starts
        a new one, unless it is too long for :data:`AHEAD_LEAST` of them to fit; then,
        and in a round to a cohort, its mask is computed alone.  Sums of no entries (a
        message whose sum fields are all empty) are returned as they are."""
        entries = sums.shape[0]
        if entries == 0:            # an upload of empty fields: nothing to hide
            return sums
        if cohort is not None:
            self.streams(seq, 1, entries, cohort, into=sums)
            return sums
        first, ahead = self.ahead
        if ahead is None or not 0 <= seq - first < ahead.shape[0]:
            count = min(AHEAD_MESSAGES, AHEAD_BYTES // (entries * RING_BYTES))
            if count < AHEAD_LEAST:
                self.streams(seq, 1, entries, None, into=sums)
                return sums
            self.ahead = first, ahead = seq, self.streams(seq, count, entries, None)
        width = ahead.shape[1]
        if entries <= width:
            add_into(sums, ahead[seq - first])          # (its first entries)
            return sums
        add_into(sums[:width], ahead[seq - first])
        self.streams(seq, 1, entries - width, None, into=sums[width:], start=width)
        return sums


class SecureClient:
    """A client's side of the secure sum, whatever carries its messages (the party
    runtime in one process, :func:`constrfl.flower.secure.secure_sum_mod` on Flower): a fresh
    key pair for each solve's key agreement (:meth:`agree`), the peers' public keys and
    the number of neighbours from the server (:meth:`announce`), and the masks of its
    encoded sums (:meth:`mask`).  ``saved``: its :meth:`snapshot` (plain data)."""

    def __init__(self, saved=None):
        self.saved, self._masks, self._secret = dict(saved or {}), None, None

    def agree(self):
        """The key agreement's reply: a fresh key pair for this solve, its public half."""
        self._secret = secret = SiteSecret()
        self.saved, self._masks = {"private": keys_as_floats([secret.private_bytes()])}, None
        return {"public_key": keys_as_floats([secret.public_bytes()])}

    def secret(self):
        """This solve's key pair (from the saved private key after a restart)."""
        if self._secret is None:
            self._secret = SiteSecret(keys_from_floats(self.saved["private"])[0])
        return self._secret

    def announce(self, transport):
        """Take the peers' public keys and the number of neighbours where ``transport``
        (the transport fields of a message) brings them."""
        if "peers" in transport:
            self.saved = dict(self.saved, peers=transport["peers"],
                              neighbours=int(transport["neighbours"]))
            self._masks = None

    def mask(self, seq, sums, cohort=None):
        """The encoded sums plus this client's mask for message ``seq`` (in place), over
        the round's ``cohort`` (client indices; None: all)."""
        if "peers" not in self.saved:
            raise ValueError("secure sum: this client has no keys of the solve (its state "
                             "was lost); it will not send its sums unmasked")
        if self._masks is None:
            self._masks = Masks(self.secret(),
                                keys_from_floats(self.saved["peers"]),
                                self.saved["neighbours"])
        members = None if cohort is None else tuple(int(i) for i in cohort)
        if members is not None and self._masks.index not in members:
            raise ValueError("secure sum: asked to answer a round whose cohort leaves "
                             "this client out")
        return self._masks.mask_into(seq, sums, members)

    def snapshot(self):
        return dict(self.saved)


class SecureServer:
    """The server's side of the secure sum (the counterpart of :class:`SecureClient`, as
    Flower's ``SecAggPlusWorkflow`` is of its ``secaggplus_mod``): the clients' public
    keys from the key agreement (:meth:`take_keys`), the transport fields each round
    adds to the payloads (:meth:`transport`: the ``masked`` mark; the peers' keys and the
    number of neighbours to a client that has not had them; the round's cohort where it
    is not every client), and its :meth:`snapshot` (a resumed solve keeps its keys: no
    new agreement).  ``neighbours``: each client's (:func:`ring_neighbours`)."""

    def __init__(self, clients, neighbours, saved=None):
        saved = saved or {}
        self.clients = list(clients)
        self.peers = saved.get("peers")
        self.neighbours = saved.get("neighbours", neighbours)
        #: the clients that have the peers' public keys
        self.announced = set(saved.get("announced", ()))

    def take_keys(self, replies):
        """The peers from the key agreement's replies (each client's ``public_key``)."""
        self.peers = np.concatenate([replies[n]["public_key"] for n in self.clients])
        self.announced = set()

    def transport(self, names):
        """``{name: transport fields}`` of a round to the clients ``names`` (in the
        clients' order)."""
        fields = {"masked": 1}
        if len(names) < len(self.clients):
            members = set(names)
            fields["cohort"] = np.array([float(i) for i, c in enumerate(self.clients)
                                         if c in members])
        keys = dict(fields, peers=self.peers, neighbours=self.neighbours)
        return {n: fields if n in self.announced else keys for n in names}

    def delivered(self, names):
        """The round to ``names`` is answered: they have the peers' keys now."""
        self.announced.update(names)

    def snapshot(self):
        return {"peers": self.peers, "neighbours": self.neighbours,
                "announced": sorted(self.announced)}
