"""Algorithm 1 (federated proximal AL) and Algorithm 3 (cProx-AL): one outer loop.

Outer step k (docs/algorithms.md §3): find w^{k+1} with dist∞(0, ∂Ψ_k(w^{k+1})) ≤ τ_k
(10) with the inner solver, then one round in which every party takes the multiplier
step 3 on its own multipliers and reports its share of the KKT residuals of §2 at
(w^{k+1}, μ^{k+1}, ν^{k+1}); that round also starts the next subproblem (its first
message rides on it).  Stop when the residuals meet (ε₁, ε₂) — by Theorem 3 the paper's
rule (11) implies that, so this stops no later than (11); both are recorded.  Near the
end (``KKT_RIDE_RATIO``) the same shares, at the multipliers step 3 would give, ride on
the Newton evaluations, and the solve ends at the first evaluated point that meets them,
without that round.  A Newton trial that likely ends its subproblem brings that round's
shares and the next subproblem's first evaluation ahead (:class:`.inner.NextStart`):
an outer iteration that ends on it has no multiplier round at all (docs/algorithms.md
§3, "The next start ahead").

The methods differ only in the inner solver: Algorithm 2 (:class:`.admm.ADMM`) or the
proximal Newton method (:class:`.newton.Newton`, over the federation for
``inner="newton"``, over a pooled, uncounted one for ``cproxal``).  The server's state
between rounds is :class:`OuterState` (plain data): a solve interrupted at any round
resumes from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import status as st
from ..errors import NonFiniteIterate, SolveStop
from ..messages import MessageType as M
from ..progress import log
from ..residuals import measured_at
from ..records import KKT, Multipliers, saved_as
from .inner import InnerSolver, NextStart
from .diagnostics import ray_probe, running_off, stalled, unbounded, violation_check

__all__ = ["OuterState", "proximal_al", "tau_schedule", "outer_stall", "next_penalties",
           "STALL_WINDOW", "first_eta", "KKT_RIDE_RATIO"]

#: the parties' KKT shares ride on a subproblem's Newton evaluations (and the solve may
#: end at any evaluated point, without the multiplier round) once the last outer
#: iteration's residuals are within this factor of tol; measured: each Newton row of
#: validation/bench.py one round fewer (the Flower example, tol 1e-4: 43 -> 40), and
#: asking from the start cost the 1,000-client row 50% more time (each share is a second
#: pass over the party's data) for no further round
KKT_RIDE_RATIO = 100.0
#: outer iterations in a row of stalled subproblems without progress that end a solve
#: (:func:`outer_stall`)
STALL_WINDOW = 10


@saved_as("outer-state")
@dataclass
class OuterState:
    """The server's state of a proximal AL solve (plain data; resumable)."""

    k: int                     # outer iterations completed
    w: np.ndarray              # wᵏ
    beta: float
    history: list = field(default_factory=list)
    inner_iterations: int = 0  # over all subproblems
    inner: object = None       # the running subproblem's state (None: not started)
    scale_columns: np.ndarray = None   # D and c of the scaling (w = Dx), or None
    scale_objective: float = 1.0
    last_check: int = 0        # outer iteration of the last infeasibility check
    start: dict = None         # KKT residuals and objective at w⁰ (the first al.begin)
    eta: float = None          # η of the proximal term ‖w − wᵏ‖²/(2η) (None: not set
    #                            yet, or a state saved before η: η = β)
    reported: str = "kkt"      # the KKT share whose multipliers belong to w (the parties'
    #                            record: "kkt", or "ride" when it ended on an evaluation)
    reported_seq: int = 0      # and the message it came with


def tau_schedule(k, s_bar, tau_decay, eps1, tau_rel=None, history=()):
    """τ_k = s̄/(k+1)² (the paper's, ``tau_decay=None``) or s̄·rᵏ; with ``tau_rel = θ``
    also at most θ times the outer loop's own error at the last iterate,
    max(Definition-1 residual, ‖wᵏ − wᵏ⁻¹‖∞/η) (its stationarity is at most τ_{k−1} +
    ‖wᵏ − wᵏ⁻¹‖∞/η by (10): what the inner solver was asked for) — a relative error
    criterion in the spirit of Solodov & Svaiter's for the proximal point method: once
    the multipliers settle, the next subproblem is solved to the final accuracy at once
    instead of a decade per outer iteration.  Never below ε₁/10 (a smaller τ_k cannot
    help the stop test)."""
    tau = s_bar / (k + 1) ** 2 if tau_decay is None else s_bar * tau_decay ** k
    if tau_rel is not None and history:
        last = history[-1]
        step = last["step"] / last.get("eta", last["beta"])     # files before η: β
        tau = min(tau, tau_rel * max(last["definition1"], step))
    return max(tau, eps1 / 10)


def _start(fed, inner, k, w, beta, eta, tau, update, previous=None, extra=None):
    """One round: ``al.update`` (with ``update``: it ends subproblem k − 1) or
    ``al.begin`` (with ``extra``: the scaling), plus the inner solver's first message
    for subproblem k (penalty β, proximal term ‖· − w‖²/(2η)), centred at ``w``
    (``previous``: the finished subproblem's state)."""
    payload, per_client = inner.start_message(k, beta, previous)
    kind = M.compound(M.AL_UPDATE if update else M.AL_BEGIN, inner.start_type)
    sums = fed.broadcast(kind, {"w": w, "beta": beta, "subproblem": k - 1 if update else k,
                                **(extra or {}), **payload},
                         per_client=per_client, include_server=True)
    return sums, inner.begin(sums, w, tau, beta, previous, eta=eta)


def _kkt_round(problem, w, sums):
    """The KKT residuals and objective (:func:`~constrfl.residuals.measured_at`) and the
    multiplier step ‖(μᵏ⁺¹, νᵏ⁺¹) − (μᵏ, νᵏ)‖₂ over every party (for rule (11)) from a
    round's sums."""
    kkt, objective = measured_at(problem, w, sums)
    return kkt, float(np.sqrt(sums["multiplier_step_sq"])), objective


def proximal_al(problem, fed, inner: InnerSolver, s, eps, settings, *, report, callback):
    """Run outer iterations from the state ``s`` (updated in place, round by round) with
    the ``inner`` solver (:class:`~.inner.InnerSolver`: all this calls of it), and
    the outer loop's ``settings`` (``max_outer``, ``s_bar``, ``tau_decay``, ``tau_rel``,
    ``beta_max`` and ``eta_max`` of a :class:`~constrfl.settings.NewtonSettings` or
    :class:`~constrfl.settings.ADMMSettings`).

    Returns ``(status, message)``: ``"optimal"``, ``"max_iterations"``,
    ``"infeasible"`` or ``"unbounded"`` (:mod:`.diagnostics`), ``"optimal_inaccurate"``
    or ``"numerical_error"`` (:func:`outer_stall`); other ways out raise
    :class:`~constrfl.errors.SolveStop`.
    """
    eps1, eps2 = eps
    max_outer, s_bar, tau_decay, tau_rel, beta_max = (
        settings.max_outer, settings.s_bar, settings.tau_decay, settings.tau_rel,
        settings.beta_max)
    if s.eta is None:
        s.eta = first_eta(problem.regularizer, problem.dim, s.beta, beta_max,
                          settings.eta_max)
    met, met_seq = [], []   # the sums of an evaluation round at a KKT point (then it
    #                         ends), and its message

    def kkt_met(x, sums):
        """Ends the solve at x, with no multiplier round, when the KKT shares the round
        brought (at μ⁺(x), ν⁺(x)) meet tol."""
        if measured_at(problem, x, sums)[0].meets(eps1, eps2, settings.eps_rel):
            met.append(sums)
            met_seq.append(fed.seq)
        return bool(met)

    while s.k < max_outer:
        k, w_prev = s.k, s.w
        if s.inner is None:
            sums, s.inner = _start(fed, inner, k, w_prev, s.beta, s.eta,
                                      tau_schedule(k, s_bar, tau_decay, eps1, tau_rel,
                                                   s.history),
                                      update=False, extra=problem.begin_payload())
            if s.start is None and not s.history:
                s.reported_seq = fed.seq
                kkt, objective = measured_at(problem, w_prev, sums)
                s.start = dict(_recorded(kkt), objective=objective)
        beta, eta = s.beta, s.eta
        following_beta, following_eta = next_penalties(s.history, beta, eta, beta_max,
                                                       settings.eta_max, eps)
        near = bool(s.history) and _residual_ratio(s.history[-1], eps) <= KKT_RIDE_RATIO
        # (not where rounds are free: cProx-AL's pooled problem)
        ahead = NextStart(k, following_beta) if fed.counted else None
        w_new, converged = inner.run(fed, s.inner, s.beta, kkt_met if near else None, ahead)
        if not np.all(np.isfinite(w_new)):
            raise NonFiniteIterate(f"non-finite iterate in outer iteration {k}")
        tau, iterations = s.inner.tau, s.inner.iterations
        certificate = s.inner.certificate
        # τ_{k+1} depends on this round's KKT residuals (tau_rel): set once they are in
        mults_prev = callback and fed.multipliers("kkt", s.reported_seq)
        if met:                           # the solve ends here (the KKT shares rode)
            sums, following = met[0], None
        elif ahead is not None and ahead.sums is not None:     # the next start, ahead
            sums, following = ahead.sums, inner.begin(
                ahead.start(), w_new, np.nan, following_beta, s.inner, eta=following_eta)
        else:
            sums, following = _start(fed, inner, k + 1, w_new, following_beta,
                                     following_eta, np.nan, update=True, previous=s.inner)
        kkt, mstep, objective = _kkt_round(problem, w_new, sums)
        s.w, s.k, s.inner = w_new, k + 1, following
        s.reported, s.reported_seq = ("ride", met_seq[0]) if met else ("kkt", fed.seq)
        s.beta, s.eta = following_beta, following_eta
        s.inner_iterations += iterations
        dw = float(np.max(np.abs(w_new - w_prev)))
        rec = dict(k=k, tau=tau, certificate=certificate, beta=beta, eta=eta,
                   inner_iterations=iterations,
                   inner_converged=converged, step=dw, multiplier_step=mstep,
                   rule11=dw + eta * tau <= eta * eps1 and mstep <= beta * eps2,
                   **_recorded(kkt), objective=objective, w_norm=float(np.max(np.abs(w_new))),
                   rounds=fed.traffic.rounds,
                   bytes_up=fed.traffic.bytes_up, bytes_down=fed.traffic.bytes_down)
        if not np.isfinite([kkt.stationarity, kkt.definition1, rec["objective"]]).all():
            raise NonFiniteIterate(f"non-finite residuals or objective in outer "
                                   f"iteration {k}")
        s.history.append(rec)
        if s.inner is not None:
            s.inner.tau = tau_schedule(k + 1, s_bar, tau_decay, eps1, tau_rel, s.history)
        log.info("outer iteration %d: %d inner iterations, round %d, stationarity %.2e, "
                 "feasibility %.2e, objective %.10g", k, iterations, rec["rounds"],
                 kkt.stationarity, kkt.feasibility, objective)
        report(rec)
        solved = kkt.meets(eps1, eps2, settings.eps_rel)
        optimal = (f"KKT residuals meet tol after {s.k} outer iterations "
                   f"({'with' if rec['rule11'] else 'before'} the stop rule (11))")
        try:
            stop = callback is not None and callback(dict(
                rec, w=problem.user_point(w_new), w_prev=problem.user_point(w_prev),
                multipliers_prev=mults_prev,
                multipliers=fed.multipliers(s.reported, s.reported_seq)))
        except SolveStop as failed:             # the callback raised: kept as res.error
            if solved:                          # w is still the answer
                raise SolveStop(f"{optimal}; then {failed}", st.OPTIMAL) from failed.__cause__
            raise
        if solved:
            return st.OPTIMAL, optimal
        if stop:
            raise SolveStop(f"the callback asked to stop after outer iteration {k}")
        if stalled(s.history, s.last_check, eps2):
            verdict = violation_check(problem, fed, s, eps, settings.inner)
            if verdict is not None:
                return st.INFEASIBLE, verdict
        evidence = unbounded(s.history, eps2)
        proof = evidence and ray_probe(problem, fed, w_prev, w_new, objective, eps2)
        if proof:
            return st.UNBOUNDED, evidence + proof
        verdict = outer_stall(s.history, eps, repeats=s.inner is not None   # not restarted
                              and s.inner.tau >= tau and (s.beta, s.eta) == (beta, eta))
        if verdict is not None:
            return verdict
    last = s.history[-1] if s.history else None
    failed = ("; ".join(KKT.of(last).failures(eps1, eps2, settings.eps_rel)) if last
              else "no outer iteration run")
    return (st.MAX_ITERATIONS,
            f"reached max_outer={max_outer} with {failed}{running_off(s.history)}")


def outer_stall(history, eps, repeats=True):
    """``(status, message)`` when the outer loop can no longer make progress, else None:

    * an outer iteration that changed neither w nor the multipliers, when the next
      subproblem is the same one (``repeats``: the same β and η, and a τ no tighter), so
      that every later iteration would repeat it exactly (a first subproblem whose τ₀
      the start point already meets changes nothing, and the next, tighter one moves:
      min −10⁻³w s.t. w ≤ 10⁴ ended ``numerical_error`` at w⁰ before that condition); or
    * ``STALL_WINDOW`` outer iterations in a row whose subproblems all ended unsolved
      (the inner solver's stall test — τ_k below the rounding level of ∇Ψ_k — or its
      cap) without halving the best residual ratio of the iterations before (measured: Maros–Meszaros
      QBORE3D, 5 clients, 100 such iterations of ~21 Newton steps, the stationarity
      between 1e-5 and 5e-5 at f* to 9 digits, until the time limit).

    With the last residual ratio ρ = max(stationarity/ε₁, feasibility/ε₂,
    complementarity/ε₂) ≤ ``INACCURATE_FACTOR`` it ends ``"optimal_inaccurate"``,
    beyond it ``"numerical_error"`` (no progress is left in floating point)."""
    if not history:
        return None
    last = history[-1]
    eps1, eps2 = eps
    if repeats and last["step"] == 0 and last["multiplier_step"] == 0:
        what = "an outer iteration changed neither w nor the multipliers"
    elif _subproblems_stalled(history, eps):
        what = (f"the last {STALL_WINDOW} subproblems ended unsolved (their residual "
                "stalled above τ_k) without halving the KKT residuals")
    else:
        return None
    ratio = _residual_ratio(last, eps)
    failures = "; ".join(KKT.of(last).failures(eps1, eps2))
    if ratio <= st.INACCURATE_FACTOR:
        return (st.OPTIMAL_INACCURATE,
                f"{what}: {failures}, within {st.INACCURATE_FACTOR:g}× tol")
    return st.NUMERICAL_ERROR, f"{what}: {failures}; no progress is left in floating point"


def _residual_ratio(record, eps):
    """max(stationarity/ε₁, feasibility/ε₂, complementarity/ε₂) of a history record."""
    eps1, eps2 = eps
    return max(record["stationarity"] / eps1, record["feasibility"] / eps2,
               record["complementarity"] / eps2)


def _subproblems_stalled(history, eps):
    """The last ``STALL_WINDOW`` subproblems ended unconverged and their best residual
    ratio is above half the best one before them."""
    if len(history) <= STALL_WINDOW:
        return False
    recent, before = history[-STALL_WINDOW:], history[:-STALL_WINDOW]
    if any(r["inner_converged"] for r in recent):
        return False
    best = min(_residual_ratio(r, eps) for r in before)
    return min(_residual_ratio(r, eps) for r in recent) > 0.5 * best


def _recorded(kkt):
    """The residuals and scales a history record keeps (:attr:`KKT.RECORDED`)."""
    return {key: getattr(kkt, key) for key in KKT.RECORDED}


#: ησ of the first subproblem where P holds a ridge of least weight σ > 0 (:func:`first_eta`)
RIDGE_CONTRACTION = 100.0


def first_eta(regularizer, dim, beta, beta_max, eta_max):
    """η of the first subproblem: β (the paper's Ψ_k), raised to ``RIDGE_CONTRACTION``/σ
    (at most η_max) when P = Σⱼ ½qⱼwⱼ² + … has a ridge in every coordinate, σ = min qⱼ > 0,
    and η may leave β (η_max > β_max; ``eta_max=beta_max`` keeps η = β).  The proximal
    point iteration contracts like 1/(1 + ησ) on a σ-strongly convex problem; the ridge
    already makes every subproblem σ-strongly convex, which is what the proximal term is
    there for, so η = β would only slow the outer loop (measured: NP, ridge 1e-3, 20
    clients × 200 rows, d = 2,000, ``inner="newton-basis"``: 69 rounds, β and η raised to
    10⁴ and 10⁵ on the way, against 36 with η = 10⁵ from the start)."""
    pieces = regularizer.pieces(dim)
    if eta_max <= beta_max or pieces is None or not np.all(pieces[0] > 0):
        return beta
    return max(beta, min(RIDGE_CONTRACTION / float(np.min(pieces[0])), eta_max))


#: subproblems in a row that stalled at feasible iterates before β is lowered
FLOOR_WINDOW = 3


def next_penalties(history, beta, eta, beta_max, eta_max, eps):
    """The penalty β and the proximal parameter η of the next subproblem: β ← min(10β,
    β_max) when, over the last outer iteration,

    * the violation at the newest iterate exceeds ε₂ and fell by less than 4× (the
      classic augmented-Lagrangian rule, Nocedal & Wright, Framework 17.3: update the
      multipliers when the violation fell enough, else raise the penalty), or
    * the stationarity exceeds ε₁ and the step ‖wᵏ⁺¹ − wᵏ‖∞ fell by less than 2×: the
      proximal point iteration contracts like 1/(1 + ησ) on a σ-strongly convex
      problem, so a slow contraction says η is small against the curvature (measured:
      NP with ridge 1e-3 at d = 2,000, 35 outer iterations at β = 100, 7 with the rule).

    η = β (the paper's Ψ_k) until β reaches β_max; from then on a slow contraction
    raises η alone, η ← min(10η, η_max): the proximal method of multipliers with its
    primal and dual steps apart (Rockafellar 1976; ProxQP's ρ and μ), a proximal point
    method in the metric diag(I/η, I/β).  Where P is flat (LP-like QPs) the iterates
    then cross the feasible set η/β times faster without a larger penalty, which would
    make the subproblems' conditioning worse (measured: Maros–Meszaros QBORE3D, steps of
    β·stationarity ≈ 11 an outer iteration over 200 iterations at β = 1e4).

    Early subproblems with a small β are well conditioned; the multiplier steps then
    make the final, larger-β ones nearly feasible from the start.

    β ← β/10 (not below the first β) when the last ``FLOOR_WINDOW`` subproblems, all at
    this β, ended unsolved (their residual stalled above τ_k) at feasible iterates
    (Definition 1 ≤ ε₂) that are not yet stationary: a subproblem's residual cannot go
    below its rounding, the AL Hessian β∇c∇cᵀ times the spacing of the floats at w, and
    what is left to fix is the multipliers, which a smaller β steps more finely
    (Maros–Meszaros QSHARE1B and QGROW22, ‖w‖∞ ≈ 10⁶: the stationarity stalled at 2–4·10⁻⁶
    at β = 10⁴, and reached 10⁻⁶ in the first subproblem at 10³)."""
    if len(history) < 2:
        return beta, eta
    eps1, eps2 = eps
    last, before = history[-1], history[-2]
    floor = history[-FLOOR_WINDOW:]
    if (len(floor) == FLOOR_WINDOW and beta > history[0]["beta"]
            and last["stationarity"] > eps1
            and all(not h["inner_converged"] and h["definition1"] <= eps2
                    and h["beta"] == beta for h in floor)):
        return beta / 10.0, eta
    infeasible = last["feasibility"] > eps2 and last["feasibility"] > 0.25 * before["feasibility"]
    slow = last["stationarity"] > eps1 and last["step"] > 0.5 * before["step"]
    if (infeasible or slow) and beta < beta_max:
        beta = min(10.0 * beta, beta_max)
    elif slow and not infeasible:
        eta = min(10.0 * eta, eta_max)
    return beta, max(eta, beta)
