"""The largest of the parties' values, from a sum (docs/algorithms.md §2, §9).

The KKT residuals other than stationarity are maxima over every constraint row of every
party; a party knows only its own rows' largest value r, and the server only sums.  A
party sends r as a *sketch*: a vector with one entry per octave (2ᵏ⁻¹, 2ᵏ],
k = ``LOW`` + 1 … ``HIGH``, holding (r/2ᵏ)^``POWER`` in r's octave and 0 elsewhere
(r ≤ 2^LOW counts in the first octave as 2^(LOW − 4), r > 2^HIGH in the last, where
the power overflows the exact sum beyond 2^(HIGH + 5.9): NaN).  The sketches' sum s
holds, per octave, the parties' values there to the ``POWER``-th power; in the highest
non-zero octave k*

    max r  ≤  U = 2^k*·s_k*^(1/POWER)  ≤  c^(1/POWER)·max r,

c the number of parties whose largest value lies in that octave: exact for one party,
within 1.54× for 1,000 (a 16-norm within the octave), always an upper bound — so a
residual reported as U and found within tol certifies the ∞-norm.  A scale (the
relative tolerance's) is reported as a lower bound instead, 2^k*·max(½, (s_k*/n)^(1/POWER))
for n parties.  All values are sums: the exact sum (:mod:`constrfl.exactsum`) carries
them, and a secure aggregation hides each party's octave.
"""
from __future__ import annotations

import numpy as np

__all__ = ["sketch", "largest", "least_largest", "POWER", "LOW", "HIGH", "SIZE"]

POWER = 16
LOW, HIGH = -64, 48          # octaves (2ᵏ⁻¹, 2ᵏ] for k = LOW + 1 … HIGH
SIZE = HIGH - LOW


def sketch(r):
    """The sketch of a party's largest value r ≥ 0 (NaN or inf: NaN in every octave)."""
    out = np.zeros(SIZE)
    r = float(r)
    if r == 0.0:
        return out
    if not np.isfinite(r):
        out[:] = np.nan
        return out
    k = min(max(int(np.ceil(np.log2(r))), LOW + 1), HIGH)   # r ∈ (2ᵏ⁻¹, 2ᵏ], clamped
    # (ceil(log2) can land one off at a power of two: r/2ᵏ is kept in (½, 1] either way
    # for the octaves inside the range)
    ratio = max(r / 2.0 ** k, 2.0 ** -4)
    out[k - LOW - 1] = ratio ** POWER
    return out


def _top(s):
    """(k*, s_k*) of a summed sketch; None when every entry is 0 (every value was 0)."""
    s = np.asarray(s, dtype=np.float64)
    if np.isnan(s).any():
        return np.nan, np.nan
    nonzero = np.flatnonzero(s > 0)
    if not nonzero.size:
        return None
    j = int(nonzero[-1])
    return j + LOW + 1, float(s[j])


def largest(s):
    """An upper bound U of the largest value from a summed sketch (exact for one
    party in the top octave; 0 when all were 0; NaN when one was not finite)."""
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
    return float(2.0 ** k * max(0.5, (v / n) ** (1.0 / POWER))) if np.isfinite(v) else np.nan
