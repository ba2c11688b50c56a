"""The largest of the parties' values, from a sum (docs/algorithms.md §2, §9).

The KKT residuals other than stationarity are maxima over every constraint row of every
party; a party knows only its own rows' largest value r, and the server only sums.  A
party sends r as a *sketch*: a vector with one entry per bin of W = ``WIDTH`` octaves
(2ᵏ⁻ᵂ, 2ᵏ], k = ``LOW`` + W, ``LOW`` + 2W, … ``HIGH``, holding (r/2ᶜ)^``POWER`` in r's
bin, c = k − W/2 the bin's centre, and 0 elsewhere (r ≤ 2^LOW counts in the first bin
as 2^(LOW − 1); r > 2^HIGH in the last, where the power overflows the exact sum beyond
2^(HIGH + 1.9): NaN).  In its bin (r/2ᶜ)^POWER lies in (2^−W·POWER/2, 2^W·POWER/2] =
(2⁻⁶⁴, 2⁶⁴]: the exact sum carries it to 48 bits or more (a relative 2⁻⁴⁸, 2⁻⁵² after
the root) and sums of up to 2²⁴ of them without overflow — the widest bins the ring
holds at float precision, so the fewest entries a sketch.  The sketches' sum s holds,
per bin, the parties' values there to the ``POWER``-th power; in the highest non-zero
bin, of centre c*,

    max r  ≤  U = 2^c*·s_c*^(1/POWER)  ≤  m^(1/POWER)·max r,

m the number of parties whose largest value lies in that bin: exact for one party
(up to rounding), within 1.54× for 1,000 (a 16-norm within the bin; a party 2⁻ᵗ below
the largest adds 2⁻¹⁶ᵗ to the power), always an upper bound — so a residual reported
as U and found within tol certifies the ∞-norm.  A scale (the relative tolerance's) is
reported as a lower bound instead, 2^c*·max(2^−W/2, (s_c*/n)^(1/POWER)) for n parties
(the bin's bottom at least).  All values are sums: the exact sum
(:mod:`constrfl.exactsum`) carries them, and a secure aggregation hides each party's
bin.
"""
from __future__ import annotations

import numpy as np

__all__ = ["sketch", "largest", "least_largest", "POWER", "WIDTH", "LOW", "HIGH", "SIZE"]

POWER = 16
WIDTH = 8                    # octaves a bin
LOW, HIGH = -63, 57          # bins (2ᵏ⁻ᵂ, 2ᵏ] for k = LOW + W, LOW + 2W, … HIGH
SIZE = (HIGH - LOW) // WIDTH
_HALF = WIDTH // 2           # a bin's centre c = k − _HALF


def sketch(r):
    """The sketch of a party's largest value r ≥ 0 (NaN or inf: NaN in every bin)."""
    out = np.zeros(SIZE)
    r = float(r)
    if r == 0.0:
        return out
    if not np.isfinite(r):
        out[:] = np.nan
        return out
    octave = int(np.ceil(np.log2(r)))                     # r ∈ (2^(octave − 1), 2^octave]
    j = min(max(-(-(octave - LOW) // WIDTH), 1), SIZE)    # its bin, clamped to the range
    c = LOW + WIDTH * j - _HALF                           # the bin's centre
    # (ceil(log2) can land one off at a power of two: r/2ᶜ is kept in (2^−W/2, 2^W/2]
    # either way for the bins inside the range)
    ratio = max(r / 2.0 ** c, 2.0 ** -(_HALF + 1))
    out[j - 1] = ratio ** POWER
    return out


def _top(s):
    """(c*, s_c*) of a summed sketch, c* the centre of its highest non-zero bin; None
    when every entry is 0 (every value was 0)."""
    s = np.asarray(s, dtype=np.float64)
    if np.isnan(s).any():
        return np.nan, np.nan
    nonzero = np.flatnonzero(s > 0)
    if not nonzero.size:
        return None
    j = int(nonzero[-1])
    return LOW + WIDTH * (j + 1) - _HALF, float(s[j])


def largest(s):
    """An upper bound U of the largest value from a summed sketch (exact for one
    party in the top bin; 0 when all were 0; NaN when one was not finite)."""
    top = _top(s)
    if top is None:
        return 0.0
    c, v = top
    return float(2.0 ** c * v ** (1.0 / POWER)) if np.isfinite(v) else np.nan


def least_largest(s, n):
    """A lower bound of the largest value from a summed sketch of ``n`` parties: their
    power mean in the top bin, at least the bin's bottom."""
    top = _top(s)
    if top is None:
        return 0.0
    c, v = top
    return (float(2.0 ** c * max(2.0 ** -_HALF, (v / n) ** (1.0 / POWER)))
            if np.isfinite(v) else np.nan)
