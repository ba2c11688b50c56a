"""Federated equilibration of problem (5) (docs/algorithms.md §8a): one pass of Ruiz's
scaling (Ruiz 2001; as OSQP, ProxQP and Clarabel scale a QP), without moving data.

The change of variables w = Dx (D > 0 diagonal), each party's constraint rows times its
own eᵢ > 0 and the objective (every fⱼ and P) times c > 0 give the same problem

    min_x  c·Σⱼ fⱼ(Dx) + c·P(Dx)   s.t.  eᵢ∘cᵢ(Dx) ≤ 0,  eᵢ∘hᵢ(Dx) = 0:

x solves it with multipliers μ̃ iff w = Dx solves (5) with μᵢ = eᵢ∘μ̃ᵢ/c (divide its
Lagrangian by c).  Who computes what:

* at the start point w⁰ every party reports the squares of the column maxima of
  |∇²fᵢ(w⁰)| and of its constraint Jacobian |Jᵢ(w⁰)| and its objective's linear term
  ∇fᵢ(0) (one round, ``scale.stats``; 3d sums), and sets its row scales
  eᵢⱼ = 1/√‖Jᵢⱼ(w⁰)‖∞ itself (Ruiz's row step; no communication);
* the server takes the column norms over the parties from the sums, nⱼ = √(Σᵢ mᵢⱼ²)
  (between the largest mᵢⱼ and √n times it: the server sees sums, not a party's
  maximum), Dⱼ = 1/√nⱼ (Ruiz's column step) and c = 1/max(meanⱼ Dⱼ²·n^H_j,
  ‖D∇f(0)‖∞), clipped to ``COST_RANGE`` (OSQP's cost scaling), and sends D and c with
  the first subproblem;
* each party then evaluates its functions scaled (:func:`scaled_party`) and reports its
  KKT shares **in the user's units** (its own functions at w = Dx with μ = e∘μ̃/c), so
  statuses, residuals, multipliers and ``cf.kkt`` never see the scaling.

Norms below ``MIN_NORM`` count as 1; every factor is a power of two (w = Dx, the box
lo/D and the multipliers are then exact).  D ≡ 1 unless P is separable
(:meth:`~constrfl.prox.Regularizer.pieces`); the objective is scaled only when P is
separable or an indicator (a ball).

This (``scaling=True``) is not the default: the proximal AL is not scale-invariant in
the way an interior point method is.  Its proximal term ‖x − xᵏ‖²/(2η) weighs against
the scaled objective's curvature, and Ruiz's scaling can shrink that curvature by
orders of magnitude: docs/algorithms.md §8a has the measurements.  The default,
``scaling="rows"``, is the row step alone, where it matters (:func:`row_scaling`): each
party scales its own rows whose gradient norm at w⁰ lies outside [1/``ROW_RANGE``,
``ROW_RANGE``], with no round, no change of variables, D = 1 and c = 1.
"""
from __future__ import annotations

import numpy as np

from .messages import MessageType as M
from .functions import Affine
from .problem import Party
from .prox import L1Ball, L2Ball, Piecewise, Zero, rescaled_pieces

__all__ = ["column_stats", "row_scales", "row_scaling", "equilibrate", "scaled_party",
           "scaled_regularizer", "Scaled", "ScaledView", "RowScaledView", "federated_scaling",
           "MIN_NORM", "COST_RANGE", "ROW_RANGE"]

MIN_NORM = 1e-4             # norms below this count as 1 (OSQP's MIN_SCALING)
COST_RANGE = (1e-4, 1e4)    # the objective's factor c is clipped to this range
MAX_HESSIAN_DIM = 2000      # above it the Hessian's columns are not measured
#: ``scaling="rows"`` scales the rows whose gradient norm at w⁰ lies outside
#: [1/ROW_RANGE, ROW_RANGE]
ROW_RANGE = 16.0


def _power_of_two(factor):
    """``factor`` rounded to a power of two (w = Dx and its inverse are then exact)."""
    return np.exp2(np.round(np.log2(factor)))


def _inverse_sqrt(norms):
    norms = np.asarray(norms, dtype=np.float64)
    return _power_of_two(1.0 / np.sqrt(np.where(norms < MIN_NORM, 1.0, norms)))


def _jacobian(party, w):
    """|Jᵢ(w)|: the absolute values of the party's stacked constraint Jacobian."""
    return np.abs(np.vstack([party.c_value_jac(w)[1], party.h_jac(w)]))


def row_scales(party, w, far=None, J=None):
    """The party's row scales ``(e_ineq, e_eq)``: 1/√‖Jᵢⱼ(w)‖∞ (Ruiz's row step), one
    per slot that is not scaled row by row (:func:`_row_by_row`); with ``far`` = R only
    for the rows whose norm lies outside [1/R, R], the others 1."""
    J = _jacobian(party, w) if J is None else J
    norms = np.max(J, axis=1, initial=0.0)
    rows = _inverse_sqrt(norms)
    if far is not None:
        rows[(norms <= far) & ((norms >= 1.0 / far) | (norms < MIN_NORM))] = 1.0
    start = 0
    for f, m in zip(party.constraints + party.equalities, party.ineq_sizes + party.eq_sizes):
        if not _row_by_row(f):                  # one factor for the slot: its least
            rows[start:start + m] = np.min(rows[start:start + m])
        start += m
    return rows[:party.n_ineq], rows[party.n_ineq:]


def row_scaling(party, w, far):
    """What a party keeps in its state for the rows-only scaling (``scaling="rows"``):
    its :func:`row_scales` with ``far``, and D = 1, c = 1 unless every factor is 1 (the
    party then works unscaled, bit for bit)."""
    e_ineq, e_eq = row_scales(party, w, far)
    scales = {"scale_rows_ineq": e_ineq, "scale_rows_eq": e_eq}
    if np.all(e_ineq == 1.0) and np.all(e_eq == 1.0):
        return scales
    return dict(scales, scale_columns=np.ones(w.size), scale_objective=1.0)


def column_stats(party, w):
    """A party's statistics at w⁰ and its row scales: ``(reply, e_ineq, e_eq)``.

    reply: ``hessian_columns_sq`` (maxⱼ|∇²fᵢ(w)|ⱼₖ)², ``jacobian_columns_sq``
    (maxⱼ|Jᵢ(w)|ⱼₖ)² and ``objective_grad`` ∇fᵢ(0), each summed over the parties; the
    row scales of :func:`row_scales`."""
    d = w.size
    H = party.f_hess(w) if d <= MAX_HESSIAN_DIM else None
    hessian_columns = (np.zeros(d) if H is None or np.ndim(H) == 0     # none measured
                       else np.max(np.abs(H), axis=0, initial=0.0))
    J = _jacobian(party, w)
    e_ineq, e_eq = row_scales(party, w, J=J)
    jacobian_columns = np.max(J, axis=0, initial=0.0)
    reply = {"hessian_columns_sq": hessian_columns ** 2,
             "jacobian_columns_sq": jacobian_columns ** 2,
             "objective_grad": np.asarray(party.f_value_grad(np.zeros(d))[1], dtype=np.float64)}
    return reply, e_ineq, e_eq


def equilibrate(sums, regularizer):
    """The server's ``(D, c)`` from the sums of the parties' :func:`column_stats`; None
    when every factor is 1 (the problem is solved as given)."""
    hess = np.sqrt(sums["hessian_columns_sq"])
    cols = np.maximum(hess, np.sqrt(sums["jacobian_columns_sq"]))
    separable = regularizer.pieces(cols.size) is not None
    D = _inverse_sqrt(cols) if separable else np.ones(cols.size)
    c = 1.0
    if separable or isinstance(regularizer, (Zero, L1Ball, L2Ball)):
        grad = sums["objective_grad"]
        size = max(float(np.mean(D * D * hess)), float(np.max(np.abs(D * grad))))
        if size >= MIN_NORM:
            c = float(_power_of_two(np.clip(1.0 / size, *COST_RANGE)))
    if np.all(D == 1.0) and c == 1.0:
        return None
    return D, c


def scaled_regularizer(P, D, c):
    """``x ↦ c·P(Dx)``: for a separable P its pieces (cqD², cλD, lo/D, hi/D) as a
    :class:`~constrfl.prox.Piecewise`; an indicator (D ≡ 1), or any P at D ≡ 1 and
    c = 1, is itself."""
    if c == 1.0 and np.all(D == 1.0):
        return P
    pieces = P.pieces(D.size)
    if pieces is None:
        if not np.all(D == 1.0) or not (c == 1.0 or isinstance(P, (Zero, L1Ball, L2Ball))):
            raise ValueError(f"{P!r} can be rescaled only by D = 1 and c = 1")
        return P
    return Piecewise(*rescaled_pieces(pieces, D, c))


def _row_by_row(f):
    """A vector affine slot is scaled row by row; any other by one factor (a scalar
    keeps f's own structure), its rows' least."""
    return isinstance(f, Affine) and f.C.ndim == 2


def _scaled_rows(functions, sizes, e):
    """``e∘f`` for each slot (:func:`_row_by_row`)."""
    out, start = [], 0
    for f, m in zip(functions, sizes):
        rows = slice(start, start + m)
        start += m
        out.append(Affine(e[rows, None] * f.C, e[rows] * f.d) if _row_by_row(f)
                   else float(e[rows.start]) * f)
    return out


class Scaled:
    """What a scaled party keeps of its user's units: the party, D, c and its row scales
    (for its KKT shares, :func:`user_units`)."""

    def __init__(self, party, D, c, e_ineq, e_eq):
        self.party, self.D, self.c, self.e_ineq, self.e_eq = party, D, c, e_ineq, e_eq

    def user_units(self, x, mu, nu):
        """``(w, μ, ν)`` in the user's units: ``(Dx, e∘μ̃/c, e∘ν̃/c)``."""
        return self.D * x, self.e_ineq * mu / self.c, self.e_eq * nu / self.c


def scaled_party(party, D, c, e_ineq, e_eq):
    """The party's functions of x: ``c·fᵢ(Dx)``, ``eᵢ∘cᵢ(Dx)``, ``eᵢ∘hᵢ(Dx)`` (built by
    the party itself from its own data; a factor of 1 leaves a function as it is, so
    the rows-only scaling copies no data but its scaled rows); ``.user`` keeps the
    original (:class:`Scaled`)."""
    unit = bool(np.all(D == 1.0))

    def moved(g):
        return g if unit else g.rescaled(D)
    f = party.objective
    if f is not None and not (unit and c == 1.0):
        f = c * moved(f)
    cons = _scaled_rows([moved(g) for g in party.constraints], party.ineq_sizes, e_ineq)
    eqs = _scaled_rows([moved(h) for h in party.equalities], party.eq_sizes, e_eq)
    out = object.__new__(type(party))
    Party.__init__(out, f, cons, eqs, party.name)
    out.user = Scaled(party, D, c, e_ineq, e_eq)
    return out


def federated_scaling(problem, fed, w0):
    """The round ``scale.stats`` at w⁰ and the server's :func:`equilibrate`: ``(D, c)``
    or None."""
    return equilibrate(fed.broadcast(M.SCALE_STATS, {"w": w0}, include_server=True),
                       problem.regularizer)


class RowScaledView:
    """The server's view under ``scaling="rows"``: the problem as given (everything is
    the problem's, :class:`~constrfl.problem.ServerView`), whose first subproblem
    message asks each party to scale its own far rows (:func:`row_scaling`; no round of
    its own, nothing the server needs to know)."""

    def __init__(self, problem):
        self.problem = problem

    def __getattr__(self, name):
        return getattr(self.problem, name)

    def begin_payload(self):
        return {"scale_rows": ROW_RANGE}


class ScaledView(RowScaledView):
    """The server's view of the scaled problem (``scaling=True``): P̃ = c·P(D·) for the
    solvers, the user's P and w = Dx for the KKT round and the result; everything else
    is the problem's."""

    def __init__(self, problem, D, c):
        super().__init__(problem)
        self.D, self.c = D, c
        self.regularizer = scaled_regularizer(problem.regularizer, D, c)

    @property
    def user_regularizer(self):
        return self.problem.regularizer

    def user_point(self, x):
        return self.D * x

    def begin_payload(self):
        """What the first subproblem's message brings the parties: D and c."""
        return {"scale_columns": self.D, "scale_objective": self.c}

