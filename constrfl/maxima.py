"""The largest of the parties' values, from a sum (docs/algorithms.md §2, §9).

The KKT residuals other than stationarity are maxima over every constraint row of every
party; a party knows only its own rows' largest value r, and the server only sums.  A
party sends r as a *sketch*: a vector with one entry per bin of W = ``WIDTH`` octaves
(2ᵏ⁻ᵂ, 2ᵏ], k = ``LOW`` + W, ``LOW`` + 2W, … ``HIGH``, holding (r/2ᵏ)^``POWER`` in r's
bin and 0 elsewhere (r ≤ 2^LOW counts in the first bin as 2^(LOW − 1), r > 2^HIGH in
the last, where the power overflows the exact sum beyond 2^(HIGH + 5.9): NaN).  In its
bin (r/2ᵏ)^POWER lies in (2^−W·POWER, 1] = (2⁻⁴⁸, 1], far above the exact sum's
resolution.  The sketches' sum s holds, per bin, the parties' values there to the
``POWER``-th power; in the highest non-zero bin k*

    max r  ≤  U = 2^k*·s_k*^(1/POWER)  ≤  c^(1/POWER)·max r,

c the number of parties whose largest value lies in that bin: exact for one party,
within 1.54× for 1,000 (a 16-norm within the bin), always an upper bound — so a
residual reported as U and found within tol certifies the ∞-norm.  A scale (the
relative tolerance's) is reported as a lower bound instead,
2^k*·max(2^−W, (s_k*/n)^(1/POWER)) for n parties.  All values are sums: the exact sum
(:mod:`constrfl.exactsum`) carries them, and a secure aggregation hides each party's
bin.
"""
from __future__ import annotations

import numpy as np

__all__ = ["sketch", "largest", "least_largest", "POWER", "WIDTH", "LOW", "HIGH", "SIZE"]

POWER = 16
WIDTH = 3                    # octaves a bin
LOW, HIGH = -63, 48          # bins (2ᵏ⁻ᵂ, 2ᵏ] for k = LOW + W, LOW + 2W, … HIGH
SIZE = (HIGH - LOW) // WIDTH


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
    k = LOW + WIDTH * j
    # (ceil(log2) can land one off at a power of two: r/2ᵏ is kept in (2^−W, 1] either
    # way for the bins inside the range)
    ratio = max(r / 2.0 ** k, 2.0 ** -(WIDTH + 1))
    out[j - 1] = ratio ** POWER
    return out


def _top(s):
    """(k*, s_k*) of a summed sketch, k* the top of its highest non-zero bin; None when
    every entry is 0 (every value was 0)."""
    s = np.asarray(s, dtype=np.float64)
    if np.isnan(s).any():
        return np.nan, np.nan
    nonzero = np.flatnonzero(s > 0)
    if not nonzero.size:
        return None
    j = int(nonzero[-1])
    return LOW + WIDTH * (j + 1), float(s[j])


def largest(s):
    """An upper bound U of the largest value from a summed sketch (exact for one
    party in the top bin; 0 when all were 0; NaN when one was not finite)."""
    top = _top(s)
    if top is None:
        return 0.0
    k, v = top
    return float(2.0 ** k * v ** (1.0 / POWER)) if np.isfinite(v) else np.nan


def least_largest(s, n):
    """A lower bound of the largest value from a summed sketch of ``n`` parties."""
    top = _top(s)
    if top is None:
        return 0.0
    k, v = top
    return (float(2.0 ** k * max(2.0 ** -WIDTH, (v / n) ** (1.0 / POWER)))
            if np.isfinite(v) else np.nan)
