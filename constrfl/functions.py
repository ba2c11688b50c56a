"""Smooth building blocks for objectives fᵢ and constraints cᵢ, hᵢ (docs/algorithms.md §1).

A :class:`Function` maps ``w ∈ Rᵈ`` to a scalar (``size is None``) or to ``Rᵐ``
(``size == m``, used for vector-valued constraints).  Each one knows

* ``value(w)``; ``grad(w)``: the gradient ``(d,)``, or the Jacobian ``(m, d)`` when
  vector-valued; ``hess(w, y=None)``: ``∇²f`` for a scalar function (times ``y`` if
  given), ``Σⱼ yⱼ ∇²cⱼ`` for a vector one, or ``None`` when no Hessian is available;
* ``curvature``: one of ``"affine"``, ``"convex"``, ``"concave"``, ``"nonconvex"``;
* ``cvxpy(w)``: its cvxpy expression for a cvxpy variable ``w`` (raises
  :class:`NoCvxpyForm` where none exists).

Functions combine with ``f + g``, ``f - g``, ``a * f``, ``-f``, ``f - 0.2``; the result
tracks its curvature (``f - g`` with ``g`` not affine is nonconvex).

The row losses (:class:`LeastSquares`, :class:`LogisticLoss`) take X as a 2-D array or
any ``scipy.sparse`` matrix, kept sparse (CSR).  :class:`SquaredNorm` gives ``‖Aw − b‖²``,
e.g. a norm ball ``SquaredNorm() - r**2 ≤ 0`` as any party's constraint.

Shapes are checked when a function is built; non-finite data are reported by
:meth:`Function.check_finite`, which :class:`~constrfl.Client` calls so that the error
names the client.
"""
from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from . import kernels

__all__ = ["Function", "Quadratic", "Affine", "SquaredNorm", "LeastSquares", "LogisticLoss",
           "Custom", "Cached", "NoCvxpyForm"]


class NoCvxpyForm(TypeError):
    """Raised when a function has no cvxpy expression (e.g. :class:`Custom`)."""


def _not_real(A):
    """What keeps the ndarray ``A`` from holding real numbers, or None: its dtype, or for
    an object array its first element that is not a number (strings are not)."""
    if A.dtype.kind != "O":
        return None if A.dtype.kind in "biuf" else f"dtype {A.dtype}"
    for v in A.flat:
        if not isinstance(v, (numbers.Number, np.bool_)):
            return f"dtype object holding {type(v).__name__} {v!r:.20}"
    return None


def _real_array(a, name, where, what="an array of real numbers"):
    """``a`` as a C-contiguous float64 ndarray: booleans, integers, floats, or an object
    array of numbers.  Anything else, numeric strings included whatever their dtype
    (text is not parsed), raises TypeError naming ``where`` and ``name``."""
    A = np.asarray(a)
    problem = _not_real(A)
    if problem is None:
        try:
            return np.asarray(A, dtype=np.float64, order="C")
        except (TypeError, ValueError):          # e.g. complex numbers in an object array
            problem = "dtype object holding numbers that are not real"
    raise TypeError(f"{where}: {name} must be {what}, got {problem}")


def _as_float_array(a, name, where, ndim=None):
    arr = np.ascontiguousarray(_real_array(a, name, where))    # at least 1-D
    if ndim is not None and arr.ndim not in np.atleast_1d(ndim):
        raise ValueError(f"{where}: {name} must be {ndim}-dimensional, got shape {arr.shape}")
    return arr


def as_data_matrix(X, where, name="X"):
    """``X`` as a float64 2-D matrix with at least one column: a C-contiguous ndarray,
    or, for ``scipy.sparse`` input of any format, a canonical CSR ``csr_array`` (a copy:
    sorted indices, duplicates summed, explicit zeros dropped).  Sparse input stays
    sparse.  Errors name ``where`` and ``name``."""
    if sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"{where}: {name} must be 2-dimensional, got shape {X.shape}")
        if X.dtype.kind not in "biuf":
            raise TypeError(f"{where}: {name} must hold real numbers, got dtype {X.dtype}")
        A = sp.csr_array(X, dtype=np.float64, copy=True)
        A.sum_duplicates()
        A.eliminate_zeros()
        A.sort_indices()
    else:
        A = _real_array(X, name, where, "a 2-D array of real numbers (or a scipy.sparse "
                        "matrix)")
        if A.ndim != 2:
            raise ValueError(f"{where}: {name} must be 2-dimensional, got shape {A.shape}")
    if A.shape[1] == 0:
        raise ValueError(f"{where}: {name} has no columns (dimension 0), shape {A.shape}")
    return A


def first_nonfinite(arr):
    """Index (a tuple) of the first NaN or inf of a dense or scipy.sparse array in
    row-major order, or None."""
    if sp.issparse(arr):
        A = sp.csr_array(arr)
        A.sort_indices()
        bad = np.flatnonzero(~np.isfinite(A.data))
        if not bad.size:
            return None
        row = int(np.searchsorted(A.indptr, bad[0], side="right")) - 1
        return row, int(A.indices[bad[0]])
    bad = ~np.isfinite(arr)
    return tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else None


_NEGATE = {"affine": "affine", "convex": "concave", "concave": "convex",
           "nonconvex": "nonconvex"}


def _total(parts):
    """The sum of Hessian parts; None as soon as one of them is unavailable."""
    out = 0.0
    for part in parts:
        if part is None:
            return None
        out = out + part
    return out


def _sum_curvature(terms, weights):
    """The curvature of Σₖ aₖ fₖ: affine if every term with aₖ ≠ 0 is, the one kind of the
    others (a negative weight flips it) if they agree, else nonconvex."""
    kind = "affine"
    for f, a in zip(terms, weights):
        if a == 0:
            continue
        k = f.curvature if a > 0 else _NEGATE[f.curvature]
        if k == "affine" or k == kind:
            continue
        if kind != "affine":
            return "nonconvex"
        kind = k
    return kind


class Function:
    """Base class; subclasses implement ``value``, ``grad`` and (where cheap) ``hess``."""

    dim: int | None = None     # input dimension d (None: unknown, e.g. Custom without dim)
    size: int | None = None    # None: scalar-valued; m: vector-valued in Rᵐ
    curvature: str = "convex"
    n_samples: int = 0         # rows of data behind this function (for ρᵢ ∝ Nᵢ)
    quadratic: bool = False    # at most quadratic: the Hessian does not depend on w
    #: hessvec forms the d×d Hessian (the default product below); False where the
    #: function has products of its own
    dense_products: bool = True

    # -- evaluation -------------------------------------------------------------------
    def value(self, w):
        raise NotImplementedError

    def grad(self, w):
        raise NotImplementedError

    def hess(self, w, y=None):
        return None

    def hessvec(self, w, v, y=None):
        """``∇²f(w) v`` (times ``y``, or ``Σⱼ yⱼ ∇²fⱼ(w) v`` for a vector function), or
        None when no Hessian is available.  Cheap overrides avoid the d×d matrix."""
        H = self.hess(w, y)
        return None if H is None else H @ v

    def hessvecs(self, w, V, y=None):
        """:meth:`hessvec` of each row of V (m × d): an m × d array, or None.  Row losses
        override it with one pass over their rows for the whole block."""
        out = [self.hessvec(w, v, y) for v in V]
        return None if any(h is None for h in out) else np.array(out)

    def value_grad(self, w):
        return self.value(w), self.grad(w)

    def rescaled(self, D):
        """``x ↦ f(Dx)`` for a positive diagonal D (the vector ``D``): a change of
        variables w = Dx (:mod:`constrfl.scaling`).  Subclasses holding data return the
        same kind of function on scaled data; this default wraps."""
        return Rescaled(self, D)

    def minibatch_grad(self, w, rng, batch_size=None):
        """Gradient on ``batch_size`` of this function's rows drawn without replacement
        by ``rng`` (the full gradient for ``None``, or for functions without rows)."""
        return self.grad(w)

    # -- properties -------------------------------------------------------------------
    @property
    def is_convex(self) -> bool:
        return self.curvature in ("affine", "convex")

    @property
    def is_affine(self) -> bool:
        return self.curvature == "affine"

    def cvxpy(self, w):
        raise NoCvxpyForm(f"{type(self).__name__} has no cvxpy form")

    def data(self):
        """``(name, array)`` pairs of the data this function holds (for checks)."""
        return []

    def check_finite(self):
        """Raise ValueError naming the first non-finite data array, if any (not again
        for rows a template checked: :meth:`_RowLoss.of_checked_rows`)."""
        if getattr(self, "_finite", False):
            return
        for name, arr in self.data():
            where = first_nonfinite(arr)
            if where is not None:
                raise ValueError(f"{type(self).__name__}: {name} contains NaN or inf "
                                 f"(first at index {where})")

    # -- arithmetic -------------------------------------------------------------------
    def __add__(self, other):
        return (self if isinstance(self, Sum) else Sum([self], [1.0]))._add(other)

    __radd__ = __add__

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other

    def __neg__(self):
        return (-1.0) * self

    def __mul__(self, a):
        if not isinstance(a, numbers.Real) or not np.isfinite(a):
            return NotImplemented
        return Sum([self], [float(a)])

    __rmul__ = __mul__


class Sum(Function):
    """``Σₖ aₖ fₖ(w) + offset`` (built by the arithmetic operators)."""

    def __init__(self, terms, weights, offset=0.0):
        self.terms, self.weights = list(terms), [float(a) for a in weights]
        self.offset = offset
        self.size, self.dim = self.terms[0].size, self.terms[0].dim
        if len(self.terms) > 1:
            sizes = {f.size for f in self.terms}
            if len(sizes) > 1:
                raise ValueError(f"cannot combine functions with output sizes "
                                 f"{sorted(map(str, sizes))}")
            dims = {f.dim for f in self.terms} - {None}
            if len(dims) > 1:
                raise ValueError(f"cannot combine functions of input dimensions {sorted(dims)}")
            self.dim = dims.pop() if dims else None
        if type(offset) is not float and np.ndim(offset) and (
                self.size is None or np.shape(offset) != (self.size,)):
            raise ValueError(f"constant of shape {np.shape(offset)} does not match output "
                             f"size {self.size}")
        self.curvature = _sum_curvature(self.terms, self.weights)
        self.n_samples = sum(f.n_samples for f in self.terms)

    def _add(self, other):
        if isinstance(other, Function):
            o_terms, o_w, o_off = ((other.terms, other.weights, other.offset)
                                   if isinstance(other, Sum) else ([other], [1.0], 0.0))
            return Sum(self.terms + o_terms, self.weights + o_w, self.offset + o_off)
        const = _real_array(other, "the constant", "adding to a Function",
                            "a real number or an array of real numbers")
        if not np.all(np.isfinite(const)):
            raise ValueError("cannot add a NaN or inf constant to a function")
        return Sum(self.terms, self.weights, self.offset + (const if const.ndim else float(const)))

    def __mul__(self, a):
        if not isinstance(a, numbers.Real) or not np.isfinite(a):
            return NotImplemented
        return Sum(self.terms, [a * b for b in self.weights], a * self.offset)

    __rmul__ = __mul__

    def rescaled(self, D):
        return Sum([f.rescaled(D) for f in self.terms], self.weights, self.offset)

    def value(self, w):
        return sum(a * f.value(w) for f, a in zip(self.terms, self.weights)) + self.offset

    def grad(self, w):
        return sum(a * f.grad(w) for f, a in zip(self.terms, self.weights))

    def value_grad(self, w):
        v, g = self.offset, 0.0
        for f, a in zip(self.terms, self.weights):
            fv, fg = f.value_grad(w)
            v, g = v + a * fv, g + a * fg
        return v, g

    def hess(self, w, y=None):
        return _total(f.hess(w, a if y is None else a * y) for f, a in zip(self.terms, self.weights))

    def hessvec(self, w, v, y=None):
        return _total(f.hessvec(w, v, a if y is None else a * y)
                      for f, a in zip(self.terms, self.weights))

    def hessvecs(self, w, V, y=None):
        return _total(f.hessvecs(w, V, a if y is None else a * y)
                      for f, a in zip(self.terms, self.weights))

    def minibatch_grad(self, w, rng, batch_size=None):
        return sum(a * f.minibatch_grad(w, rng, batch_size)
                   for f, a in zip(self.terms, self.weights))

    @property
    def quadratic(self):
        return all(f.quadratic for f in self.terms)

    @property
    def dense_products(self):
        return any(f.dense_products for f in self.terms)

    def cvxpy(self, w):
        return sum(a * f.cvxpy(w) for f, a in zip(self.terms, self.weights)) + self.offset

    def data(self):
        return [(f"term {k}: {name}", arr) for k, f in enumerate(self.terms)
                for name, arr in f.data()]

    def check_finite(self):
        for f in self.terms:
            f.check_finite()

    def __repr__(self):
        parts = " + ".join(f"{a:g}*{f!r}" for f, a in zip(self.terms, self.weights))
        return f"({parts} + {self.offset})" if np.any(self.offset) else f"({parts})"


class Quadratic(Function):
    """``f(w) = ½ wᵀAw + bᵀw + c`` (A symmetrized; convex iff A ⪰ 0)."""

    quadratic = True
    dense_products = False

    def __init__(self, A, b=None, c=0.0):
        A = _as_float_array(A, "A", "Quadratic", ndim=2)
        if A.shape[0] != A.shape[1]:
            raise ValueError(f"Quadratic: A must be square, got shape {A.shape}")
        self.A = np.ascontiguousarray(0.5 * (A + A.T))
        self.dim = A.shape[0]
        self.b = (np.zeros(self.dim) if b is None
                  else _as_float_array(b, "b", "Quadratic", ndim=1))
        if self.b.shape != (self.dim,):
            raise ValueError(f"Quadratic: b has shape {self.b.shape}, expected ({self.dim},)")
        self.c = float(c)
        eig = np.linalg.eigvalsh(self.A) if np.all(np.isfinite(self.A)) else np.array([np.nan])
        scale = max(1.0, float(np.max(np.abs(eig)))) if eig.size else 1.0
        if not np.any(self.A):
            self.curvature = "affine"
        elif eig.min() >= -1e-12 * scale:
            self.curvature = "convex"
        elif eig.max() <= 1e-12 * scale:
            self.curvature = "concave"
        else:
            self.curvature = "nonconvex"

    def value(self, w):
        return 0.5 * w @ (self.A @ w) + self.b @ w + self.c

    def grad(self, w):
        return self.A @ w + self.b

    def hess(self, w, y=None):
        return self.A if y is None else y * self.A

    def hessvec(self, w, v, y=None):
        Av = self.A @ v
        return Av if y is None else y * Av

    def rescaled(self, D):
        return Quadratic(D[:, None] * self.A * D[None, :], D * self.b, self.c)

    def cvxpy(self, w):
        import cvxpy as cp
        if self.curvature == "affine":
            return self.b @ w + self.c
        if self.curvature != "convex":
            raise NoCvxpyForm("Quadratic with indefinite A has no convex cvxpy form")
        lam, V = np.linalg.eigh(self.A)
        keep = lam > 1e-14 * max(1.0, lam.max())
        R = np.sqrt(lam[keep])[:, None] * V[:, keep].T      # A = RᵀR
        return 0.5 * cp.sum_squares(R @ w) + self.b @ w + self.c

    def data(self):
        return [("A", self.A), ("b", self.b), ("c", np.array(self.c))]

    def __repr__(self):
        return f"Quadratic(d={self.dim})"


class Affine(Function):
    """``h(w) = Cw + d``: vector-valued for a 2-D ``C`` (m, d), scalar for a 1-D ``C``."""

    dense_products = False

    curvature = "affine"
    quadratic = True

    def __init__(self, C, d=None):
        self.C = _as_float_array(C, "C", "Affine", ndim=(1, 2))
        self.dim = self.C.shape[-1]
        self.size = None if self.C.ndim == 1 else self.C.shape[0]
        shape = () if self.size is None else (self.size,)
        self.d = np.zeros(shape) if d is None else _real_array(d, "d", "Affine")
        if self.d.shape != shape:
            raise ValueError(f"Affine: d has shape {self.d.shape}, expected {shape}")

    def value(self, w):
        return self.C @ w + self.d

    def grad(self, w):
        return self.C

    def hess(self, w, y=None):
        return np.zeros((self.dim, self.dim))

    def hessvec(self, w, v, y=None):
        return np.zeros(self.dim)

    def rescaled(self, D):
        return Affine(self.C * D, self.d)

    def cvxpy(self, w):
        return self.C @ w + self.d

    def data(self):
        return [("C", self.C), ("d", self.d)]

    def __repr__(self):
        return f"Affine(m={self.size}, d={self.dim})"


class SquaredNorm(Function):
    """``f(w) = ‖Aw − b‖²`` (no ½): ``A = None`` is the identity, ``b = None`` zero.

    ``∇f = 2Aᵀ(Aw − b)``, ``∇²f = 2AᵀA`` (constant: ``quadratic``), convex.  With the
    identity, ``fn.SquaredNorm() - r**2 ≤ 0`` is the ball ``‖w‖ ≤ r`` as a smooth
    constraint of any client or of the server (``prox.L2Ball`` is the same set as P).
    The input dimension is ``A``'s column count, else ``len(b)``, else taken from
    the other functions of the problem.
    """

    quadratic = True
    dense_products = False

    def __init__(self, A=None, b=None):
        self.A = None if A is None else _as_float_array(A, "A", "SquaredNorm", ndim=2)
        self.b = None if b is None else _as_float_array(b, "b", "SquaredNorm", ndim=1)
        if self.A is not None:
            self.dim = self.A.shape[1]
            if self.dim == 0:
                raise ValueError("SquaredNorm: A has no columns (dimension 0)")
            rows = self.A.shape[0]
        else:
            self.dim = None if self.b is None else self.b.shape[0]
            rows = self.dim
        if self.b is not None and self.b.shape != (rows,):
            raise ValueError(f"SquaredNorm: b has shape {self.b.shape}, expected ({rows},) "
                             f"to match A of shape {self.A.shape}")
        if self.A is not None and not np.any(self.A):
            self.curvature = "affine"                  # a constant ‖b‖²
        self._H = None if self.A is None else 2.0 * (self.A.T @ self.A)

    def _residual(self, w):
        r = w if self.A is None else self.A @ w
        return r if self.b is None else r - self.b

    def value(self, w):
        r = self._residual(w)
        return float(r @ r)

    def grad(self, w):
        r = self._residual(w)
        return 2.0 * (r if self.A is None else self.A.T @ r)

    def value_grad(self, w):
        r = self._residual(w)
        return float(r @ r), 2.0 * (r if self.A is None else self.A.T @ r)

    def hess(self, w, y=None):
        H = 2.0 * np.eye(np.shape(w)[0]) if self._H is None else self._H
        return H if y is None else y * H

    def hessvec(self, w, v, y=None):
        Hv = 2.0 * (v if self.A is None else self.A.T @ (self.A @ v))
        return Hv if y is None else y * Hv

    def cvxpy(self, w):
        import cvxpy as cp
        r = w if self.A is None else self.A @ w
        return cp.sum_squares(r if self.b is None else r - self.b)

    def data(self):
        return [(k, a) for k, a in (("A", self.A), ("b", self.b)) if a is not None]

    def __repr__(self):
        return f"SquaredNorm(d={self.dim})"


class _RowLoss(Function):
    """Common checks for losses over data rows ``(X, y)`` with optional sample weights.

    ``X`` is a 2-D array or any ``scipy.sparse`` matrix; sparse input is kept as a CSR
    ``csr_array`` (``self.X``) and handed to the kernels as its CSR arrays, never
    densified.  The kernels give bit-identical results on a dense X and on its CSR
    (see :mod:`constrfl.kernels`), so sparse and dense input define the same function.
    """

    dense_products = False

    @classmethod
    def of_checked_rows(cls, X, y, as_csr=None):
        """The loss of rows a template has checked already (X from
        :func:`as_data_matrix` and finite, y float64 of one entry per row, unit
        weights): the checks are not repeated for each client (O(rows + clients) to
        build a problem).  ``as_csr``: whether the kernels take a dense X as its CSR
        (None: decided from X's density, as the constructor does; the results are the
        same either way)."""
        out = object.__new__(cls)
        out.X, out.y = X, y
        n, out.dim = X.shape
        out.s, out.n_samples, out._finite = np.ones(n), n, True
        out._kernel_rows(as_csr)
        return out

    def __init__(self, X, y, sample_weight, name):
        self.X = as_data_matrix(X, name)
        self.y = _as_float_array(y, "y", name, ndim=1)
        n, self.dim = self.X.shape
        if n == 0:
            raise ValueError(f"{name}: X has no rows")
        if self.y.shape != (n,):
            raise ValueError(f"{name}: y has shape {self.y.shape}, expected ({n},) "
                             f"to match X of shape {self.X.shape}")
        if sample_weight is None:
            self.s = np.ones(n)
        else:
            self.s = _as_float_array(sample_weight, "sample_weight", name, ndim=1)
            if self.s.shape != (n,):
                raise ValueError(f"{name}: sample_weight has shape {self.s.shape}, "
                                 f"expected ({n},)")
            if np.any(self.s < 0) or not self.s.sum() > 0:
                raise ValueError(f"{name}: sample_weight must be non-negative with a "
                                 "positive sum")
        self.n_samples = n
        self._kernel_rows()

    def _weighted_gram(self, weights, V, y=None):
        """``(1/S) Xᵀ diag(weights) X`` times each row of V (times ``y``): the row
        losses' Hessian products for a block, two products with X."""
        out = np.asarray((self.X.T @ (weights[:, None] * (self.X @ V.T))).T) / np.sum(self.s)
        return out if y is None else y * out

    def _kernel_rows(self, as_csr=None):
        """What the kernels are given: scipy.sparse input as its CSR; a dense X itself,
        or its CSR when X is sparse enough for that to be faster (the kernels give the
        same results on both)."""
        if sp.issparse(self.X):
            self._Xk = kernels.CSR.from_scipy(self.X)
        elif as_csr if as_csr is not None else (
                np.count_nonzero(self.X) <= kernels.CSR_MAX_DENSITY * self.X.size):
            self._Xk = kernels.CSR.from_dense(self.X)
        else:
            self._Xk = self.X

    def data(self):
        return [("X", self.X), ("y", self.y), ("sample_weight", self.s)]

    def rescaled(self, D):
        X = self.X @ sp.diags_array(D) if sp.issparse(self.X) else self.X * D
        return type(self)(X, self.y, self.s)

    def minibatch_grad(self, w, rng, batch_size=None):
        if batch_size is None or batch_size >= self.n_samples:
            return self.grad(w)
        idx = np.sort(rng.choice(self.n_samples, size=batch_size, replace=False))
        return self._grad_rows(self._Xk, self.y, self.s, w, idx.astype(np.int64))

    def __repr__(self):
        return f"{type(self).__name__}(n={self.n_samples}, d={self.dim})"


class LeastSquares(_RowLoss):
    """``f(w) = (1/S) Σⱼ sⱼ ½(xⱼᵀw − yⱼ)²``, ``S = Σⱼ sⱼ`` (the mean for unit weights)."""

    quadratic = True

    def __init__(self, X, y, sample_weight=None):
        super().__init__(X, y, sample_weight, "LeastSquares")
        self._H = None

    _grad_rows = staticmethod(kernels.lsq_grad_rows)

    def value(self, w):
        return kernels.lsq_value_grad(self._Xk, self.y, self.s, w)[0]

    def grad(self, w):
        return kernels.lsq_value_grad(self._Xk, self.y, self.s, w)[1]

    def value_grad(self, w):
        return kernels.lsq_value_grad(self._Xk, self.y, self.s, w)

    def hess(self, w, y=None):
        if self._H is None:
            self._H = kernels.lsq_hess(self._Xk, self.s)
        return self._H if y is None else y * self._H

    def hessvec(self, w, v, y=None):
        Hv = kernels.lsq_hessvec(self._Xk, self.s, v)
        return Hv if y is None else y * Hv

    def hessvecs(self, w, V, y=None):
        return self._weighted_gram(self.s, V, y)

    def cvxpy(self, w):
        import cvxpy as cp
        r = np.sqrt(self.s)
        return 0.5 / self.s.sum() * cp.sum_squares(cp.multiply(r, self.X @ w) - r * self.y)


class LogisticLoss(_RowLoss):
    """Mean logistic loss (31), labels in {0, 1}:
    ``f(w) = (1/S) Σⱼ sⱼ [log(1 + exp(xⱼᵀw)) − yⱼ xⱼᵀw]``."""

    def __init__(self, X, y, sample_weight=None):
        super().__init__(X, y, sample_weight, "LogisticLoss")
        if not np.all((self.y == 0) | (self.y == 1) | ~np.isfinite(self.y)):
            raise ValueError("LogisticLoss: y must hold labels in {0, 1}")

    _grad_rows = staticmethod(kernels.logistic_grad_rows)

    def value(self, w):
        return kernels.logistic_value(self._Xk, self.y, self.s, w)

    def grad(self, w):
        return kernels.logistic_value_grad(self._Xk, self.y, self.s, w)[1]

    def value_grad(self, w):
        return kernels.logistic_value_grad(self._Xk, self.y, self.s, w)

    def hess(self, w, y=None):
        H = kernels.logistic_value_grad_hess(self._Xk, self.y, self.s, w)[2]
        return H if y is None else y * H

    def hessvec(self, w, v, y=None):
        Hv = kernels.logistic_hessvec(self._Xk, self.y, self.s, w, v)
        return Hv if y is None else y * Hv

    def hessvecs(self, w, V, y=None):
        sigma = expit(self.X @ w)
        return self._weighted_gram(self.s * sigma * (1.0 - sigma), V, y)

    def cvxpy(self, w):
        import cvxpy as cp
        z = self.X @ w
        return (cp.sum(cp.multiply(self.s, cp.logistic(z)))
                - (self.s * self.y) @ z) / self.s.sum()


def _numbers(x, name):
    """A user function's result as float64 (None is a fault of the function, not a NaN:
    ``np.asarray(None, float)`` would be one)."""
    if x is None:
        raise TypeError(f"{name} returned None")
    return np.asarray(x, dtype=np.float64)


class Custom(Function):
    """User code: ``value(w)``, ``grad(w)`` and optionally ``hess(w)``.

    ``size=m`` declares a vector-valued function (``grad`` then returns the (m, d)
    Jacobian and ``hess(w)``, if given, the (m, d, d) stack of component Hessians).
    ``convex`` is the user's claim; ``Custom`` has no cvxpy form.
    """

    def __init__(self, value, grad, hess=None, *, dim=None, size=None, convex=True):
        for name, f in (("value", value), ("grad", grad), ("hess", hess)):
            if f is not None and not callable(f):
                raise TypeError(f"Custom: {name} must be callable, got {type(f).__name__}")
        self._value, self._grad, self._hess = value, grad, hess
        self.dim, self.size = dim, size
        self.curvature = "convex" if convex else "nonconvex"

    def value(self, w):
        v = _numbers(self._value(w), "value")
        return float(v) if self.size is None and v.ndim == 0 else v   # shapes: checked by the party

    def grad(self, w):
        return _numbers(self._grad(w), "grad")

    def hess(self, w, y=None):
        if self._hess is None:
            return None
        H = _numbers(self._hess(w), "hess")
        if self.size is None:
            return H if y is None else y * H
        return np.tensordot(np.asarray(y, dtype=np.float64), H, axes=1)

    def __repr__(self):
        return f"Custom({getattr(self._value, '__name__', 'value')})"


class Cached(Function):
    """``f`` itself, evaluated once per point wherever it is used: value, gradient and
    Hessian at the last ``w`` are reused while the values of ``w`` repeat.  For a loss
    that sits in several functions of one party, evaluated at one point in turn (the
    fairness template's subgroup losses: its objective and both constraints).
    Scalar-valued ``f`` only; results are copies, so callers may write to them."""

    def __init__(self, f):
        if not isinstance(f, Function) or f.size is not None:
            raise TypeError(f"Cached: f must be a scalar-valued constrfl Function, got {f!r}")
        self.f = f
        self.dim, self.curvature, self.n_samples = f.dim, f.curvature, f.n_samples
        self.quadratic, self.dense_products = f.quadratic, f.dense_products
        self._w = self._vg = self._H = None

    def _at(self, w):
        if self._w is None or not np.array_equal(self._w, w):
            self._w, self._vg, self._H = np.array(w, dtype=np.float64), None, None

    def value_grad(self, w):
        self._at(w)
        if self._vg is None:
            self._vg = self.f.value_grad(w)
        v, g = self._vg
        return v, np.array(g, dtype=np.float64)

    def value(self, w):
        return self.value_grad(w)[0]

    def grad(self, w):
        return self.value_grad(w)[1]

    def hess(self, w, y=None):
        self._at(w)
        if self._H is None:
            self._H = self.f.hess(w)
        if self._H is None:
            return None
        return self._H.copy() if y is None else y * self._H

    def hessvec(self, w, v, y=None):
        return self.f.hessvec(w, v, y)

    def hessvecs(self, w, V, y=None):
        return self.f.hessvecs(w, V, y)

    def minibatch_grad(self, w, rng, batch_size=None):
        return self.f.minibatch_grad(w, rng, batch_size)

    def cvxpy(self, w):
        return self.f.cvxpy(w)

    def data(self):
        return self.f.data()

    def check_finite(self):
        self.f.check_finite()

    def __repr__(self):
        return f"Cached({self.f!r})"


class Rescaled(Function):
    """``x ↦ f(Dx)`` (D a positive diagonal, the vector ``D``): the chain rule
    ``∇ = D∇f(Dx)``, ``∇² = D∇²f(Dx)D`` (rows of a vector f's Jacobian times D)."""

    def __init__(self, f, D):
        self.f, self.D = f, np.asarray(D, dtype=np.float64)
        self.dim, self.size, self.curvature = f.dim, f.size, f.curvature
        self.n_samples, self.quadratic = f.n_samples, f.quadratic
        self.dense_products = f.dense_products

    def value(self, w):
        return self.f.value(self.D * w)

    def grad(self, w):
        return self.f.grad(self.D * w) * self.D

    def value_grad(self, w):
        v, g = self.f.value_grad(self.D * w)
        return v, g * self.D

    def hess(self, w, y=None):
        H = self.f.hess(self.D * w, y)
        return None if H is None else self.D[:, None] * H * self.D[None, :]

    def hessvec(self, w, v, y=None):
        Hv = self.f.hessvec(self.D * w, self.D * v, y)
        return None if Hv is None else self.D * Hv

    def hessvecs(self, w, V, y=None):
        HV = self.f.hessvecs(self.D * w, V * self.D, y)
        return None if HV is None else HV * self.D

    def minibatch_grad(self, w, rng, batch_size=None):
        return self.f.minibatch_grad(self.D * w, rng, batch_size) * self.D

    def cvxpy(self, w):
        import cvxpy as cp
        return self.f.cvxpy(cp.multiply(self.D, w))

    def data(self):
        return self.f.data()

    def __repr__(self):
        return f"Rescaled({self.f!r})"
