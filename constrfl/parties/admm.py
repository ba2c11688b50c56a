"""A party's side of every algorithm: pure handlers ``(message, state, site) -> (reply, state)``.

``site`` is what the party holds: its functions (``site.party``, hence its data) and the
problem's public regularizer P (``site.regularizer``, used only by the composite
baselines' clients).  ``state`` is a flat dict of float64 arrays and Python scalars —
the party's multipliers and its ADMM block (:func:`init_state`) —
so it serializes bit-exactly; a handler returns a new dict and never changes an array
in place.  Everything else a handler needs arrives in the message (there is no separate
configuration).  What a block derives once per subproblem is part of the state too
(the eigendecomposition of an exact block's ∇²φᵢ, ``eigen_*``): it lives as long as the
solve.

Handlers (message types of :class:`~.messages.MessageType`, equation numbers of
docs/algorithms.md):

* ``al.begin`` {w, beta}: start the subproblem (9) centred at w.
* ``al.update`` {w, beta}: the multiplier step 3 of Algorithm 1 at w with the finished
  subproblem's β, then the party's KKT share at (w, μ⁺, ν⁺); the next subproblem is
  centred at w with penalty ``beta``.  Reply: μ⁺, ν⁺, the Lagrangian-gradient share
  ∇fᵢ + ∇cᵢμ⁺ + ∇hᵢν⁺ and the party's feasibility, complementarity and Definition-1
  residuals and fᵢ(w).
* ``kkt.report`` {w, penalty_weight}: the same share for the baselines, with the penalty
  multipliers μ = γ[cᵢ(w)]₊, ν = γhᵢ(w).
* ``admm.start`` {gamma, cold, metric, adaptive, local_max_iter, local_hessian, [rho]}:
  φᵢ = ALᵢ + γ/2‖· − wᵏ‖² (12)–(14); when ``cold`` Algorithm 2's start uᵢ = wᵏ, λᵢ = 0
  and the first ρᵢ (reply vᵢ = uᵢ, ρᵢ, an empty Jᵢ), else (uᵢ, λᵢ, ρᵢ) carry over and,
  with ``metric``, the penalty becomes Rᵢ = ρᵢI + JᵢᵀJᵢ (reply Jᵢ, vᵢ = uᵢ + Rᵢ⁻¹λᵢ).
* ``admm.step`` {w, tol}: (22) as the vector eᵢ (with the Rᵢ the server used), the
  block's next ρᵢ (spectral rule), (19) and (20) at the over-relaxed point
  ŵ = α·w + (1 − α)·uᵢ, (19) to a tolerance relative to the server's motion.  Reply:
  eᵢ, vᵢ = uᵢ + Rᵢ⁻¹λᵢ, ρᵢ, κᵢ (Definition 1 at (w, μ⁺)).
* ``newton.eval`` {w, order, [x, t]}: ALᵢ at w and at x + tⱼ(w − x); with ``order`` ≥ 1
  the gradient at w, with 2 also the upper triangle of its Hessian.
* ``newton.eval`` with ``basis``: the Hessian as the core Cᵢ of its row basis (B1),
  r(r+1)/2 floats, where the party has one (:mod:`constrfl.rowspace`).
* ``newton.basis`` {start, count}: those columns of the party's row basis B.
* ``newton.hvp`` {w, v, [violation]}: the AL term's (or the violation term's)
  generalized Hessian at w times v (the Hessian-free Newton-CG; d floats up).
* ``feas.eval`` {w, order, [x, t], [report]}: the same for the party's violation
  ‖[cᵢ]₊‖² + ‖hᵢ‖² (the infeasibility check); with ``report`` its largest violation.
* ``sgd.train``, ``dual.train``, ``adam.train`` {x, lr, steps, round, n_clients,
  penalty_weight, batch_size, seed, ...}: the baselines' K local steps (FedAvg / FedOpt /
  FedMid, FedDualAvg, FedCAda); reply Δᵢ (and FedCAda's mᵢ, vᵢ).
"""
from __future__ import annotations

import functools
import weakref
import zlib
from typing import NamedTuple

import numpy as np

from ..kernels import max_abs_diff, metric_solve, metric_times
from ..kkt import definition1, party_share
from ..result import Multipliers
from ..rowspace import basis_core, row_basis
from ..scaling import column_stats, scaled_party, scaled_regularizer
from ..solvers.augmented import AugmentedTerm, plus_gauss_newton, plus_quadratic
from ..solvers.block import (LOCAL_FRACTION, RELAXATION, SPECTRAL_EVERY, SPECTRAL_HORIZON,
                             SPECTRAL_WEIGHT, compiled_block, exact_block)
from ..solvers.local import minimize_smooth, woodbury_solve
from ..federation.messages import MessageType as M, pack_upper, trial_steps

__all__ = ["Site", "HANDLERS", "handles", "dispatch", "init_state", "CORRECTIONS",
           "penalized_grad"]

HANDLERS = {}


class Site(NamedTuple):
    """What a party holds: its functions and the problem's public regularizer."""

    party: object
    regularizer: object = None


def handles(message_type):
    """Register a handler for ``message_type`` (one handler per type)."""
    def register(fn):
        if message_type in HANDLERS:
            raise ValueError(f"two handlers for message type {message_type!r}")
        HANDLERS[message_type] = fn
        return fn
    return register


@functools.lru_cache(maxsize=64)
def _handlers(message_type):
    """The handlers of a (compound ``a+b``) message type, in order."""
    parts = message_type.split("+")
    unknown = [p for p in parts if p not in HANDLERS]
    if unknown:
        raise ValueError(f"no handler for message type {unknown[0]!r}")
    return tuple(HANDLERS[p] for p in parts)


def dispatch(message_type, msg, state, site):
    """Run the handler(s) of a (compound ``a+b``) message type; merge their replies.
    Once the party's state holds a scaling (:mod:`constrfl.scaling`), the handlers see
    its scaled functions."""
    handlers = _handlers(message_type)
    if len(handlers) == 1:
        return handlers[0](msg, state, _scaled_site(site, state))
    reply = {}
    for handler in handlers:
        r, state = handler(msg, state, _scaled_site(site, state))
        if reply.keys() & r.keys():
            raise ValueError(f"compound message {message_type!r}: replies overlap in "
                             f"{sorted(reply.keys() & r.keys())}")
        reply.update(r)
    return reply, state


_SCALED = weakref.WeakKeyDictionary()    # party -> (scaling key, scaled party)


def _scaled_site(site, state):
    """``site`` with the party's scaled functions when ``state`` holds a scaling (built
    once per party and scaling)."""
    if "scale_columns" not in state:
        return site
    key = tuple(np.asarray(state[k]).tobytes() for k in
                ("scale_columns", "scale_objective", "scale_rows_ineq", "scale_rows_eq"))
    cached = _SCALED.get(site.party)
    if cached is None or cached[0] != key:
        D, c = state["scale_columns"], state["scale_objective"]
        P = None if site.regularizer is None else scaled_regularizer(site.regularizer, D, c)
        cached = key, Site(scaled_party(site.party, D, c, state["scale_rows_ineq"],
                                        state["scale_rows_eq"]), P)
        _SCALED[site.party] = cached
    return cached[1]


def init_state(party):
    """A party's first state: zero multipliers."""
    return {"mu": np.zeros(party.n_ineq), "nu": np.zeros(party.n_eq)}


# -- the proximal augmented Lagrangian (Algorithm 1) -------------------------------------

def _term(state, party):
    return AugmentedTerm(party, state["beta"], state["mu"], state["nu"])


def _phi(state, party):
    """φᵢ = ALᵢ + γ/2‖· − wᵏ‖² of (12)–(14)."""
    return plus_quadratic(_term(state, party), state["gamma"], state["wk"])


@handles(M.SCALE_STATS)
def scale_stats(msg, state, site):
    """The scaling's statistics at w⁰; the party keeps its row scales (§8a)."""
    reply, e_ineq, e_eq = column_stats(site.party, msg["w"])
    return reply, dict(state, scale_rows_ineq=e_ineq, scale_rows_eq=e_eq)


@handles(M.AL_BEGIN)
def al_begin(msg, state, site):
    """Subproblem (9) at centre w; the first one may bring the scaling (D, c).  The
    reply is the party's KKT share at (w, μ, ν) (what the solve reports when it stops
    before its first outer iteration ends)."""
    state = dict(state, beta=msg["beta"], wk=msg["w"])
    if "scale_columns" in msg:
        state.update(scale_columns=msg["scale_columns"],
                     scale_objective=msg["scale_objective"])
    party = _scaled_site(site, state).party
    return _kkt_share(party, msg["w"], state["mu"], state["nu"]), state


def _kkt_share(party, w, mu, nu):
    """The party's part of the KKT round: its multipliers, Lagrangian-gradient share,
    residuals and objective value at w — in the user's units for a scaled party."""
    user = getattr(party, "user", None)
    if user is not None:
        (w, mu, nu), party = user.user_units(w, mu, nu), user.party
    return {"mu": mu, "nu": nu, **party_share(party, w, Multipliers(mu, nu))}


@handles(M.AL_UPDATE)
def al_update(msg, state, site):
    w = msg["w"]
    mu, nu = _term(state, site.party).new_multipliers(w)
    return _kkt_share(site.party, w, mu, nu), dict(state, mu=mu, nu=nu, beta=msg["beta"],
                                                   wk=w)


@handles(M.KKT_REPORT)
def kkt_report(msg, state, site):
    """The baselines' KKT round: residuals at w with the penalty's multipliers
    μ = γ[cᵢ(w)]₊, ν = γhᵢ(w) (γ = ``penalty_weight``)."""
    party, w, gamma = site.party, msg["w"], msg["penalty_weight"]
    mu, nu = gamma * np.maximum(party.c_value(w), 0.0), gamma * party.h_value(w)
    return _kkt_share(party, w, mu, nu), state


# -- Algorithm 2, a block's side -----------------------------------------------------------
# Its tuning constants, the acceptance test of its local Newton method and the choice
# between this generic block step and the compiled one: constrfl.solvers.block.

def _eigen(state, party):
    """``(Q, λ)`` with ∇²φᵢ = Q diag(λ) Qᵀ, constant for a quadratic φᵢ at fixed
    (β, γ): (19) is then exact for every ρᵢ without refactoring.  The state's
    (``eigen_vectors``, ``eigen_values``, computed at ``eigen_at`` = (β, γ)) if it is for
    this (β, γ), else computed (:func:`_with_eigen` keeps it in the state)."""
    if np.array_equal(state.get("eigen_at", ()), (state["beta"], state["gamma"])):
        return state["eigen_vectors"], state["eigen_values"]
    eig, Q = np.linalg.eigh(_phi(state, party)(state["wk"], 2)[2])
    return Q, eig


def _with_eigen(state, party):
    """``state`` holding the eigendecomposition of :func:`_eigen` for its (β, γ)."""
    Q, eig = _eigen(state, party)
    if Q is state.get("eigen_vectors"):
        return state
    return dict(state, eigen_at=np.array([state["beta"], state["gamma"]], dtype=np.float64),
                eigen_vectors=Q, eigen_values=eig)


def _first_rho(state, party, phi):
    """ρᵢ⁰ = det(∇²φᵢ(wᵏ))^(1/d), the geometric mean of the eigenvalues of the block's
    Hessian (0.1 without one): homogeneous of degree one in the block's curvature."""
    H = phi(state["wk"], 2)[2] if state["local_hessian"] else None
    if H is None:
        return 0.1
    try:
        return float(np.exp(2.0 * np.mean(np.log(np.diag(np.linalg.cholesky(H))))))
    except np.linalg.LinAlgError:
        lam = np.linalg.eigvalsh(H)
        lam = lam[lam > 0]
        return float(np.exp(np.mean(np.log(lam)))) if lam.size else 0.1


@handles(M.ADMM_START)
def admm_start(msg, state, site):
    """Cold (the first subproblem): uᵢ = wᵏ, λᵢ = 0 and ρᵢ as given (or
    :func:`_first_rho`); reply vᵢ = uᵢ, ρᵢ and an empty Jᵢ.  Otherwise (uᵢ, λᵢ, ρᵢ) carry
    over from the last subproblem; with ``metric`` the block's penalty becomes
    Rᵢ = ρᵢI + JᵢᵀJᵢ (:func:`_constraint_metric`); reply Jᵢ and vᵢ = uᵢ + Rᵢ⁻¹λᵢ."""
    state = {k: v for k, v in state.items() if k not in ("w_last", "w_ref", "lam_ref")}
    state.update(gamma=msg["gamma"], local_max_iter=msg["local_max_iter"],
                 local_hessian=msg["local_hessian"], adaptive=msg["adaptive"], age=0)
    wk = state["wk"]
    J = (_constraint_metric(state, site.party) if msg["metric"] and not msg["cold"]
         else np.zeros((0, wk.size)))
    state["J"] = J
    if not msg["cold"]:
        return {"v": state["u"] + metric_solve(state["rho"], J, state["lam"]), "J": J}, state
    rho = msg["rho"] if "rho" in msg else _first_rho(state, site.party, _phi(state, site.party))
    state.update(u=wk, lam=np.zeros_like(wk), rho=rho, updates=0)
    return {"v": wk, "rho": rho, "J": J}, state


def _constraint_metric(state, party):
    """Jᵢ of the block's penalty Rᵢ = ρᵢI + JᵢᵀJᵢ: √β times the gradients at wᵏ of its
    equalities and of the inequalities it expects active (μⱼ > 0 or μⱼ + βcⱼ(wᵏ) > 0),
    so that JᵢᵀJᵢ is the Gauss-Newton curvature β∇c∇cᵀ of its AL term: the stiff
    directions a scalar ρᵢ cannot match (docs/algorithms.md §4)."""
    wk, beta, mu = state["wk"], state["beta"], state["mu"]
    rows = []
    if party.n_ineq:
        c, Jc = party.c_value_jac(wk)
        rows.append(Jc[(mu > 0) | (mu + beta * c > 0)])
    if party.n_eq:
        rows.append(party.h_jac(wk))
    return np.sqrt(beta) * np.vstack(rows) if rows else np.zeros((0, wk.size))


def _off_metric(J, *xs):
    """The xs without their components in the row space of J (as they are when J has no
    rows)."""
    if not J.shape[0]:
        return xs
    Q = np.linalg.qr(J.T)[0]
    return [x - Q @ (Q.T @ x) for x in xs]


def _spectral(state, w):
    """The block's penalty rule: rᵢ = ‖λᵢ − λᵢʳᵉᶠ‖₂/‖w − wʳᵉᶠ‖₂ over the last
    ``SPECTRAL_EVERY`` rounds, both off the rows of Jᵢ (the curvature its dual sees along
    the server's motion, where the metric JᵢᵀJᵢ does not already match it),
    ρᵢ ← ρᵢ^(1−a) rᵢ^a with a weight a that decays with the number of changes so far
    (bounded total change); returns (ρᵢ, state changes)."""
    rho, age = state["rho"], state["age"]
    if "w_ref" in state and age < SPECTRAL_EVERY:
        return rho, {"age": age + 1}
    updates = state["updates"]
    if "w_ref" in state:
        dw, dl = _off_metric(state["J"], w - state["w_ref"], state["lam"] - state["lam_ref"])
        dw = float(np.linalg.norm(dw))
        r = float(np.linalg.norm(dl)) / dw if dw > 0 else 0.0
        if np.isfinite(r) and r > 0:
            a = SPECTRAL_WEIGHT / (1.0 + (updates / SPECTRAL_HORIZON) ** 2)
            rho = float(rho ** (1.0 - a) * r ** a)
            updates += 1
    return rho, {"w_ref": w, "lam_ref": state["lam"], "age": 1, "updates": updates}


def _definition1(term, w):
    """The owner's Definition-1 residual at (w, μ⁺), μ⁺ the multipliers step 3 would give
    it at w."""
    c, h = term.constraint_values(w)
    return definition1(c, h, term.step3(c, h)[0])


@handles(M.ADMM_STEP)
def admm_step(msg, state, site):
    """(22) as the vector eᵢ with the penalty Rᵢ = ρᵢI + JᵢᵀJᵢ the server used for w;
    then the next ρᵢ, (19) to the relative tolerance and (20), both at the over-relaxed
    ŵ = α·w + (1 − α)·uᵢ.  Reply eᵢ, vᵢ = uᵢ + Rᵢ⁻¹λᵢ, ρᵢ and the Definition-1 residual
    κᵢ at (w, μ⁺).  The step runs compiled (:func:`_compiled_step`) where
    :func:`~constrfl.solvers.block.compiled_block` says so and the kernel finishes, else
    function by function (:func:`_block_step`)."""
    party, w = site.party, msg["w"]
    rho, changes = _spectral(state, w) if state["adaptive"] else (state["rho"], {})
    tol = msg["tol"]
    if "w_last" in state:
        step = max_abs_diff(w, state["w_last"])
        tol = min(tol, max(LOCAL_FRACTION * rho * step, tol / 1000))
    if exact_block(party, state["local_hessian"]):
        state = _with_eigen(state, party)
    out = (_compiled_step(state, party, w, rho, tol)
           if compiled_block(party, state["local_hessian"]) else None)
    e, kappa, u, lam, v = out or _block_step(state, party, w, rho, tol)
    reply = {"e": e, "v": v, "rho": rho, "kappa": kappa}
    return reply, dict(state, u=u, lam=lam, rho=rho, w_last=w, **changes)


def _compiled_step(state, party, w, rho_next, tol):
    """``(eᵢ, κᵢ, uᵢ⁺, λᵢ⁺, vᵢ)`` of :func:`admm_step` in one compiled call
    (:func:`~constrfl.kernels.stacked_admm_step`), or None where the kernel hands back;
    for a party :func:`~constrfl.solvers.block.compiled_block` accepts."""
    return party.stacked.admm_step(state["beta"], state["mu"], state["gamma"], state["wk"],
                                   w, state["u"], state["lam"], state["rho"], rho_next,
                                   state["J"], RELAXATION, tol, state["local_max_iter"])


def _block_step(state, party, w, rho_next, tol):
    """``(eᵢ, κᵢ, uᵢ⁺, λᵢ⁺, vᵢ)`` of :func:`admm_step`, evaluated function by function."""
    u, lam, rho, gamma, J = state["u"], state["lam"], state["rho"], state["gamma"], state["J"]
    term = _term(state, party)
    grad_w = term(w, 1)[1] + gamma * (w - state["wk"])   # ∇φᵢ(w)
    e = grad_w + lam - metric_times(rho, J, w - u)       # (22), with the server's Rᵢ
    kappa = _definition1(term, w)                        # c(w), h(w) of the line above
    rho = rho_next
    w_hat = RELAXATION * w + (1.0 - RELAXATION) * u     # ŵ
    if exact_block(party, state["local_hessian"]):
        # one Newton step from ŵ, where ∇sub(ŵ) = ∇φᵢ(ŵ) + λᵢ
        Q, eig = _eigen(state, party)
        u = w_hat - woodbury_solve(      # (∇²φᵢ + ρI + JᵀJ)⁻¹, by the eigenvectors
            lambda x: Q @ ((Q.T @ x).T / (eig + rho)).T,
            J, grad_w + lam + Q @ (eig * (Q.T @ (w_hat - w))))
    else:
        # φᵢ + ⟨λ, u−ŵ⟩ + ½‖u−ŵ‖²_R = ALᵢ + (γ+ρ)/2‖u − m‖² + ½‖J(u − ŵ)‖² + const
        m = (gamma * state["wk"] + rho * w_hat - lam) / (gamma + rho)
        fun = plus_quadratic(term, gamma + rho, m)
        if J.shape[0]:
            fun = plus_gauss_newton(fun, J, w_hat)
        u = minimize_smooth(fun, u, tol, state["local_max_iter"], state["local_hessian"]).x
    lam = lam + metric_times(rho, J, u - w_hat)         # (20)
    return e, kappa, u, lam, u + metric_solve(rho, J, lam)


# -- the federated Newton inner solver ----------------------------------------------------

def _evaluate(term, msg):
    """A ``newton.eval``-shaped reply: the term's values at the trial points, gradient
    and Hessian (upper triangle) at the first one, as ``msg["order"]`` asks; with
    ``basis`` the Hessian as its core in the party's row basis where it has one."""
    order, w = msg["order"], msg["w"]
    core = None
    if order >= 2 and msg.get("basis"):
        core = basis_core(term.party, w, term.beta, term.mu, term.objective)
    val, g, H = term(w, 1 if core is not None else order)
    reply = {"values": np.append(val, term.values(trial_steps(msg)))}
    if order >= 1:
        reply["grad"] = g
    if core is not None:
        reply["core"] = pack_upper(core)
    elif order >= 2 and H is not None:      # no Hessian: the server goes quasi-Newton
        reply["hess"] = pack_upper(H)
    return reply


@handles(M.NEWTON_EVAL)
def newton_eval(msg, state, site):
    return _evaluate(_term(state, site.party), msg), state


@handles(M.NEWTON_HVP)
def newton_hvp(msg, state, site):
    """The party's Hessian (of its AL term, or with ``violation`` of its violation term)
    at w times v; by a finite difference of its own gradients where a function has no
    Hessian."""
    term = (_violation_term(site.party) if msg.get("violation")
            else _term(state, site.party))
    w, v = msg["w"], msg["v"]
    Hv = term.hessvec(w, v)
    if Hv is None:
        eps = 1e-7 * (1.0 + float(np.max(np.abs(w)))) / max(float(np.max(np.abs(v))), 1e-300)
        Hv = (term(w + eps * v, 1)[1] - term(w, 1)[1]) / eps
    return {"hv": Hv}, state


@handles(M.NEWTON_BASIS)
def newton_basis(msg, state, site):
    """Columns ``start`` to ``start + count`` of the party's row basis B (B1), as rows
    (none without a basis or past its rank)."""
    basis = row_basis(site.party)
    B = np.zeros((0, 0)) if basis is None else basis[0]
    return {"basis": np.ascontiguousarray(B.T[msg["start"]:msg["start"] + msg["count"]])
            .ravel()}, state


def _violation_term(party):
    """‖[cᵢ]₊‖² + ‖hᵢ‖²: the AL term without objective, at zero multipliers, β = 2."""
    return AugmentedTerm(party, 2.0, np.zeros(party.n_ineq), np.zeros(party.n_eq),
                         objective=False)


@handles(M.FEAS_EVAL)
def feas_eval(msg, state, site):
    """The party's violation term ‖[cᵢ]₊‖² + ‖hᵢ‖² (its AL term without objective, at
    zero multipliers and β = 2); with ``report`` its largest violation and whether its
    functions are convex."""
    party = site.party
    if msg.get("report"):
        c, h = party.c_value(msg["w"]), party.h_value(msg["w"])
        worst = max(float(np.max(c, initial=0.0)), float(np.max(np.abs(h), initial=0.0)))
        return {"violation": worst, "convex": party.is_convex}, state
    return _evaluate(_violation_term(party), msg), state


# -- the baselines' clients -----------------------------------------------------------------

#: FedCAda's bias corrections (seed 001, options 1–4; "vanilla" is Adam's), of b = βᵗ.
CORRECTIONS = {
    "vanilla": lambda b: 1.0 - b,
    "linear": lambda b: 1.0 + b,
    "square": lambda b: 1.0 + b * b,
    "sin": lambda b: 1.0 + np.sin(b),
    "sqrt": lambda b: 1.0 + np.sqrt(b),
}
CORRECTION_NAMES = tuple(CORRECTIONS)      # a message carries the index


def penalized_grad(party, w, scale, weight, rng=None, batch_size=None):
    """∇ of ``scale·(f + γ/2(‖[c]₊‖² + ‖h‖²))`` at w, f on a minibatch of the party's own
    rows (drawn by ``rng``) or all of them; the penalty on all rows (a minibatch estimate
    of [c]₊ would be biased)."""
    g = party.f_minibatch_grad(w, rng, batch_size)
    if weight and party.n_ineq:
        c, J = party.c_value_jac(w)
        g = g + weight * (J.T @ np.maximum(c, 0.0))
    if weight and party.n_eq:
        g = g + weight * (party.h_jac(w).T @ party.h_value(w))
    return scale * g


def _local_grad(msg, site):
    """The client's gradient oracle for this round: ∇ of fᵢ + penalty (the seeds' Fᵢ);
    its minibatches (``batch_size`` rows, 0: all) come from a generator seeded by
    (``seed``, its name, ``round``), so no generator state is kept."""
    batch = msg["batch_size"] or None
    rng = None if batch is None else np.random.default_rng(
        [msg["seed"], zlib.crc32(site.party.name.encode()), msg["round"]])
    return lambda w: penalized_grad(site.party, w, 1.0, msg["penalty_weight"], rng, batch)


@handles(M.SGD_TRAIN)
def sgd_train(msg, state, site):
    """FedAvg / FedOpt client (003, Alg. 1–2; 002, Alg. 1): K steps x ← x − η_c gₖ;
    with ``prox`` FedMid's client (002, Alg. 2): x ← prox_{η_c ψ}(x − η_c gₖ), ψ = P/n.  The OSP
    variants and FedDualAvg-OSP (on the dual state z) run it without ``prox``."""
    grad, lr = _local_grad(msg, site), msg["lr"]
    x = x0 = msg["x"]
    for _ in range(msg["steps"]):
        x = x - lr * grad(x)
        if msg["prox"]:
            x = site.regularizer.prox(x, lr / msg["n_clients"])
    return {"delta": x - x0}, state


@handles(M.DUAL_TRAIN)
def dual_train(msg, state, site):
    """FedDualAvg client (002, Alg. 3): from the dual state z and prox weight offset A,
    for k = 0..K−1:  w = prox_{(A + η_c k)ψ}(z),  z ← z − η_c ∇Fᵢ(w),  ψ = P/n."""
    grad, lr, P = _local_grad(msg, site), msg["lr"], site.regularizer
    z = z0 = msg["x"]
    for k in range(msg["steps"]):
        z = z - lr * grad(P.prox(z, (msg["offset"] + lr * k) / msg["n_clients"]))
    return {"delta": z - z0}, state


@handles(M.ADAM_TRAIN)
def adam_train(msg, state, site):
    """FedCAda client (001, Alg. 2): from the server's (x, m, v), K steps of
    m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², x ← x − η_c (m/c(β₁ᵗ))/(√(v/c(β₂ᵗ)) + ϵ),
    t the round, c the correction (:data:`CORRECTIONS`)."""
    grad, lr, t = _local_grad(msg, site), msg["lr"], msg["round"]
    b1, b2, eps = msg["beta1"], msg["beta2"], msg["eps"]
    correct = CORRECTIONS[CORRECTION_NAMES[int(msg["correction"])]]
    c1, c2 = correct(b1 ** t), correct(b2 ** t)
    x = x0 = msg["x"]
    m, v = msg["m"], msg["v"]
    for _ in range(msg["steps"]):
        g = grad(x)
        m = b1 * m + (1.0 - b1) * g
        v = b2 * v + (1.0 - b2) * g * g
        x = x - lr * (m / c1) / (np.sqrt(v / c2) + eps)
    return {"delta": x - x0, "m": m, "v": v}, state
