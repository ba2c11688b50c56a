"""The largest of the parties' values from the sum of their sketches
(constrfl.maxima), against the maximum computed here."""
import numpy as np
import pytest

from constrfl.exactsum import decode, encode, exact_sum
from constrfl.maxima import HIGH, LOW, POWER, WIDTH, largest, least_largest, sketch


def summed(values):
    """The exact sum of the values' sketches, as the server receives it."""
    return decode(exact_sum(encode(sketch(v)) for v in values))


@pytest.mark.parametrize("seed", range(5))
def test_an_upper_bound_within_the_bin_norm(seed):
    """U lies between the largest value and the 16-norm of the values in its bin of
    WIDTH octaves (counted here from the value, not from the sketch); the scale's lower
    bound within 2^WIDTH of it."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 2000))
    values = 10.0 ** rng.uniform(-15, 10, n)
    U, top = largest(summed(values)), values.max()
    k = LOW + WIDTH * np.ceil((np.ceil(np.log2(top)) - LOW) / WIDTH)     # its bin's top
    in_bin = values[values > 2.0 ** (k - WIDTH)]
    assert top <= U <= np.sum(in_bin ** POWER) ** (1 / POWER) * (1 + 1e-12)
    assert U <= top * in_bin.size ** (1 / POWER) * (1 + 1e-12)
    assert 2.0 ** -WIDTH * top <= least_largest(summed(values), n) <= top * (1 + 1e-12)


def test_exact_for_one_party_in_the_top_bin_and_zero_for_zeros():
    assert largest(summed([3e-7, 1e-9, 0.0])) == pytest.approx(3e-7, rel=1e-14)
    assert largest(summed([0.0, 0.0])) == 0.0
    assert largest(summed([2.0 ** -70])) >= 2.0 ** -70        # below the range: bounded
    assert largest(summed([2.0 ** (HIGH + 1.5)])) == pytest.approx(2.0 ** (HIGH + 1.5))


def test_a_power_of_two_and_the_edges():
    """Powers of two and the values beside a bin's edges (a bin's bottom: the power
    2⁻⁶⁴, the least precise in the ring) come back to 1e-14."""
    edge = 2.0 ** (LOW + 5 * WIDTH)
    for r in (1.0, 0.5, 0.25, 0.125, 2.0 ** LOW, 2.0 ** (LOW + 1), 2.0 ** HIGH,
              np.nextafter(1.0, 2.0), np.nextafter(0.125, 0.0), edge,
              np.nextafter(edge, 0.0), np.nextafter(edge, np.inf), 1.000000001 * edge):
        assert largest(summed([r])) == pytest.approx(r, rel=1e-14)
        assert largest(summed([r])) >= r


def test_a_value_that_is_not_finite_or_too_large_gives_nan():
    assert np.isnan(largest(summed([1.0, np.inf])))
    assert np.isnan(largest(summed([1.0, np.nan])))
    assert np.isnan(largest(summed([2.0 ** (HIGH + 2)])))     # (r/2ᶜ)^16 overflows
