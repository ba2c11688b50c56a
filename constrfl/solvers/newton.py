"""Proximal Newton on the subproblem (9), the server's side: ``inner="newton"``,
``inner="newton-cg"`` and cProx-AL.

Ψ_k = ψ + P with ψ = Σᵢ ALᵢ + 1/(2η)‖· − wᵏ‖² (a ridge P = λ/2‖·‖² is folded into ψ;
η = β in the paper, larger once β is at its cap: :func:`.proxal.next_penalties`).
The parties answer ``newton.eval``: their ALᵢ at trial points, and at the first point
its gradient and Hessian (upper triangle); the server receives only their sums
(:class:`~constrfl.federation.Sums`) and adds the quadratic terms.  One round evaluates a whole batch of step lengths t = 1, ½, ¼, …, 2⁻⁷ along the
step x → z (Newton point, or proximal Newton point argmin gᵀ(z−x) + ½(z−x)ᵀH(z−x) + P(z)),
with gradient and Hessian at t = 1, so a Newton step whose full step is accepted costs one
round; an accepted shorter step costs one more (for its gradient and Hessian).
Acceptance (as a sequential backtracking line search would decide, first t wins): Armijo
decrease of ψ + P, or at t = 1, near the solution where Ψ stalls at rounding level, a
halving of the stationarity residual without an increase of Ψ.  Stop: dist∞(0, ∇ψ(x) +
∂P(x)) ≤ τ_k, exact (``P.dist``) — condition (10).

Stall: a subproblem stops, not converged, after ``STALL_STEPS`` steps that neither halved
the residual nor lowered Ψ beyond rounding (a τ_k below the rounding level of ∇Ψ; the
outer loop then goes on, and :func:`.proxal.outer_stall` ends it once nothing changes).

Parties without Hessians (a ``Custom`` function without ``hess``): the server keeps a
BFGS model of ∇²ψ instead, one trial per round (each with its gradient).

cProx-AL (Algorithm 3) runs the same code on the pooled problem: a federation that counts
no traffic, one trial per round.

Newton-CG (``inner="newton-cg"``, a smooth P): no Hessians travel; the Newton direction
is the Galerkin step on the directions whose Hessian products the server holds, a block
of up to m new ones a round (m·d floats up a party), to a forcing term
(:meth:`Newton._krylov`, docs/algorithms.md (R1)–(R3)); the last solve's directions are
recycled: each evaluation also brings the Hessian's products with them, so that a step
whose recycled directions already meet the forcing term costs no product round.  For
large d.

Newton in the row bases (``inner="newton-basis"``, a smooth P): a party of row losses
sends its Hessian as the r×r core of (B1) (:mod:`constrfl.rowspace`), r its number of
independent rows, and once, in the first rounds (``newton.basis``), the basis itself;
the server's step is (B2)–(B3) (:mod:`.subspace`): ``"newton"``'s steps at O(d·k + r²)
floats a round; with a smooth P also the parties' convex inequalities to second order,
and the step the minimizer of that model (B6) (:mod:`.penaltymodel`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import NonFiniteIterate
from ..messages import MessageType as M, trial_points, unpack_upper
from ..prox import Zero
from ..records import saved_as
from ..rowspace import BASIS_COLUMNS
from ..local import accept_step, newton_direction
from .proxstep import prox_newton_point
from .subspace import BasisModel, ModelHessian

__all__ = ["Newton", "NewtonState", "STALL_STEPS", "TRIAL_STEPS", "EXACT_STEP_MAX_DIM"]

#: Newton steps without clear progress after which a subproblem stops (measured: an
#: unattainable τ_k on QADLITTL ran all 10,000 steps of ``max_inner``)
STALL_STEPS = 20
#: step lengths t = 1, ½, …, 2⁻⁷ evaluated in one round (values only but the first: a
#: float each up); measured against 4 (t down to ⅛): the Flower example (NP, 5 sites, tol
#: 1e-4) 53 -> 43 rounds (a raised β needs t ≈ 1/32 on its first step: 7 rejected
#: rounds of 4), the bench rows equal or fewer (FairClassifier 37 -> 33)
TRIAL_STEPS = 8
#: σ of the relative error criterion: a subproblem also ends once its residual is at
#: most σ‖x − wᵏ‖∞/η (docs/algorithms.md §5)
RELATIVE_ERROR = 0.5
#: the proximal Newton point (nonsmooth P) of the server's operator model (B5) is found
#: to a model residual of MODEL_FORCING·r·min(1, √r), r the residual at x: a forcing
#: sequence η_k = 0.1·min(1, √r_k) (inexact proximal Newton, superlinear as η_k → 0: Lee,
#: Sun & Saunders 2014; Byrd, Nocedal & Oztoprak 2016; the √ of Eisenstat & Walker).
#: min(0.1·τ_k, 0.1·r·min(1, r)), kept for a dense Hessian, far from the solution asked
#: it for 5 decades more than the step needs (measured: NP sparse d = 10⁵, L1: the first
#: model solve took > 150 s, 6,900 products with a 26M-entry Hessian; the solve ran out
#: of 300 s; now optimal in 45 rounds).  The dense step stays (near) exact: with the
#: forcing sequence there, the Maros–Meszaros QPs lost their exact active-set steps
#: (rounds sgm 38.7 -> 43.9 at K = 1, QSTAIR 85 -> 356, QSCTAP1 optimal -> numerical_error)
MODEL_FORCING = 0.1
#: ... up to this d (the reach of the Hessian's sum with a nonsmooth P,
#: settings.AUTO_NEWTON_NONSMOOTH_MAX_DIM); above it the dense Hessian's step takes the
#: forcing sequence too.  Measured, NP dense, ℓ1 1e-3, one BLAS thread: d = 2,000 over
#: 20 × 200 rows optimal in 31 rounds, 190 s (validation/results/bench_highdim_dense_l1.md),
#: where the forcing sequence took 42 rounds, 172 s; d = 1,500 over 20 × 30 rows 53
#: rounds in 120 s against 18.  (Up to 1,000 before the exact step's interior point stage
#: for ℓ1, proxstep._l1_by_interior_point: an exact step at d = 2,000 then took about
#: 20 s, and the solve ran out of 400 s after 24 rounds.)
EXACT_STEP_MAX_DIM = 2000
#: Newton-CG's block size m = min(BLOCK_SIZE, d, BLOCK_MAX_ENTRIES // d), at least 1:
#: the directions recycled into each evaluation, and the most new directions a product
#: round takes (m·d floats up a party a round: the budget of the Nyström sketch it
#: replaced).  Measured (NP, tol 1e-6, the defaults, one process): sparse d = 20,000,
#: m = 50: 13 rounds against 59 before (prototypes with m = 8, 16, 32: 40, 31, 17);
#: dense d = 5,000, m = 200: 83 rounds against 472 (prototypes with m = 32, 64: 139, 89)
#: (docs/benchmarks.md)
BLOCK_SIZE, BLOCK_MAX_ENTRIES = 200, 1_000_000
#: the most directions a Newton-CG solve keeps (a restart from its step beyond:
#: KRYLOV_MAX_ENTRIES // d of them, at least 2·m)
KRYLOV_MAX_ENTRIES = 10_000_000
#: a trial likely ends its subproblem, and takes the next one's first evaluation ahead
#: (docs/algorithms.md §3, "The next start ahead"), when the residual at x is within
#: AHEAD_RESIDUAL·τ_k or the last step cut it by AHEAD_REDUCTION or more (the model is
#: exact: a QP's step); measured on the rows of validation/bench.py and 39
#: Maros–Meszaros QPs (K = 5): 111 of 277 and 294 of 850 rounds ahead, 32 and 205 of them
#: a subproblem's last (every trial: 178 / 38 and 480 / 272)
AHEAD_RESIDUAL, AHEAD_REDUCTION = 100.0, 1e-2


def block_size(d):
    """m of :data:`BLOCK_SIZE`: Newton-CG's directions a block."""
    return max(1, min(BLOCK_SIZE, d, BLOCK_MAX_ENTRIES // d))


def orthonormal(vectors, W, m):
    """Up to m orthonormal rows spanning ``vectors`` (in order) outside the row space of
    the orthonormal W: projected off W twice as a block, then Gram–Schmidt (twice) one
    by one against the rows kept, a vector dropped where less than 10⁻⁸ of it is new."""
    n = W.shape[1]
    V = np.array(vectors, dtype=np.float64).reshape(-1, n)
    sizes = np.linalg.norm(V, axis=1)
    for _ in range(2):
        if W.shape[0]:
            V = V - (V @ W.T) @ W
    kept, k = np.empty((min(m, V.shape[0]), n)), 0
    for u, size in zip(V, sizes):
        for _ in range(2):
            u = u - (kept[:k] @ u) @ kept[:k]
        length = float(np.linalg.norm(u))
        if length > 1e-8 * size:
            kept[k], k = u / length, k + 1
            if k == m:
                break
    return kept[:k]


def galerkin(W, HW, g):
    """``(d, r)``: the minimizer d = Wᵀc of the model gᵀd + ½dᵀHd on the row space of the
    orthonormal W, (WHWᵀ)c = −Wg (R2), from HW (its rows' products with H; the
    eigendecomposition of WHWᵀ without the eigenvalues below 10⁻¹² of the largest: a
    descent step where H is indefinite), and its residual r = −g − Hd."""
    if not W.shape[0]:
        return np.zeros_like(g), -g
    G = W @ HW.T
    lam, U = np.linalg.eigh(0.5 * (G + G.T))
    keep = lam > 1e-12 * max(float(lam[-1]), 0.0)
    c = U[:, keep] @ ((U[:, keep].T @ -(W @ g)) / lam[keep])
    return c @ W, -g - c @ HW


@saved_as("newton-state")
@dataclass
class NewtonState:
    """The server's state between rounds of one subproblem (plain data)."""

    wk: np.ndarray
    tau: float
    x: np.ndarray
    eta: float = None                 # η_k of the proximal term ‖x − wᵏ‖²/(2η_k)
    f: float = np.nan                 # ψ(x)
    g: np.ndarray | None = None       # ∇ψ(x); None: x still to be evaluated
    H: np.ndarray | None = None       # ∇²ψ(x), or the BFGS model (newton-basis: H_D)
    cores: dict | None = None         # newton-basis: each party's core Cᵢ at x (B1)
    models: dict | None = None        # and its inequalities' models there (B6)
    bases: dict | None = None         # newton-basis: each party's Bᵢᵀ received so far
    r: float = np.inf                 # dist∞(0, ∇ψ(x) + ∂P(x))
    iterations: int = 0               # Newton steps taken
    quasi: bool = False               # BFGS model instead of Hessians
    stuck: bool = False               # the line search found no decrease
    z: np.ndarray | None = None       # the step being tried: its full-step point,
    slope: float = 0.0                # the slope of its line search
    t: float = 1.0                    # and the next step length to try
    cg: dict | None = None            # a running Newton-CG solve: W, HW, d, r, newest, it
    basis: np.ndarray | None = None   # Newton-CG's directions to recycle (m × d)
    block: dict | None = None         # and their products at x: V, HV (R1)
    mark: tuple = (np.inf, np.inf)    # (Ψ, residual) at the last clear progress,
    since: int = 0                    # and the Newton steps taken since
    subproblem: int = -1              # k of the outer loop (-1: none, e.g. cProx-AL's or
    #                                   the infeasibility check's), sent with each message
    reduction: float = 1.0            # r after / r before of the last step (of the last
    #                                   subproblem's last step, before this one's first)

    @property
    def certificate(self):
        """dist∞(0, ∂Ψ_k(x)) at the current point (what τ_k bounds)."""
        return self.r


class Newton:
    """Proximal Newton with ``batch`` step lengths per round (1: one at a time)."""

    def __init__(self, regularizer, dim, max_iter, batch=TRIAL_STEPS,
                 message_type=M.NEWTON_EVAL, cg=False, max_cg=250, basis=False):
        q = regularizer.ridge_weights(dim)
        # a smooth P = ½Σqⱼxⱼ² is folded into ψ (a scalar for a plain ridge)
        self.ridge = 0.0 if q is None else (q[0] if np.all(q == q[0]) else q)
        self.P = regularizer if q is None else Zero()
        if cg and q is None:
            raise ValueError(f"inner='newton-cg' needs a smooth regularizer (none or a "
                             f"ridge such as SquaredL2), got {regularizer!r}; use "
                             f"inner='newton-basis', 'admm' or 'newton'")
        self.max_iter, self.batch, self.cg, self.max_cg = max_iter, batch, cg, max_cg
        self.start_type = message_type
        # Hessians: with every evaluation (federated), lazily (pooled), or products (CG)
        self.order = 1 if cg else 2
        self.flags = {"basis": True} if basis else {}
        if basis and q is not None:     # the inequalities' models (B6): a smooth P's step
            self.flags["models"] = True
        self.model = BasisModel() if basis else None
        self.hvp_flags = {"violation": True} if message_type == M.FEAS_EVAL else {}

    def start_message(self, k, beta, previous=None):
        return {"order": self.order, **self.flags, **self._recycled(previous)}, None

    def begin(self, sums, wk, tau, beta, previous=None, eta=None):
        s = NewtonState(wk=wk, tau=tau, x=wk, eta=beta if eta is None else eta,
                        reduction=1.0 if previous is None else previous.reduction)
        if self.model is not None:
            s.bases = {} if previous is None else previous.bases
        if self.cg and previous is not None:        # the curvature changes little
            s.basis = previous.basis
        self._take(s, sums, wk, hessian=self.order == 2)
        return s

    def _recycled(self, s):
        """The payload's recycled directions ``v`` (Newton-CG, once it has any) (R1)."""
        if not self.cg or s is None or s.basis is None:
            return {}
        return {"v": s.basis.ravel()}

    # -- aggregation ----------------------------------------------------------------
    def _psi_values(self, sums, points, s):
        """ψ at each point: Σᵢ ALᵢ + 1/(2η)‖x − wᵏ‖² + λ/2‖x‖²."""
        out = []
        for j, x in enumerate(points):
            d = x - s.wk
            out.append(float(sums["values"][j]) + 0.5 / s.eta * float(d @ d)
                       + self._ridge_value(x))
        return out

    def _ridge_value(self, x):
        if np.ndim(self.ridge):
            return 0.5 * float(x @ (self.ridge * x))
        return 0.5 * self.ridge * float(x @ x)

    def _take(self, s, sums, x, f=None, hessian=True):
        """Move to x with the sums' value, gradient and (if every party sent one)
        Hessian there; without Hessians from every party, the BFGS model."""
        g = sums["grad"] + (x - s.wk) / s.eta + self.ridge * x
        if not np.all(np.isfinite(g)):
            raise NonFiniteIterate("non-finite gradient of the subproblem")
        cores = models = None
        shown = sums.disclosed
        compact = {**shown.get("core", {}), **{n: {"gram": v, "lowrank": shown["lowrank"][n]}
                                                for n, v in shown.get("gram", {}).items()}}
        whole = sums.get("no_hessian", 0) == 0         # no party lacks a Hessian
        if compact and whole and sums.counts.get("hess", 0) + len(compact) == sums.parties:
            H = unpack_upper(sums["hess"], x.size) if "hess" in sums else None
            cores = {n: (unpack_upper(C, _side(C.size)) if isinstance(C, np.ndarray) else C)
                     for n, C in compact.items()}
            models = shown.get("models") or None
        elif whole and sums.complete("hess"):
            H = unpack_upper(sums["hess"], x.size)
            H.flat[::x.size + 1] += 1.0 / s.eta + self.ridge
        elif hessian or s.quasi:                # asked for, but some party has none
            H = self._bfgs(s, x, g)
        else:                                   # not asked for: fetched when needed
            H = None
        r_before = s.r if s.g is not None else None
        s.x, s.g, s.H, s.cores, s.models = x, g, H, cores, models
        s.block = None                  # the recycled directions' products at x (R1)
        if "hv" in sums:
            V = s.basis
            s.block = {"V": V, "HV": sums["hv"].reshape(V.shape)
                       + (1.0 / s.eta + self.ridge) * V}
        s.f = self._psi_values(sums, [x], s)[0] if f is None else f
        s.r = self.P.dist(x, g)
        if r_before:
            s.reduction = s.r / r_before
        F = s.f + self.P.value(x)
        if s.r <= 0.5 * s.mark[1] or F < s.mark[0] - 1e-10 * (1.0 + abs(s.mark[0])):
            s.mark, s.since = (F, s.r), 0
        else:
            s.since += 1

    def _bfgs(self, s, x, g):
        """BFGS model of ∇²ψ (Nocedal & Wright (6.19)), started from the scaled
        identity (6.20) after the first step; the identity before it."""
        s.quasi = True
        if s.g is None or s.H is None:
            return np.eye(x.size)
        step, y = x - s.x, g - s.g
        sy = float(step @ y)
        if sy <= 1e-12 * float(np.linalg.norm(step) * np.linalg.norm(y)):
            return s.H                                   # no curvature information
        B = s.H if s.iterations > 0 else np.eye(x.size) * (float(y @ y) / sy)
        Bs = B @ step
        return B - np.outer(Bs, Bs) / float(step @ Bs) + np.outer(y, y) / sy

    # -- the rounds -----------------------------------------------------------------
    def _send(self, fed, s, message_type, payload):
        """One round to every party (the server's own included), with the subproblem's
        number k where the outer loop set one (the parties take the step taken ahead
        with the first message of k + 1: :func:`constrfl.parties.settle`)."""
        if s.subproblem >= 0:
            payload = dict(payload, subproblem=s.subproblem)
        return fed.broadcast(message_type, payload, include_server=True)

    def _ahead(self, s, msg, ahead):
        """Whether this trial takes the next subproblem's first evaluation ahead (it
        likely ends the subproblem: ``AHEAD_RESIDUAL``, ``AHEAD_REDUCTION``): only
        where that evaluation is the start round's, bit for bit (the AL term's own
        Hessians or gradients, no compact forms)."""
        return (ahead is not None and self.model is None and not s.quasi
                and msg["order"] == self.order
                and (s.r <= AHEAD_RESIDUAL * s.tau or s.reduction <= AHEAD_REDUCTION))

    def run(self, fed, s, beta, kkt_met=None, ahead=None):
        """Newton steps until the stop test or ``max_iter``; ``s`` is updated after
        each completed round (the step being tried and a running CG solve included).
        Returns ``(x, converged)``.  The stop test is (10) with τ_k raised to
        σ‖x − wᵏ‖∞/η when that is larger (:func:`relative_tolerance`); ``s.tau`` then
        records the τ_k it met.  ``beta`` is η for a state saved without one (then
        η = β, the paper's Ψ_k).  With ``kkt_met(x, sums)``, the evaluations also
        ask for the parties' KKT shares at (x, μ⁺(x), ν⁺(x)) (``kkt``), and the
        subproblem ends at the first evaluated x where it returns True.  With
        ``ahead`` (a :class:`~.inner.NextStart`), a trial that likely ends the
        subproblem also asks for the next one's first evaluation (``next_beta``, with
        ``kkt``); when the subproblem ends on it, ``ahead`` holds that round's sums."""
        P = self.P
        if s.eta is None:
            s.eta = beta
        if ahead is not None:
            s.subproblem = ahead.k
        ask = {"kkt": True} if kkt_met is not None else {}
        while True:
            if s.g is not None and s.r > s.tau:
                s.tau = max(s.tau, relative_tolerance(s, s.r))
            if s.g is not None and (s.r <= s.tau or s.stuck or s.iterations >= self.max_iter
                                    or s.since >= STALL_STEPS):
                return s.x, s.r <= s.tau
            if ahead is not None:               # a round follows: what it kept is stale
                ahead.drop()
            if s.g is None or (s.H is None and s.cores is None and not self.cg):
                sums = self._send(fed, s, self.start_type,           # evaluate at x
                                  {"w": s.x, "order": self.order, **self.flags, **ask,
                                   **self._recycled(s)})
                self._take(s, sums, s.x, hessian=self.order == 2)
                if ask and kkt_met(s.x, sums):
                    return s.x, s.r <= s.tau
                continue
            if s.cores is not None and self._fetch_bases(fed, s):
                continue
            if s.z is None:
                s.z, s.slope = self._step(fed, s)
                s.t = 1.0
            x, z = s.x, s.z
            batch = 1 if s.quasi else self.batch
            w = z if s.t == 1.0 else x + s.t * (z - x)
            msg = {"w": w, "order": 2 if batch > 1 and not self.cg else 1, **self.flags,
                   **ask, **self._recycled(s)}
            if batch > 1:
                msg.update(x=x, t=np.array([0.5 ** j for j in range(1, batch)]))
            taken = self._ahead(s, msg, ahead)
            if taken:
                msg.update(kkt=True, next_beta=ahead.beta)
            sums = self._send(fed, s, self.start_type, msg)
            points = trial_points(msg)
            values = self._psi_values(sums, points, s)
            j = self._first_accepted(sums, points, values, s.f + P.value(x), s.slope,
                                     s.t, s)
            if j is None:
                s.t = _next_length(s.t * 0.5 ** (batch - 1), values[-1] + P.value(points[-1])
                                   - s.f - P.value(x), s.slope)
                s.stuck = s.t < 1e-12                  # no decrease along the step
                continue
            s.z = None
            s.iterations += 1
            if j == 0:
                self._take(s, sums, w, values[0], hessian=msg["order"] == 2)
                if ask and kkt_met(w, sums):
                    return w, s.r <= s.tau
                if taken:                       # valid while no other round follows
                    ahead.keep(sums)
            else:                               # its gradient (and Hessian): next round
                s.x, s.f, s.g, s.H, s.cores, s.models = (points[j], values[j], None, None,
                                                         None, None)

    def _step(self, fed, s):
        """The trial point z of the next step and the slope of its line search."""
        x, g, P = s.x, s.g, self.P
        check = fed.control.check           # the model's products end at max_time
        if self.cg:
            d = self._krylov(fed, s)
        elif s.cores is not None and isinstance(P, Zero):
            d = self.model.direction({n: s.bases[n] for n in s.cores}, s.cores, s.H,
                                     1.0 / s.eta + self.ridge, g, s.models, check)
        elif isinstance(P, Zero):
            d = newton_direction(s.H, g)
        else:                       # self.ridge is 0 here: P keeps its own quadratic part
            if s.cores is None and x.size <= EXACT_STEP_MAX_DIM:
                # dense: (near) exact, as the QPs' active sets need
                H, tol = s.H, min(0.1 * s.tau, 0.1 * s.r * min(1.0, s.r))
            else:                   # an operator (B5), or a large dense H: a forcing sequence
                H = (ModelHessian.of_matrix(s.H, check) if s.cores is None else
                     self.model.operator({n: s.bases[n] for n in s.cores}, s.cores, s.H,
                                         1.0 / s.eta, x.size, check))
                tol = MODEL_FORCING * s.r * min(1.0, np.sqrt(s.r))
            z = prox_newton_point(x, g, H, P, tol)
            if not np.all(np.isfinite(z)):
                raise NonFiniteIterate("non-finite Newton step")
            return z, min(float(g @ (z - x)) + P.value(z) - P.value(x), 0.0)
        if not float(g @ d) < 0:
            d = -g
        if not np.all(np.isfinite(d)):
            raise NonFiniteIterate("non-finite Newton step")
        return x + d, float(g @ d)

    def _krylov(self, fed, s):
        """The Newton direction from Hessian products (docs/algorithms.md (R1)–(R3)):
        the Galerkin step on every direction W whose product at x the server holds
        (:func:`galerkin`), first the recycled block (its products came with x's
        evaluation, (R1)), then blocks of up to m new directions a round — the residual
        r = −g − Hd and the images of the newest block, orthonormalized against W
        (:func:`orthonormal`; without a recycled block, the Krylov space of g: CG's) —
        until ‖r‖ ≤ min(½, √‖g‖)·‖g‖ (a forcing term: truncated Newton, Nocedal &
        Wright §7.1) or ``max_cg`` product rounds.  Each party sends ∇²ALᵢ(x) times a
        block; the server adds (1/η + λ) times it.  Its state lives in ``s.cg`` between
        rounds.  The directions recycled into the next evaluations: d, g, the newest
        images and W, newest first, orthonormalized, m of them (R3)."""
        g, d_size = s.g, s.g.size
        shift = 1.0 / s.eta + self.ridge
        m = block_size(d_size)
        gnorm = float(np.sqrt(g @ g))
        tol = min(0.5, np.sqrt(gnorm)) * gnorm
        if s.cg is None:
            W, HW = ((s.block["V"], s.block["HV"]) if s.block is not None
                     else (np.zeros((0, d_size)), np.zeros((0, d_size))))
            s.cg = dict(zip("dr", galerkin(W, HW, g)), W=W, HW=HW, newest=HW, it=0)
        c = s.cg
        most = max(2 * m, KRYLOV_MAX_ENTRIES // d_size)
        while c["it"] < self.max_cg and np.sqrt(c["r"] @ c["r"]) > tol:
            W, HW = c["W"], c["HW"]
            size = float(np.linalg.norm(c["d"]))
            if W.shape[0] + m > most and size > 0:      # restart from the step
                W, HW = c["d"][None] / size, (-g - c["r"])[None] / size
            N = orthonormal([c["r"], *c["newest"]], W, m)
            if not N.shape[0]:
                break
            sums = self._send(fed, s, M.NEWTON_HVP, {"w": s.x, "v": N.ravel(),
                                                     **self.hvp_flags})
            HN = sums["hv"].reshape(N.shape) + shift * N
            W, HW = np.vstack([W, N]), np.vstack([HW, HN])
            s.cg = c = dict(zip("dr", galerkin(W, HW, g)), W=W, HW=HW, newest=HN,
                            it=c["it"] + 1)
        s.cg = None
        # (W's newest m rows suffice: they alone span m directions)
        s.basis = orthonormal([c["d"], g, *c["newest"], *c["W"][::-1][:m]],
                              np.zeros((0, d_size)), m)
        return c["d"]

    def _fetch_bases(self, fed, s):
        """One ``newton.basis`` round when a party's basis is not complete yet
        (``BASIS_COLUMNS`` more columns from each, or a sparse party's whole pattern
        (B4)); False when all are."""
        have = {n: (0 if n not in s.bases else len(s.bases[n])) for n in s.cores}
        short = [have[n] for n, C in s.cores.items()
                 if (have[n] == 0 if isinstance(C, dict) else have[n] < C.shape[0])]
        if not short:
            return False
        start = min(short)
        shown = fed.broadcast(M.NEWTON_BASIS, {"start": start, "count": BASIS_COLUMNS},
                              include_server=True).disclosed
        bases = dict(s.bases)
        for n, basis in shown.get("basis", {}).items():
            if n not in s.cores or have[n] != start:
                continue
            pattern = shown.get("pattern", {}).get(n, np.zeros(0))
            if isinstance(s.cores[n], dict) and pattern.size:
                bases[n] = pattern
            elif basis.size:
                rows = basis.reshape(-1, s.x.size)
                bases[n] = rows if n not in bases else np.vstack([bases[n], rows])
        s.bases = bases
        return True

    def _first_accepted(self, sums, points, values, F, slope, t, s):
        """Index of the first accepted trial point (None if none is)."""
        P = self.P
        for j, (x, val) in enumerate(zip(points, values)):
            r_new = None
            if j == 0:
                g = sums["grad"] + (x - s.wk) / s.eta + self.ridge * x
                r_new = P.dist(x, g) if np.all(np.isfinite(g)) else None
            if accept_step(val + P.value(x), F, slope, t * 0.5 ** j, r_new, s.r):
                return j
        return None


def relative_tolerance(s, r):
    """σ‖x − wᵏ‖∞/η if the residual r meets it, else 0 (the relative error criterion of
    Solodov & Svaiter for the proximal point method, in the form Eckstein & Silva give it
    for augmented Lagrangians: the subproblem's error may be a fraction of the step it
    takes; measured: the Maros–Meszaros QGROW15 (5 clients) moved 3.6e4 an outer
    iteration for 25 outer iterations with 21 Newton steps each at an unattainable τ_k;
    with the criterion, the same iterates at one step each)."""
    bound = RELATIVE_ERROR * float(np.max(np.abs(s.x - s.wk), initial=0.0)) / s.eta
    return bound if r <= bound else 0.0


def _next_length(t, rise, slope):
    """The step length to try after a batch whose shortest length t raised the
    composite objective by ``rise`` (no Armijo decrease): the minimizer −slope/c of the
    quadratic through the slope at 0 and that value (Nocedal & Wright §3.5), between t/16
    and t/2.  Past a constraint that turns active along the step the objective is steeply
    quadratic, and halving would take many rounds to get there (a lower floor, t/1024,
    cost rounds: the quadratic overshoots the curvature and the steps come out short)."""
    c = 2.0 * (rise - slope * t) / (t * t)
    guess = -slope / c if c > 0 else 0.5 * t
    return float(min(max(guess, t / 16.0), 0.5 * t))


def _side(packed):
    """r of an upper triangle of r(r+1)/2 entries."""
    return int(round((np.sqrt(8 * packed + 1) - 1) / 2))
