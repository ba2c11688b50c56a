"""Any convex QP as a federation: ``min ½xᵀPx + qᵀx + r  s.t.  l ≤ Ax ≤ u``.

:class:`QuadraticProgram` holds the data (e.g. a Maros–Meszaros problem from
:func:`~constrfl.problems.datasets.load_maros_meszaros`); :func:`federated_qp` deals it
to K clients, the server and the regularizer P as a federation would hold it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import functions as fn
from .. import prox
from ..problem import Client, Problem, Server
from ._args import int_arg

__all__ = ["QuadraticProgram", "federated_qp", "INFINITE_BOUND"]

#: bounds of this magnitude or more stand for ±∞ (the Maros–Meszaros files write ±1e20,
#: some with rounding in the last digits)
INFINITE_BOUND = 1e19


def _vector(a, name, size):
    v = np.asarray(a, dtype=np.float64).ravel()
    if v.shape != (size,):
        raise ValueError(f"QuadraticProgram: {name} has {v.size} entries, expected {size}")
    return v


def _bound(a, name, size, sign):
    """``a`` as a float vector with NaN refused and ``±INFINITE_BOUND`` or beyond → ±inf."""
    v = _vector(a, name, size)
    if np.isnan(v).any():
        raise ValueError(f"QuadraticProgram: {name} holds NaN")
    return np.where(sign * v >= INFINITE_BOUND, sign * np.inf, v)


@dataclass(frozen=True)
class QuadraticProgram:
    """``min ½xᵀPx + qᵀx + r  s.t.  l ≤ Ax ≤ u``.

    ``P`` (n, n; the full matrix, not a triangle) and ``A`` (m, n), dense or
    ``scipy.sparse`` (stored as CSR); ``q`` (n,); ``l``, ``u`` (m,) with
    ``|bound| ≥ INFINITE_BOUND`` read as ±∞; ``name`` a label.
    """

    P: sp.csr_array
    q: np.ndarray
    A: sp.csr_array
    l: np.ndarray
    u: np.ndarray
    r: float = 0.0
    name: str = ""

    def __post_init__(self):
        P, A = (fn.as_data_matrix(sp.csr_array(M), "QuadraticProgram", name)
                for name, M in (("P", self.P), ("A", self.A)))
        n, m = P.shape[0], A.shape[0]
        if P.shape != (n, n) or A.shape[1] != n:
            raise ValueError(f"QuadraticProgram: P {P.shape} and A {A.shape} do not match")
        l, u = _bound(self.l, "l", m, -1), _bound(self.u, "u", m, +1)
        if np.any(l > u):
            raise ValueError(f"QuadraticProgram: l > u in rows {np.flatnonzero(l > u)[:5]}")
        for name, value in (("P", P), ("A", A), ("q", _vector(self.q, "q", n)), ("l", l),
                            ("u", u), ("r", float(self.r))):
            object.__setattr__(self, name, value)

    @property
    def n(self):
        return self.P.shape[0]

    @property
    def m(self):
        return self.A.shape[0]

    def objective(self, x):
        """``½xᵀPx + qᵀx + r``."""
        return float(0.5 * x @ (self.P @ x) + self.q @ x + self.r)

    def violation(self, x):
        """Max relative constraint violation: over rows, ``max(l − aᵀx, aᵀx − u, 0)``
        divided by ``max(1, |violated bound|)``; 0 for m = 0."""
        Ax = self.A @ x
        below = np.maximum(self.l - Ax, 0.0) / np.maximum(1.0, np.abs(self.l))
        above = np.maximum(Ax - self.u, 0.0) / np.maximum(1.0, np.abs(self.u))
        return float(np.max(np.maximum(below, above), initial=0.0))


def _row_kinds(qp):
    """Row indices ``(bounds, equalities, inequalities)``: rows with one nonzero; rows
    with more and l = u; the others with a finite side. Rows without nonzeros must
    allow 0 and are dropped, as are rows with both sides infinite."""
    nnz = np.diff(qp.A.indptr)
    empty = nnz == 0
    if np.any(empty & ((qp.l > 0) | (qp.u < 0))):
        raise ValueError("federated_qp: an all-zero row of A needs l ≤ 0 ≤ u (infeasible)")
    free = ~np.isfinite(qp.l) & ~np.isfinite(qp.u)
    multi = (nnz > 1) & ~free
    return (np.flatnonzero((nnz == 1) & ~free), np.flatnonzero(multi & (qp.l == qp.u)),
            np.flatnonzero(multi & (qp.l != qp.u)))


def _box(qp, rows):
    """The intersection of the bound rows ``l ≤ a·x_j ≤ u`` (a ≠ 0; the bounds swap for
    a < 0) as a :class:`~constrfl.prox.Box`, or None without bound rows."""
    B = qp.A[rows].tocoo()
    if not B.nnz:
        return None
    row = rows[B.row]
    lo, hi = qp.l[row] / B.data, qp.u[row] / B.data
    lo, hi = np.where(B.data > 0, lo, hi), np.where(B.data > 0, hi, lo)
    lower, upper = np.full(qp.n, -np.inf), np.full(qp.n, np.inf)
    np.maximum.at(lower, B.col, lo)
    np.minimum.at(upper, B.col, hi)
    if np.any(lower > upper):
        j = np.flatnonzero(lower > upper)[0]
        raise ValueError(f"federated_qp: the bound rows on x[{j}] give {lower[j]:g} > "
                         f"{upper[j]:g} (infeasible)")
    return prox.Box(lower, upper)


def _inequalities(qp, rows):
    """``A_R x − u_R ≤ 0`` and ``l_R − A_R x ≤ 0`` over the finite sides of rows R."""
    A = qp.A[rows].toarray()
    out = []
    for sign, bound in ((1.0, qp.u[rows]), (-1.0, qp.l[rows])):
        keep = np.isfinite(bound)
        if keep.any():
            out.append(fn.Affine(sign * A[keep], -sign * bound[keep]))
    return out


def federated_qp(P, q, A, l, u, r=0.0, n_clients=3, seed=0, name=""):
    """``min ½xᵀPx + qᵀx + r  s.t.  l ≤ Ax ≤ u`` (see :class:`QuadraticProgram`) as
    problem (5), the way a federation would hold it:

    * rows of A with a single nonzero are variable bounds: their intersection is the
      regularizer ``prox.Box`` (a bound row with l = u fixes the variable);
    * equality rows (l = u) are the server's ``fn.Affine`` equalities ``A_E x − l_E = 0``;
    * the other rows are dealt to the clients after a shuffle seeded by ``seed``
      (client k gets rows k, k + K, … of it) as ``A_k x − u_k ≤ 0`` and
      ``l_k − A_k x ≤ 0`` over the finite sides;
    * every client holds ``fn.Quadratic(P/K, q/K, r/K)``, so Σₖ fₖ is the objective.

    A and P are densified for ``fn.Affine`` and ``fn.Quadratic`` (fine for n ≤ a few
    thousand). The data are kept as ``problem.qp``, a :class:`QuadraticProgram` named
    ``name``. Raises ValueError when the bound rows or an all-zero row are infeasible.
    """
    qp = QuadraticProgram(P, q, A, l, u, r, name)
    K = int_arg("federated_qp", "n_clients", n_clients)
    rng = np.random.default_rng(int_arg("federated_qp", "seed", seed, 0))
    bounds, equalities, inequalities = _row_kinds(qp)
    dealt = rng.permutation(inequalities)
    Pd = qp.P.toarray()
    clients = [Client(objective=fn.Quadratic(Pd / K, qp.q / K, qp.r / K),
                      constraints=_inequalities(qp, np.sort(dealt[k::K])), name=f"client-{k}")
               for k in range(K)]
    server = None
    if equalities.size:
        server = Server(equalities=[fn.Affine(qp.A[equalities].toarray(), -qp.l[equalities])])
    problem = Problem(clients, server=server, regularizer=_box(qp, bounds), dim=qp.n)
    problem.qp = qp
    return problem
