"""Exact, order-independent sums over the sites: fixed point in the ring Z/2²⁵⁶
(docs/algorithms.md §9).

A site *encodes* every entry x of a sum field as the 256-bit integer (four uint64 limbs,
least significant first)

    E(x) = round(x·2^FRACTION)                 if |x| < LIMIT,
    E(x) = 2^FLAG_BIT                          otherwise (NaN, ±inf, or too large),

in two's complement modulo 2²⁵⁶ (round: to nearest, ties to even).  The server adds the
sites' encodings modulo 2²⁵⁶ — exactly, so in any order with the same bits; a secure
aggregation's masks, uniform in the same ring, cancel in the same sum — and *decodes*
the total T: with V = T mod 2^FLAG_BIT read as a signed number, ΣE(x) = V +
2^FLAG_BIT·k, where k counts the entries that were not representable.  The sum is
V·2^−FRACTION rounded once to the nearest float64 (ties to even), or NaN where k > 0.
Because |V| < 2^(FLAG_BIT−1) for up to ``MAX_ADDENDS`` addends below LIMIT, V never wraps.

What a float64 carries that matters is kept: every x with 2^−FRACTION·2⁵³ ≤ |x| < LIMIT
(about 1.7·10⁻¹⁸ to 4·10²⁸) is encoded exactly, smaller ones to the absolute resolution
2^−FRACTION ≈ 1.9·10⁻³⁴, far below any tolerance of a solve; the sum is then the
correctly rounded exact sum, where a float64 loop over the sites rounds once per site
and depends on their order.

Encoded arrays: ``uint64`` of shape ``(n, 4)`` for an array of n entries, ``(4,)`` for a
scalar.  The kernels are compiled once (numba, ``cache=True``).
"""
from __future__ import annotations

import numba
import numpy as np

__all__ = ["encode", "decode", "add_into", "add_signed_into", "exact_sum",
           "FRACTION", "LIMIT", "MAX_ADDENDS", "LIMBS", "RING_BYTES"]

LIMBS = 4                      # 64-bit limbs: the ring Z/2²⁵⁶
RING_BYTES = 8 * LIMBS         # bytes an encoded entry takes on the wire
FRACTION = 112                 # fractional bits: the resolution 2⁻¹¹²
FLAG_BIT = 232                 # 2^FLAG_BIT counts the entries that were not representable
MAX_ADDENDS = 2 ** 24 - 1      # the flag count's capacity (bits FLAG_BIT..255)
#: |x| below this encodes exactly: 2^(FLAG_BIT − 1 − 24 − FRACTION) = 2⁹⁵ ≈ 4·10²⁸, so
#: that MAX_ADDENDS of them sum below 2^(FLAG_BIT − 1)
LIMIT = 2.0 ** (FLAG_BIT - 1 - 24 - FRACTION)


@numba.njit(cache=True)
def _encode(bits, out):
    """E of each float64, read from its bits: x = M·2^(b − 1075), M the 53-bit
    significand, b the biased exponent (b = 0: subnormal, far below the resolution).
    A negative x's limbs are negated without a branch (two's complement: each limb
    XOR the sign's mask, plus the carry), as the signs of a sum's entries are random."""
    one, zero = np.uint64(1), np.uint64(0)
    frac_mask = (one << np.uint64(52)) - one
    for i in range(bits.size):
        b = np.int64((bits[i] >> np.uint64(52)) & np.uint64(0x7FF))
        if b >= 1023 + 95:         # NaN, inf, |x| ≥ LIMIT: 2^FLAG_BIT (limb 3, bit 40)
            out[i, 0] = out[i, 1] = out[i, 2] = zero
            out[i, 3] = one << np.uint64(40)
            continue
        l0 = l1 = l2 = l3 = zero                     # |E|, least significant first
        M = (bits[i] & frac_mask) | (one << np.uint64(52))
        s = b - 1075 + 112                           # E = M·2^s
        if b == 0:                                   # zero or subnormal: rounds to 0
            pass
        elif s < 0:                                  # below the resolution: round
            k = -s
            if k <= 53:
                q = M >> np.uint64(k)
                rem = M - (q << np.uint64(k))
                half = one << np.uint64(k - 1)
                if rem > half or (rem == half and (q & one) == one):
                    q += one
                l0 = q
        else:
            limb, off = s // 64, s % 64
            low = M << np.uint64(off)
            high = M >> np.uint64(64 - off) if off > 11 else zero   # the bits past it
            if limb == 0:
                l0, l1 = low, high
            elif limb == 1:
                l1, l2 = low, high
            elif limb == 2:
                l2, l3 = low, high
            else:
                l3 = low
        sign = bits[i] >> np.uint64(63)              # 1: negative
        mask = zero - sign
        t = (l0 ^ mask) + sign
        carry = np.uint64(t < sign)
        out[i, 0] = t
        t = (l1 ^ mask) + carry
        carry = np.uint64(t < carry)
        out[i, 1] = t
        t = (l2 ^ mask) + carry
        carry = np.uint64(t < carry)
        out[i, 2] = t
        out[i, 3] = (l3 ^ mask) + carry


@numba.njit(cache=True)
def add_into(acc, other):
    """acc ← acc + other modulo 2²⁵⁶, entry by entry (``(n, 4)`` uint64; ``other``'s
    first n entries where it has more)."""
    for i in range(acc.shape[0]):
        carry = np.uint64(0)
        for j in range(4):
            a = acc[i, j]
            s = a + other[i, j]
            c1 = s < a
            t = s + carry
            c2 = t < s
            acc[i, j] = t
            carry = np.uint64(1) if (c1 or c2) else np.uint64(0)


@numba.njit(cache=True)
def add_signed_into(acc, terms, plus):
    """acc ← acc + Σₖ ±terms[k] modulo 2²⁵⁶, + where ``plus[k]``, − elsewhere
    (``terms``: ``(K, n, 4)`` uint64).  Each limb adds its K terms modulo 2⁶⁴ counting
    its carries (signed), which then ripple up once, low limb to high."""
    n = acc.shape[0]
    flat = acc.reshape(-1)                       # (one loop over all limbs: vectorized)
    carries = np.zeros(flat.size, dtype=np.int64)
    for k in range(terms.shape[0]):
        term = terms[k].reshape(-1)
        if plus[k]:
            for i in range(flat.size):
                s = flat[i] + term[i]
                carries[i] += np.int64(s < flat[i])
                flat[i] = s
        else:
            for i in range(flat.size):
                v = term[i]
                carries[i] -= np.int64(v > flat[i])
                flat[i] = flat[i] - v
    for i in range(n):
        c = 0                                    # the carry into limb j, signed
        for j in range(4):
            a = acc[i, j]
            if c >= 0:
                s = a + np.uint64(c)
                up = 1 if s < a else 0
            else:
                s = a - np.uint64(-c)
                up = -1 if s > a else 0
            acc[i, j] = s
            c = carries[4 * i + j] + up


@numba.njit(cache=True, inline="always")
def _highest_bit(v):
    """The index of the highest set bit of a nonzero uint64 (a binary search)."""
    h = 0
    for width in (32, 16, 8, 4, 2, 1):
        if (v >> np.uint64(width)) != np.uint64(0):
            v >>= np.uint64(width)
            h += width
    return h


@numba.njit(cache=True)
def _decode(T, out):
    """Each entry of ``out`` (float64 *bits*, uint64) from the total T (module
    docstring); the number of flagged entries."""
    mask40 = (np.uint64(1) << np.uint64(40)) - np.uint64(1)
    frac_mask = (np.uint64(1) << np.uint64(52)) - np.uint64(1)
    nan = np.uint64(0x7FF8000000000000)
    flagged = 0
    mag = np.zeros(4, dtype=np.uint64)
    for i in range(T.shape[0]):
        top = T[i, 3] >> np.uint64(40)
        negative = ((T[i, 3] >> np.uint64(39)) & np.uint64(1)) == np.uint64(1)
        count = ((top + np.uint64(1)) if negative else top) & np.uint64(0xFFFFFF)
        if count != 0:
            out[i] = nan
            flagged += 1
            continue
        for j in range(3):
            mag[j] = T[i, j]
        mag[3] = T[i, 3] & mask40
        if negative:                                 # |V| = 2²³² − (T mod 2²³²)
            carry = np.uint64(1)
            for j in range(4):
                v = ~mag[j] + carry
                carry = np.uint64(1) if (carry == 1 and v == 0) else np.uint64(0)
                mag[j] = v
            mag[3] &= mask40
        top_limb = -1
        for j in range(3, -1, -1):
            if mag[j] != 0:
                top_limb = j
                break
        if top_limb < 0:
            out[i] = 0
            continue
        hi = mag[top_limb]
        h = _highest_bit(hi)
        B = 64 * top_limb + h                         # the highest set bit
        # the 64 bits [B−63, B] into W, and whether any bit below them is set
        sh = 63 - h
        W = hi << np.uint64(sh)
        sticky = False
        if top_limb > 0:
            lo = mag[top_limb - 1]
            if sh > 0:
                W |= lo >> np.uint64(64 - sh)
                sticky = (lo << np.uint64(sh)) != np.uint64(0)
            else:
                sticky = lo != np.uint64(0)
            for j in range(top_limb - 1):
                if mag[j] != np.uint64(0):
                    sticky = True
        mant = W >> np.uint64(11)                      # 53 bits
        rest = W & np.uint64(0x7FF)
        half = np.uint64(0x400)
        if rest > half or (rest == half and (sticky or (mant & np.uint64(1)) == 1)):
            mant += np.uint64(1)
        # the float64 of mant·2^(B − 164) from its bits (B ≥ 0: always normal); a
        # significand rounded up to 2⁵³ carries into the exponent
        exponent = np.uint64(B + 911) + (mant >> np.uint64(53))
        out[i] = ((np.uint64(negative) << np.uint64(63)) | (exponent << np.uint64(52))
                  | (mant & frac_mask))
    return flagged


def encode(x):
    """E(x) of a float, or of each entry of a float64 array: ``(4,)`` or ``(n, 4)``
    uint64."""
    scalar = np.ndim(x) == 0
    flat = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    out = np.empty((flat.size, LIMBS), dtype=np.uint64)
    _encode(flat.view(np.uint64), out)
    return out[0] if scalar else out


def decode(total):
    """The float (for a ``(4,)`` total) or float64 array (``(n, 4)``) of a sum of
    encodings: each entry correctly rounded, NaN where a site's entry was not
    representable."""
    T = np.ascontiguousarray(total, dtype=np.uint64)
    flat = T.reshape(-1, LIMBS)
    out = np.empty(flat.shape[0])
    _decode(flat, out.view(np.uint64))
    return float(out[0]) if T.ndim == 1 else out


def exact_sum(encoded):
    """The modular sum of equally shaped encodings (a new array)."""
    encoded = list(encoded)
    if not encoded:
        raise ValueError("exact_sum of nothing")
    acc = np.array(encoded[0], dtype=np.uint64).reshape(-1, LIMBS)
    for e in encoded[1:]:
        add_into(acc, np.ascontiguousarray(e, dtype=np.uint64).reshape(-1, LIMBS))
    return acc.reshape(np.shape(encoded[0]))
