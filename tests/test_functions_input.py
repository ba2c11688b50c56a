"""Every array argument of the built-in functions holds real numbers: numeric text is
refused whether its dtype is a string (<U) or object, while an object array of numbers
is the same function as its float64 twin."""
import numpy as np
import pytest

from constrfl import functions as fn

rng = np.random.default_rng(0)
X, y, s = rng.standard_normal((6, 3)), np.array([0, 1, 0, 1, 1, 0.0]), np.full(6, 0.5)
A, b = np.eye(3) * 2.0, np.ones(3)

# (where: the object named in errors, argument name, builder taking the argument, its float64 value)
ARRAYS = [
    ("LogisticLoss", "X", lambda a: fn.LogisticLoss(a, y), X),
    ("LogisticLoss", "y", lambda a: fn.LogisticLoss(X, a), y),
    ("LogisticLoss", "sample_weight", lambda a: fn.LogisticLoss(X, y, a), s),
    ("LeastSquares", "X", lambda a: fn.LeastSquares(a, y), X),
    ("LeastSquares", "y", lambda a: fn.LeastSquares(X, a), y),
    ("Quadratic", "A", lambda a: fn.Quadratic(a, b), A),
    ("Quadratic", "b", lambda a: fn.Quadratic(A, a), b),
    ("Affine", "C", lambda a: fn.Affine(a, b), A),
    ("Affine", "d", lambda a: fn.Affine(A, a), b),
    ("adding to a Function", "the constant", lambda a: fn.Affine(A, b) + a, b),
    ("SquaredNorm", "A", lambda a: fn.SquaredNorm(a, b), A),
    ("SquaredNorm", "b", lambda a: fn.SquaredNorm(A, a), b),
]
IDS = [f"{where}.{name}" for where, name, _, _ in ARRAYS]


@pytest.mark.parametrize("where, name, build, value", ARRAYS, ids=IDS)
@pytest.mark.parametrize("text", [lambda a: a.astype(str).astype(object),
                                  lambda a: a.astype(str)], ids=["object", "unicode"])
def test_numeric_text_is_refused(where, name, build, value, text):
    with pytest.raises(TypeError, match=rf"{where}: {name} must be .*real numbers.*, got dtype"):
        build(text(value))


@pytest.mark.parametrize("where, name, build, value", ARRAYS, ids=IDS)
def test_an_object_array_of_numbers_is_its_float_twin(where, name, build, value):
    w = np.array([0.3, -1.2, 0.7])
    assert np.array_equal(build(value.astype(object)).value(w), build(value).value(w))


def test_the_refusal_names_the_offending_element():
    with pytest.raises(TypeError, match=r"X must be a 2-D array of real numbers \(or a "
                                        r"scipy.sparse matrix\), got dtype object holding "
                                        r"str '0\.5'"):
        fn.LogisticLoss(np.array([[0.5, 1.0]] * 2, dtype=object).astype(str).astype(object),
                        [0.0, 1.0])
    with pytest.raises(TypeError, match=r"b must be an array of real numbers, got dtype "
                                        r"object holding NoneType None"):
        fn.Quadratic(np.eye(2), np.array([1.0, None], dtype=object))
    with pytest.raises(TypeError, match=r"b must be an array of real numbers, got dtype "
                                        r"complex128"):
        fn.Quadratic(np.eye(2), [1 + 1j, 2])
