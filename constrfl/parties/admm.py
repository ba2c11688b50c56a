"""Algorithm 2 (the inexact ADMM, docs/algorithms.md §4), a block's side:
``admm.start`` (the block's start, ρᵢ and its penalty metric Jᵢ) and ``admm.step``
((22), the spectral penalty rule, (19) and (20) at the over-relaxed point).

The block step's tuning constants, the acceptance test of its local Newton method and
the choice between the generic step here (:func:`_block_step`) and the compiled one
(:func:`_compiled_step`): :mod:`constrfl.block`.  An exact block's
eigendecomposition (:func:`_eigen`) is derived once per (β, γ) and kept on the party's
:class:`~.context.PartyContext` for the solve, not in its state.
"""
from __future__ import annotations

import numpy as np

from ..messages import MessageType as M, pack_upper
from ..kernels import max_abs_diff, metric_times
from ..residuals import definition1_sq
from ..augmented import plus_gauss_newton, plus_quadratic
from ..block import (LOCAL_FRACTION, RELAXATION, SPECTRAL_EVERY, SPECTRAL_HORIZON,
                             SPECTRAL_WEIGHT, compiled_block, exact_block)
from ..local import minimize_smooth, woodbury_solve
from .al import term as _term
from .registry import handles

__all__ = ["admm_start", "admm_step"]


def _phi(state, party):
    """φᵢ = ALᵢ + γ/2‖· − wᵏ‖² of (12)–(14)."""
    return plus_quadratic(_term(state, party), state["gamma"], state["wk"])


def _eigen(state, ctx):
    """``(Q, λ)`` with ∇²φᵢ = Q diag(λ) Qᵀ, constant for a quadratic φᵢ at fixed
    (β, γ): (19) is then exact for every ρᵢ without refactoring.  Computed once per
    (β, γ) and kept on its context (:meth:`~.context.PartyContext.memo`), which lives for the solve."""
    def decompose():
        eig, Q = np.linalg.eigh(_phi(state, ctx.party)(state["wk"], 2)[2])
        return Q, eig
    return ctx.memo("eigen", (state["beta"], state["gamma"]), decompose)


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
def admm_start(msg, state, ctx):
    """Cold (the first subproblem): uᵢ = wᵏ, λᵢ = 0 and ρᵢ as given (or
    :func:`_first_rho`), no Jᵢ.  Otherwise (uᵢ, λᵢ, ρᵢ) carry over from the last
    subproblem; with ``metric`` or a ``sketch`` Ω the block's penalty becomes
    Rᵢ = ρᵢI + JᵢᵀJᵢ (:func:`_constraint_metric`).  Reply ρᵢ, Rᵢvᵢ = Rᵢuᵢ + λᵢ
    (vᵢ = uᵢ + Rᵢ⁻¹λᵢ) and, with ``metric``, the upper triangle of JᵢᵀJᵢ, with a
    ``sketch`` JᵢᵀJᵢΩ (zeros where Jᵢ has no rows): the server's (18) needs only their
    sums.  With ``count_rows``, the block's number of constraint rows (a bound on the
    rows of any Jᵢ it will have), whose sum sizes the sketches."""
    state = {k: v for k, v in state.items() if k not in ("w_last", "w_ref", "lam_ref")}
    state.update(gamma=msg["gamma"], local_max_iter=msg["local_max_iter"],
                 local_hessian=msg["local_hessian"],
                 local_products=bool(msg.get("local_products", False)),
                 adaptive=msg["adaptive"], age=0)
    wk = state["wk"]
    sketch = msg.get("sketch")
    J = (_constraint_metric(state, ctx.party)
         if (msg["metric"] or sketch is not None) and not msg["cold"]
         else np.zeros((0, wk.size)))
    state["J"] = J
    if msg["cold"]:
        rho = msg["rho"] if "rho" in msg else _first_rho(state, ctx.party, _phi(state, ctx.party))
        state.update(u=wk, lam=np.zeros_like(wk), rho=rho, updates=0)
    reply = {"rho": state["rho"], "Rv": _penalty_times_v(state["rho"], J, state["u"],
                                                         state["lam"])}
    if msg["metric"] and not msg["cold"]:    # every block (one layout), zeros without rows
        reply["metric"] = pack_upper(J.T @ J)
    if sketch is not None and not msg["cold"]:
        reply["metric_sketch"] = J.T @ (J @ sketch)
    if msg.get("count_rows"):
        reply["constraint_rows"] = float(ctx.party.n_ineq + ctx.party.n_eq)
    return reply, state


def _penalty_times_v(rho, J, u, lam):
    """Rᵢvᵢ = Rᵢuᵢ + λᵢ, vᵢ = uᵢ + Rᵢ⁻¹λᵢ, Rᵢ = ρᵢI + JᵢᵀJᵢ."""
    return metric_times(rho, J, u) + lam


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


def _definition1_sq(term, w):
    """The party's Definition-1 residual rows at (w, μ⁺), squared and summed, μ⁺ the
    multipliers step 3 would give it at w."""
    c, h = term.constraint_values(w)
    return definition1_sq(c, h, term.step3(c, h)[0])


@handles(M.ADMM_STEP)
def admm_step(msg, state, ctx):
    """(22) as the vector eᵢ with the penalty Rᵢ = ρᵢI + JᵢᵀJᵢ the server used for w;
    then the next ρᵢ, (19) to the relative tolerance and (20), both at the over-relaxed
    ŵ = α·w + (1 − α)·uᵢ.  Reply eᵢ, Rᵢvᵢ = Rᵢuᵢ + λᵢ and ρᵢ with the next penalty (what
    the server's next (18) sums), and κᵢ², the Definition-1 residual rows at (w, μ⁺)
    squared and summed.  The step runs compiled (:func:`_compiled_step`) where
    :func:`~constrfl.block.compiled_block` says so and the kernel finishes, else
    function by function (:func:`_block_step`)."""
    party, w = ctx.party, msg["w"]
    rho, changes = _spectral(state, w) if state["adaptive"] else (state["rho"], {})
    tol = msg["tol"]
    if "w_last" in state:
        step = max_abs_diff(w, state["w_last"])
        tol = min(tol, max(LOCAL_FRACTION * rho * step, tol / 1000))
    out = (_compiled_step(state, party, w, rho, tol)
           if compiled_block(party, state["local_hessian"]) else None)
    e, kappa_sq, u, lam = out or _block_step(state, ctx, w, rho, tol)
    reply = {"e": e, "Rv": _penalty_times_v(rho, state["J"], u, lam), "rho": rho,
             "definition1_sq": kappa_sq}
    return reply, dict(state, u=u, lam=lam, rho=rho, w_last=w, **changes)


def _compiled_step(state, party, w, rho_next, tol):
    """``(eᵢ, κᵢ², uᵢ⁺, λᵢ⁺)`` of :func:`admm_step` in one compiled call
    (:func:`~constrfl.kernels.stacked_admm_step`), or None where the kernel hands back;
    for a party :func:`~constrfl.block.compiled_block` accepts."""
    return party.stacked.admm_step(state["beta"], state["mu"], state["gamma"], state["wk"],
                                   w, state["u"], state["lam"], state["rho"], rho_next,
                                   state["J"], RELAXATION, tol, state["local_max_iter"])


def _block_operator(term, shift, J):
    """x ↦ (v ↦ ∇²ALᵢ(x)v + shift·v + JᵀJv): the Hessian products of (19)'s objective
    (``local_solver="newton-cg"``, for a party whose functions have products of their
    own: ``Party.dense_products`` False; a product is None where the AL term has none)."""
    def at(x):
        H = term.hessian_operator(x)

        def product(v):
            Hv = H(v)
            return None if Hv is None else Hv + metric_times(shift, J, v)
        return product
    return at


def _block_step(state, ctx, w, rho_next, tol):
    """``(eᵢ, κᵢ², uᵢ⁺, λᵢ⁺)`` of :func:`admm_step`, evaluated function by function."""
    party = ctx.party
    u, lam, rho, gamma, J = state["u"], state["lam"], state["rho"], state["gamma"], state["J"]
    term = _term(state, party)
    grad_w = term(w, 1)[1] + gamma * (w - state["wk"])   # ∇φᵢ(w)
    e = grad_w + lam - metric_times(rho, J, w - u)       # (22), with the server's Rᵢ
    kappa_sq = _definition1_sq(term, w)                  # c(w), h(w) of the line above
    rho = rho_next
    w_hat = RELAXATION * w + (1.0 - RELAXATION) * u     # ŵ
    if exact_block(party, state["local_hessian"]):
        # one Newton step from ŵ, where ∇sub(ŵ) = ∇φᵢ(ŵ) + λᵢ
        Q, eig = _eigen(state, ctx)
        u = w_hat - woodbury_solve(      # (∇²φᵢ + ρI + JᵀJ)⁻¹, by the eigenvectors
            lambda x: Q @ ((Q.T @ x).T / (eig + rho)).T,
            J, grad_w + lam + Q @ (eig * (Q.T @ (w_hat - w))))
    else:
        # φᵢ + ⟨λ, u−ŵ⟩ + ½‖u−ŵ‖²_R = ALᵢ + (γ+ρ)/2‖u − m‖² + ½‖J(u − ŵ)‖² + const
        m = (gamma * state["wk"] + rho * w_hat - lam) / (gamma + rho)
        fun = plus_quadratic(term, gamma + rho, m)
        if J.shape[0]:
            fun = plus_gauss_newton(fun, J, w_hat)
        operator = (_block_operator(term, gamma + rho, J)
                    if state.get("local_products") and not party.dense_products else None)
        u = minimize_smooth(fun, u, tol, state["local_max_iter"], state["local_hessian"],
                            operator).x
    lam = lam + metric_times(rho, J, u - w_hat)         # (20)
    return e, kappa_sq, u, lam
