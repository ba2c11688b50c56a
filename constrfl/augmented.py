"""The parties' pieces of the proximal AL subproblem (9), split as in (12)–(14).

For party i with multipliers (μᵢ, νᵢ) and penalty β,

    ALᵢ(w) = fᵢ(w) + 1/(2β) (‖[μᵢ + β cᵢ(w)]₊‖² + ‖νᵢ + β hᵢ(w)‖²)

with gradient ∇fᵢ + ∇cᵢ[μᵢ + βcᵢ]₊ + ∇hᵢ(νᵢ + βhᵢ) and generalized Hessian
∇²fᵢ + β ∇c_Aᵀ∇c_A + Σⱼ [μᵢ + βcᵢ]₊ⱼ ∇²cᵢⱼ + β ∇hᵢᵀ∇hᵢ (A: rows with μ + βc > 0).
φᵢ of (12)–(14) is ALᵢ plus its share of the proximal term, added by the callers.
A smooth function here is a callable ``fun(w, order) -> (value, grad, hess)`` returning
``None`` for the parts above ``order`` (0: value, 1: gradient, 2: Hessian).
"""
from __future__ import annotations

import numpy as np

_NONE = np.zeros(0)        # the values of no constraints (never written to)
#: θ of the primal-dual weights θy + (1 − θ)p of a trial's Hessian (docs/algorithms.md
#: (N3)); measured on 72 random NP problems (3 sweeps of 24, rounds' geometric mean
#: against p's): θ = 1 1.04, 0.94, 1.04; θ = 0.75 0.93, 0.91, 0.95; θ = 0.5 0.96, 0.93,
#: 0.98; θ = 0.25 (one sweep) 0.96
PRIMAL_DUAL_SHARE = 0.75


class AugmentedTerm:
    """``ALᵢ`` of one party at fixed multipliers; evaluated by the party itself.
    ``objective=False`` leaves fᵢ out (the violation term of the infeasibility check).
    The Hessian is None when a function that enters it has none."""

    def __init__(self, party, beta, mu, nu, objective=True):
        self.party, self.beta, self.mu, self.nu = party, beta, mu, nu
        self.objective = objective
        self._last = None          # (w, cᵢ(w), hᵢ(w)) of the last evaluation

    def __call__(self, w, order=2, around=None):
        """``(value, gradient, Hessian)`` at w as ``order`` asks.  ``around``: the point
        x of the last Newton step x → w; the Hessian then weighs the active rows' ∇²cⱼ
        by θyⱼ + (1 − θ)pⱼ, yⱼ = [μⱼ + β(cⱼ(x) + ∇cⱼ(x)ᵀ(w − x))]₊ the multipliers
        linearized from x, in place of pⱼ = [μⱼ + βcⱼ(w)]₊ (θ = 1: the primal-dual Newton
        matrix of the subproblem; θ = :data:`PRIMAL_DUAL_SHARE`; docs/algorithms.md (N3)),
        for a party whose inequalities are convex
        (:attr:`~constrfl.problem.Party.convex_curved_inequalities`); value and gradient
        are the same."""
        party, beta = self.party, self.beta
        if not (order >= 2 and party.convex_curved_inequalities):
            around = None
        fused = None if party.stacked is None else party.stacked.augmented(
            w, order, beta, self.mu, self.objective, around, PRIMAL_DUAL_SHARE)
        if fused is not None:                 # one pass over the party's rows
            val, g, H, c = fused
        else:              # function by function (and the errors naming the slot)
            val, g, H, c = self._by_function(
                w, order, None if around is None else self.linearized(w, around))
        h = _NONE
        if party.n_eq:
            h = party.h_value(w)
            r, penalty = self._equality_penalty(h)
            val += penalty
            if order >= 1:
                J = party.h_jac(w)
                g = g + J.T @ r
                if H is not None:
                    H += beta * (J.T @ J)
        self._last = w, c, h
        return val, (g if order >= 1 else None), H

    def _equality_penalty(self, h):
        """``r = νᵢ + βhᵢ`` and its share ``‖r‖²/2β`` of ALᵢ."""
        r = self.nu + self.beta * h
        return r, (r @ r) / (2 * self.beta)

    def linearized(self, w, x):
        """y = [μ + β(cᵢ(x) + ∇cᵢ(x)(w − x))]₊: step 3's multipliers at w with cᵢ
        linearized at x (the primal-dual iterate of a Newton step x → w)."""
        c, J = self.party.c_value_jac(x)
        return np.maximum(self.mu + self.beta * (c + J @ (w - x)), 0.0)

    def _by_function(self, w, order, curvature=None):
        """fᵢ + ‖[μ + βcᵢ]₊‖²/2β and its derivatives, one function call at a time
        (``curvature``: multipliers y, the active rows' ∇²cⱼ then weighted by θyⱼ +
        (1 − θ)pⱼ, θ = :data:`PRIMAL_DUAL_SHARE`; None: by pⱼ)."""
        party, beta = self.party, self.beta
        val, g, H = 0.0, None, None
        c = _NONE
        if self.objective:
            if order >= 1:
                val, g = party.f_value_grad(w)
            else:
                val = party.f_value(w)
        if order >= 1 and g is None:
            g = np.zeros(w.size)
        if order >= 2:
            H = party.f_hess(w) if self.objective else 0.0
            if H is not None:                 # this call's own array, added to in place
                H = H.copy() if isinstance(H, np.ndarray) else np.full((w.size, w.size), H)
        if party.n_ineq:
            if order >= 1:
                c, J = party.c_value_jac(w)
            else:
                c = party.c_value(w)
            p = np.maximum(self.mu + beta * c, 0.0)
            val += (p @ p) / (2 * beta)
            if order >= 1 and p.any():
                g = g + J.T @ p
                if H is not None:
                    JA = J[p > 0]
                    Hc = party.c_hess(w, p if curvature is None else np.where(
                        p > 0, PRIMAL_DUAL_SHARE * curvature + (1 - PRIMAL_DUAL_SHARE) * p,
                        0.0))
                    if Hc is None:
                        H = None
                    else:                     # H is this call's own array: added in place
                        # one active row: an outer product (a BLAS gemm would start threads)
                        H += beta * (np.outer(JA[0], JA[0]) if len(JA) == 1 else JA.T @ JA)
                        H += Hc
        return val, g, H, c

    def values(self, W):
        """ALᵢ at each row of W (values only; the last evaluation stays as it was)."""
        if not len(W):
            return np.zeros(0)
        party = self.party
        out = None if party.stacked is None else party.stacked.values(
            W, self.beta, self.mu, self.objective)
        if out is None:
            out = np.array([self._by_function(w, 0)[0] for w in W], dtype=np.float64)
        if party.n_eq:
            out += [self._equality_penalty(party.h_value(w))[1] for w in W]
        return out

    def constraint_values(self, w):
        """``(cᵢ(w), hᵢ(w))``, taken from the last evaluation when it was at this very
        array w (no second pass over the constraints' data)."""
        if self._last is not None and self._last[0] is w:
            return self._last[1:]
        return self.party.c_value(w), self.party.h_value(w)

    def hessvec(self, w, v):
        """The generalized Hessian times v, without forming it (None when a function
        that enters it has no Hessian)."""
        return self._products(w, v, self.party.f_hessvec, self.party.c_hessvec)

    def hessian_operator(self, w):
        """v ↦ ∇²ALᵢ(w)v at a fixed w (the local Newton-CG's products): for stacked row
        losses without equalities, their (B4) weights once and then two passes over the
        rows a product (:meth:`~constrfl.stacked.StackedRows.hessian_weights`; the same
        products as :meth:`hessvec`'s up to rounding, at about half the cost); else
        :meth:`hessvec`'s products, the active constraint rows found once."""
        stacked = self.party.stacked
        if stacked is not None and not self.party.n_eq:
            weights = stacked.hessian_weights(w, self.beta, self.mu, self.objective)
            if weights is not None:
                return lambda v: stacked.hessian_times(*weights, v)
        active = self._active_rows(w)
        return lambda v: self._products(w, v, self.party.f_hessvec, self.party.c_hessvec,
                                        active)

    def hessvecs(self, w, V):
        """:meth:`hessvec` of each row of V (m × d) at once (row losses in one pass over
        their rows): an m × d array, or None."""
        return self._products(w, V, self.party.f_hessvecs, self.party.c_hessvecs)

    def _active_rows(self, w):
        """``(p, J)``: p = [μ + βcᵢ(w)]₊ and ∇cᵢ(w)'s rows where p > 0."""
        c, J = self.party.c_value_jac(w)
        p = np.maximum(self.mu + self.beta * c, 0.0)
        return p, J[p > 0]

    def _products(self, w, v, f_products, c_products, active=None):
        """The Hessian products; ``active``: :meth:`_active_rows` at w, if known."""
        party, beta = self.party, self.beta
        Hv = f_products(w, v) if self.objective else np.zeros(v.shape)
        if Hv is None:
            return None
        if party.n_ineq:
            p, J = self._active_rows(w) if active is None else active
            if p.any():
                Hc = c_products(w, v, p)
                if Hc is None:
                    return None
                Hv = Hv + beta * _gauss_newton(J, v) + Hc
        if party.n_eq:
            Hv = Hv + beta * _gauss_newton(party.h_jac(w), v)
        return Hv

    def new_multipliers(self, w):
        """Step 3 of Algorithm 1 at w (see :meth:`step3`)."""
        return self.step3(*self.constraint_values(w))

    def step3(self, c, h):
        """Step 3 of Algorithm 1 from the constraint values c = cᵢ(w), h = hᵢ(w):
        ``μ⁺ = [μ + βc]₊``, ``ν⁺ = ν + βh``."""
        return np.maximum(self.mu + self.beta * c, 0.0), self.nu + self.beta * h


def plus_quadratic(fun, alpha, center):
    """``fun(w) + (α/2)‖w − center‖²`` as a smooth function of the same protocol."""
    def shifted(w, order=2):
        val, g, H = fun(w, order)
        d = w - center
        val = val + 0.5 * alpha * (d @ d)
        if g is not None:
            g = g + alpha * d
        if H is not None:
            H.flat[::w.size + 1] += alpha        # H is a fresh array from ``fun``
        return val, g, H
    return shifted


def plus_gauss_newton(fun, J, center):
    """``fun(w) + ½‖J(w − center)‖²`` as a smooth function of the same protocol."""
    def shifted(w, order=2):
        val, g, H = fun(w, order)
        r = J @ (w - center)
        val = val + 0.5 * (r @ r)
        if g is not None:
            g = g + J.T @ r
        if H is not None:
            H = H + J.T @ J
        return val, g, H
    return shifted


def pooled(funs):
    """``Σₖ funₖ`` (cProx-AL evaluates the pooled subproblem)."""
    def total(w, order=2):
        val, g, H = 0.0, None, None
        for f in funs:
            v, gk, Hk = f(w, order)
            val += v
            g = gk if g is None else g + gk
            H = Hk if H is None else H + Hk
        return val, g, H
    return total


def _gauss_newton(J, v):
    """JᵀJ v, or JᵀJ times each row of a block v (m × d)."""
    return J.T @ (J @ v) if v.ndim == 1 else (v @ J.T) @ J
