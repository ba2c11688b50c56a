"""A party's side of every algorithm: pure handlers ``(message, state, ctx) -> (reply, state)``.

``ctx`` (:class:`PartyContext`) is what the party holds: its functions (``ctx.party``, hence
its data), the problem's public regularizer P (``ctx.regularizer``, used only by the
composite baselines' clients), and what the handlers derive from them once for the
solve (the scaled functions, an exact ADMM block's eigendecomposition, the row basis
of (B1)); it is never serialized.  ``state`` is a flat dict of float64 arrays and Python scalars — the party's
multipliers and its ADMM block (:func:`init_state`) — so it serializes bit-exactly; a
handler returns a new dict and never changes an array in place.  Everything else a
handler needs arrives in the message (there is no separate configuration).

One module a concern, each registering its handlers in the dispatch table
:data:`HANDLERS` (:mod:`.registry`) when this package is imported:

* :mod:`.al` — ``al.begin``, ``al.update``, ``kkt.report``, and the site's record of the
  multipliers it reported (:func:`reported_multipliers`, :func:`keep_records`);
* :mod:`.admm` — ``admm.start``, ``admm.step``;
* :mod:`.newton` — ``newton.eval``, ``newton.hvp``, ``newton.basis``, ``feas.eval``;
* :mod:`.scaling` — ``scale.stats``;
* :mod:`.baselines` — ``sgd.train``, ``dual.train``, ``adam.train``;
* :mod:`.context` — :class:`PartyContext`, :func:`init_state`, :func:`restore_state`.

The transport (:mod:`constrfl.federation`) reaches this side only through this
package's names; the math the baselines' server shares with its clients is in
:mod:`constrfl.corrections`.

Handlers (message types of :class:`~constrfl.messages.MessageType`, equation
numbers of docs/algorithms.md; every reply field is a *sum*: only its sum over the
parties reaches the server, :data:`constrfl.messages.FIELDS`):

* ``al.begin`` {w, beta, subproblem}: start the subproblem (9) centred at w; reply the
  KKT share at (w, μ, ν).
* ``al.update`` {w, beta, subproblem}: the multiplier step 3 of Algorithm 1 at w with the finished
  subproblem's β, then the party's KKT share at (w, μ⁺, ν⁺) — its Lagrangian and
  objective gradients, fᵢ(w), the sketches of its largest feasibility, complementarity
  and Definition-1 residuals and of the scale S₂'s terms (:mod:`constrfl.maxima`) —
  and ‖(μ⁺, ν⁺) − (μ, ν)‖₂²; the multipliers stay here; the next subproblem is centred
  at w with penalty ``beta``.
* ``kkt.report`` {w, penalty_weight}: the same share for the baselines, with the penalty
  multipliers μ = γ[cᵢ(w)]₊, ν = γhᵢ(w).
* ``admm.start`` {gamma, cold, metric, adaptive, local_max_iter, local_hessian,
  [local_products], [rho], [count_rows], [sketch]}: φᵢ = ALᵢ + γ/2‖· − wᵏ‖² (12)–(14)
  (its (19) by Newton with Hessians, by Newton-CG on Hessian products with
  ``local_products``, else by L-BFGS); when ``cold`` Algorithm 2's start uᵢ = wᵏ,
  λᵢ = 0 and the first ρᵢ, else (uᵢ, λᵢ, ρᵢ) carry over and, with
  ``metric`` or a ``sketch`` Ω, the penalty becomes Rᵢ = ρᵢI + JᵢᵀJᵢ; reply ρᵢ,
  Rᵢvᵢ = Rᵢuᵢ + λᵢ and JᵢᵀJᵢ's triangle (``metric``) or JᵢᵀJᵢΩ (``sketch``), with
  ``count_rows`` the block's number of constraint rows.
* ``admm.step`` {w, tol}: (22) as the vector eᵢ (with the Rᵢ the server used), the
  block's next ρᵢ (spectral rule), (19) and (20) at the over-relaxed point
  ŵ = α·w + (1 − α)·uᵢ, (19) to a tolerance relative to the server's motion.  Reply:
  eᵢ, Rᵢvᵢ, ρᵢ, κᵢ² (Definition 1 at (w, μ⁺), squared).
* ``newton.eval`` {w, order, [x, t], [kkt], [subproblem], [next_beta]}: ALᵢ at w and at
  x + tⱼ(w − x); with ``order`` ≥ 1 the gradient at w, with 2 also the upper triangle of
  its Hessian; with ``kkt`` also the KKT share of ``al.update`` at (w, μ⁺(w), ν⁺(w)),
  the party's multipliers unchanged; with ``next_beta`` also the next subproblem's
  first evaluation at w (``next_*``), its multiplier step recorded, not taken.
* ``al.*`` and every Newton message say their subproblem k (``subproblem``): before its
  handlers run, a step taken ahead for k by a party still in k − 1 becomes the party's,
  any other is undone (:func:`settle`).
* ``newton.eval`` with ``basis`` (``private=False``): the Hessian as the core Cᵢ of its
  row basis (B1), r(r+1)/2 floats, where the party has one (:mod:`constrfl.rowspace`),
  disclosed.
* ``newton.basis`` {start, count} (``private=False``): those columns of the party's row
  basis B, disclosed.
* ``newton.hvp`` {w, v, [violation], [subproblem]}: the AL term's (or the violation term's)
  generalized Hessian at w times v (the Hessian-free Newton-CG; d entries up).
* ``feas.eval`` {w, order, [x, t], [report]}: the same for the party's violation
  ‖[cᵢ]₊‖² + ‖hᵢ‖² (the infeasibility check); with ``report`` the sketch of its largest
  violation, its number of constraint rows and whether it is non-convex.
* ``scale.stats`` {w}: the scaling's column statistics at w⁰ (§8a), squared; the party
  keeps its row scales.
* ``sgd.train``, ``dual.train``, ``adam.train`` {x, lr, steps, round, n_clients,
  penalty_weight, batch_size, seed, ...}: the baselines' K local steps (FedAvg / FedOpt /
  FedMid, FedDualAvg, FedCAda); reply Δᵢ (and FedCAda's mᵢ, vᵢ).
"""
from . import admm, al, baselines, newton, scaling    # noqa: F401  (they register)
from .registry import HANDLERS
from .al import keep_records, reported_multipliers, settle
from .context import PartyContext, init_state, restore_state

__all__ = ["HANDLERS", "PartyContext", "init_state", "restore_state", "reported_multipliers",
           "keep_records", "settle"]
