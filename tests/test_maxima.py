"""The largest of the parties' values from the sum of their sketches
(constrfl.maxima), against the maximum computed here."""
import numpy as np
import pytest

from constrfl.exactsum import decode, encode, exact_sum
from constrfl.maxima import HIGH, LOW, POWER, largest, least_largest, sketch


def summed(values):
    """The exact sum of the values' sketches, as the server receives it."""
    return decode(exact_sum(encode(sketch(v)) for v in values))


@pytest.mark.parametrize("seed", range(5))
def test_an_upper_bound_within_the_octave_norm(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 2000))
    values = 10.0 ** rng.uniform(-15, 10, n)
    U, top = largest(summed(values)), values.max()
    in_octave = np.sum(values > 2.0 ** np.ceil(np.log2(top)) / 2)
    assert top <= U <= top * in_octave ** (1 / POWER) * (1 + 1e-12)
    assert 0.5 * top <= least_largest(summed(values), n) <= top * (1 + 1e-12)


def test_exact_for_one_party_in_the_top_octave_and_zero_for_zeros():
    assert largest(summed([3e-7, 1e-9, 0.0])) == pytest.approx(3e-7, rel=1e-14)
    assert largest(summed([0.0, 0.0])) == 0.0
    assert largest(summed([2.0 ** -70])) >= 2.0 ** -70        # below the range: bounded
    assert largest(summed([2.0 ** (HIGH + 3)])) == pytest.approx(2.0 ** (HIGH + 3))


def test_a_power_of_two_and_the_edges():
    for r in (1.0, 0.5, 2.0 ** LOW, 2.0 ** HIGH, np.nextafter(1.0, 2.0)):
        assert largest(summed([r])) == pytest.approx(r, rel=1e-14)
        assert largest(summed([r])) >= r


def test_a_value_that_is_not_finite_or_too_large_gives_nan():
    assert np.isnan(largest(summed([1.0, np.inf])))
    assert np.isnan(largest(summed([1.0, np.nan])))
    assert np.isnan(largest(summed([2.0 ** (HIGH + 7)])))     # (r/2^HIGH)^16 overflows
