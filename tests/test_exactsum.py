"""The exact sums of constrfl.exactsum against an independent oracle: Python's integers
(exact) and fractions.Fraction for the rounding to float64."""
from fractions import Fraction

import numpy as np
import pytest

from constrfl.exactsum import FRACTION, LIMIT, decode, encode, exact_sum


def _integer(limbs):
    """The signed 256-bit integer of an encoding (without the flag part)."""
    v = sum(int(limb) << (64 * j) for j, limb in enumerate(limbs))
    return v - (1 << 256) if v >= 1 << 255 else v


def _reference(values):
    """Σᵢ round(xᵢ·2^FRACTION) (exact, Python ints), then the float64 nearest to it
    ·2^−FRACTION (Fraction → float rounds to nearest, ties to even)."""
    total = sum(round(Fraction(x) * 2 ** FRACTION) for x in values)
    return float(Fraction(total, 2 ** FRACTION))


def _samples(rng, n):
    mags = 10.0 ** rng.uniform(-40, 28, n)
    return np.where(rng.random(n) < 0.5, -mags, mags)


def test_encoding_is_the_rounded_fixed_point_value():
    rng = np.random.default_rng(0)
    x = np.concatenate([_samples(rng, 2000), [0.0, -0.0, 1.0, -1.0, 2.0 ** -112, 3 * 2.0 ** -113,
                                              2.0 ** -113, -(2.0 ** -113), 5e-324]])
    E = encode(x)
    for xi, limbs in zip(x, E):
        assert _integer(limbs) == round(Fraction(xi) * 2 ** FRACTION)


def test_a_sum_is_exact_correctly_rounded_and_independent_of_the_order():
    rng = np.random.default_rng(1)
    sites = [_samples(rng, 300) for _ in range(7)]
    # cancellation: a site's entries nearly cancel another's
    sites.append(-sites[0] * (1 + 1e-15))
    total = decode(exact_sum(encode(s) for s in sites))
    expected = np.array([_reference(col) for col in zip(*sites)])
    assert total.tobytes() == expected.tobytes()
    for perm in (rng.permutation(len(sites)) for _ in range(5)):
        again = decode(exact_sum(encode(sites[i]) for i in perm))
        assert again.tobytes() == total.tobytes()


def test_what_float64_summation_loses_the_exact_sum_keeps():
    x = [1e20, 1.0, -1e20]
    assert sum(x) == 0.0                          # a float loop loses the 1
    assert decode(exact_sum(encode(v) for v in x)) == 1.0


def test_scalars_and_ties_round_to_even():
    half_ulp = 2.0 ** -53                         # 1 + 2⁻⁵³ is a tie between 1 and 1 + 2⁻⁵²
    assert decode(exact_sum([encode(1.0), encode(half_ulp)])) == 1.0
    assert decode(exact_sum([encode(1.0 + 2.0 ** -52), encode(half_ulp)])) == 1.0 + 2.0 ** -51
    assert decode(exact_sum([encode(1.0), encode(half_ulp), encode(2.0 ** -100)])) \
        == 1.0 + 2.0 ** -52                       # a sticky bit below the tie rounds up
    # an odd significand of all ones rounds up into the next binade (the exponent's carry)
    assert decode(exact_sum([encode(2.0 - 2.0 ** -52), encode(half_ulp)])) == 2.0
    assert decode(exact_sum([encode(-(2.0 - 2.0 ** -52)), encode(-half_ulp)])) == -2.0
    assert isinstance(decode(encode(0.25)), float)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, LIMIT, -2 * LIMIT])
def test_an_unrepresentable_entry_makes_its_sum_nan_and_only_its(bad):
    a = encode(np.array([1.0, bad, -3.0]))
    b = encode(np.array([2.0, 5.0, -1.0]))
    total = decode(exact_sum([a, b]))
    assert total[0] == 3.0 and np.isnan(total[1]) and total[2] == -4.0
    # negative sums of the other entries do not disturb the count
    assert np.isnan(decode(exact_sum([encode(-1.0), encode(bad)])))


def test_just_below_the_limit_many_sites_do_not_wrap():
    x = np.nextafter(LIMIT, 0)
    n = 1000
    assert decode(exact_sum([encode(np.array([x, -x]))] * n)).tolist() == [n * x, -n * x]


def test_subtracting_undoes_adding_in_the_ring():
    """(a + m) − m = a for any ring elements m, carries and borrows across the limbs."""
    from constrfl.exactsum import add_into, add_signed_into
    rng = np.random.default_rng(5)
    a = encode(_samples(rng, 500))
    m = rng.integers(0, 2 ** 63, size=(500, 4), dtype=np.uint64) * np.uint64(2) + \
        rng.integers(0, 2, size=(500, 4), dtype=np.uint64)       # any 64-bit limbs
    b = a.copy()
    add_into(b, m)
    assert not np.array_equal(b, a)
    add_signed_into(b, m[None], np.array([False]))
    assert np.array_equal(b, a)
    zero = np.zeros((500, 4), dtype=np.uint64)
    add_signed_into(zero, m[None], np.array([False]))           # −m, then + m = 0
    add_into(zero, m)
    assert not zero.any()


@pytest.mark.parametrize("k", [0, 1, 2, 19])
def test_a_signed_sum_of_many_terms_is_the_ring_sum(k):
    """add_signed_into(acc, terms, plus) = acc + Σₖ ±termsₖ modulo 2²⁵⁶ (Python
    integers), with limbs at 0 and at 2⁶⁴ − 1 (the carries' and borrows' extremes)."""
    from constrfl.exactsum import add_signed_into
    rng = np.random.default_rng(k)
    shape = (k, 60, 4)
    terms = rng.integers(0, 2 ** 63, size=shape, dtype=np.uint64) * np.uint64(2) + \
        rng.integers(0, 2, size=shape, dtype=np.uint64)
    terms[:, :20] = np.uint64(2 ** 64 - 1)
    terms[:, 20:30] = 0
    plus = rng.random(k) < 0.5
    acc = rng.integers(0, 2 ** 63, size=(60, 4), dtype=np.uint64) * np.uint64(2)
    acc[:10] = np.uint64(2 ** 64 - 1)
    want = [sum(int(x) << (64 * j) for j, x in enumerate(acc[i])) for i in range(60)]
    for t, sign in zip(terms, plus):
        for i in range(60):
            v = sum(int(x) << (64 * j) for j, x in enumerate(t[i]))
            want[i] = (want[i] + (v if sign else -v)) % (1 << 256)
    add_signed_into(acc, terms, plus)
    got = [sum(int(x) << (64 * j) for j, x in enumerate(acc[i])) for i in range(60)]
    assert got == want
