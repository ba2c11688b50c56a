"""Algorithm 2, the server's side: inexact ADMM on the consensus form (24) of (9).

The blocks are the clients (over the federation) and, when the server has functions of
its own (f₀, c₀, h₀), the server's block (its AL₀ as a consensus block like a client's,
answered in the server's process without traffic).  Their side is the ``admm.start`` and
``admm.step`` handlers of :mod:`constrfl.parties.admm`; the block step's tuning
constants (named below), the acceptance test of its local Newton method and the choice
between its generic and compiled implementations are in :mod:`.block`.  Per round the
server broadcasts wᵗ⁺¹ and τ (d + 1 floats); each block's reply is summed (the server
sees only Σᵢ): its stationarity share eᵢ, Rᵢvᵢ with vᵢ = uᵢ + Rᵢ⁻¹λᵢ, its next ρᵢ and κᵢ²
(2d + 2 sums).  Deviations from the paper, each measured (docs/algorithms.md §4):

* The server's w-step is always exact, and needs only sums: the closed form of (18),

      σ = Σᵢ ρᵢ + γ,  a = (Σᵢ ρᵢ vᵢ + γ wᵏ) / σ,  wᵗ⁺¹ = prox_{P/σ}(a),  γ = 1/((n+1)β),

  or, with penalty metrics Rᵢ = ρᵢI + JᵢᵀJᵢ (below), the linear system
  (σI + ∇²P + Σᵢ JᵢᵀJᵢ) w = Σᵢ Rᵢvᵢ + γwᵏ, by the eigendecomposition of Σᵢ JᵢᵀJᵢ (fixed
  within a subproblem: one per subproblem, whatever the ρᵢ); ε₀,ₜ = 0 (the server's own
  functions are a block, not part of this step).
* The stop test is ‖Σᵢ eᵢ‖∞ ≤ τ with eᵢ = ∇φᵢ(wᵗ⁺¹) + λᵢᵗ − Rᵢ(wᵗ⁺¹ − uᵢᵗ), the vector
  whose norm is (22)'s εᵢ.  Since wᵗ⁺¹ minimizes P + γ/2‖· − wᵏ‖² + Σᵢ ½‖· − vᵢ‖²_Rᵢ,
  Σᵢ eᵢ ∈ ∂Ψ_k(wᵗ⁺¹) whatever the Rᵢ, vᵢ are, as long as each eᵢ uses the Rᵢ and uᵢ,
  λᵢ the server's step used — which is why a block computes eᵢ before it changes ρᵢ.
  So this certifies (10) as (23) does, never looser than Σᵢ εᵢ, and only the sum is
  needed.
* **Per-block penalties, scale-free.**  Each block adapts its own ρᵢ from what it
  measures about its own φᵢ: every ``SPECTRAL_EVERY`` rounds rᵢ = ‖Δλᵢ‖/‖Δw‖ (the
  curvature its dual sees along the server's motion: the spectral-radius approximation
  of McCann & Wohlberg, 2024, node by node as in Xu et al.'s adaptive consensus ADMM,
  ICML 2017), and ρᵢ ← ρᵢ^(1−a)·rᵢ^a,
  a = ``SPECTRAL_WEIGHT``/(1 + (j/``SPECTRAL_HORIZON``)²) at its j-th change (a geometric
  relaxation with summable weights: the total change is bounded, ρᵢ settles).  The
  first ρᵢ is det(∇²φᵢ(w⁰))^(1/d).  Both are homogeneous of degree one in the block's
  curvature: scaling one client's data scales its ρᵢ, not anyone else's rounds.
* **Penalty metric.**  A block's penalty is Rᵢ = ρᵢI + JᵢᵀJᵢ, the rows of Jᵢ √β times
  the gradients at wᵏ of its equalities and the inequalities it expects active: the
  Gauss-Newton curvature β∇c∇cᵀ of its AL term, far stiffer than the rest of φᵢ, which
  no scalar ρᵢ matches.  Fixed within a subproblem; none in the first (multipliers still
  zero); only for P zero, a ridge or L1, where (18) stays exact: one linear solve, or
  with L1 a finite Newton on its dual in ℝʳ, r = rank ΣJᵢᵀJᵢ (:func:`metric_prox_step`).  Up
  to d = ``METRIC_MAX_DIM`` each block sends the d(d+1)/2 sums of JᵢᵀJᵢ once a
  subproblem; above, the sketch JᵢᵀJᵢΩ of k = min(m + 8, d) columns (m = Σᵢ constraint
  rows, counted once), whose sum gives ΣJᵢᵀJᵢ = U diag(λ) Uᵀ exactly (rank ≤ m:
  :func:`nystrom`; docs/algorithms.md §9).  The certificate holds with Rᵢ in place of ρᵢ.
* **Over-relaxation.**  A block solves (19) and updates λᵢ by (20) at
  ŵ = α·wᵗ⁺¹ + (1 − α)·uᵢᵗ, α = ``RELAXATION``, instead of wᵗ⁺¹ (Boyd et al. 2011,
  §3.4.3).  The certificate is unchanged: it needs only that eᵢ uses the vᵢ the w-step
  used.
* **Local accuracy** of (19): ‖∇‖∞ ≤ min(τ, ``LOCAL_FRACTION``·ρᵢ‖wᵗ⁺¹ − wᵗ‖∞) (at
  least τ/1000), an error that follows the ADMM's own progress (summable, Eckstein &
  Bertsekas 1992).
* **Warm start.**  The first subproblem starts cold (λᵢ = 0, uᵢ = w⁰); later ones keep
  (uᵢ, λᵢ, ρᵢ) from the last; each block uploads its new Jᵢ and vᵢ = uᵢ + Rᵢ⁻¹λᵢ.
* **Early stop.**  By the identity above dist∞(0, ∂ℓ(wᵗ⁺¹, μ⁺, ν⁺)) ≤ ‖Σᵢ eᵢ‖∞ +
  ‖wᵗ⁺¹ − wᵏ‖∞/β for the multipliers of step 3 at wᵗ⁺¹, and √(Σᵢ κᵢ²) is the exact
  Definition-1 residual there (2-norm over every block's rows): once both meet (ε₁, ε₂)
  the subproblem stops, and the outer loop's KKT round (recomputed by the parties)
  confirms it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import NonFiniteIterate
from ..messages import MessageType as M, unpack_upper
from ..prox import L1, SquaredL2, Zero
from ..records import saved_as
from .sketch import nystrom, random_sketch

__all__ = ["ADMM", "ADMMState", "METRIC_MAX_DIM", "metric_prox_step"]

#: the penalty metrics Rᵢ = ρᵢI + JᵢᵀJᵢ as their sum, a d×d matrix sent once a subproblem
#: as d(d+1)/2 sums, up to this d; above it as a sketch (ΣJᵢᵀJᵢ)Ω of k columns
METRIC_MAX_DIM = 1000
#: the sketch's columns beyond the number m of constraint rows (rank ΣJᵢᵀJᵢ ≤ m; at most
#: d columns), and its most entries, k·d: the dense metric's largest upload (beyond it,
#: e.g. k = 29 at d = 10⁶, a block's sketch would be 0.9 GB, the blocks keep scalar ρᵢ)
SKETCH_OVERSAMPLING = 8
SKETCH_MAX_ENTRIES = METRIC_MAX_DIM * (METRIC_MAX_DIM + 1) // 2
#: Newton steps of :func:`metric_prox_step` at most (it ends when the active set holds)
METRIC_PROX_STEPS = 100


@saved_as("admm-state")
@dataclass
class ADMMState:
    """The server's state between two rounds of one subproblem (plain data)."""

    wk: np.ndarray          # centre of the subproblem
    tau: float              # its tolerance τ_k
    w: np.ndarray           # current wᵗ
    Rv: np.ndarray          # Σᵢ Rᵢvᵢ, vᵢ = uᵢ + Rᵢ⁻¹λᵢ (the blocks' uploads, summed)
    rho: float              # Σᵢ ρᵢ
    iterations: int = 0     # rounds done in this subproblem
    certificate: float = np.inf
    early: bool = False     # ‖Σᵢ eᵢ‖∞ + ‖w − wᵏ‖∞/β ≤ ε₁ and √(Σᵢ κᵢ²) ≤ ε₂: the early stop
    done: bool = False      # stopped (converged, early, or max_iter)
    metric: np.ndarray = None   # Σᵢ JᵢᵀJᵢ (upper triangle) of the penalties ρᵢI + JᵢᵀJᵢ,
    #                             None when no block has rows
    rows: float = None          # Σᵢ (constraint rows of block i): the sketches' rank bound
    metric_basis: np.ndarray = None    # Σᵢ JᵢᵀJᵢ = U diag(λ) Uᵀ from its sketch (above
    metric_values: np.ndarray = None   # METRIC_MAX_DIM): U (d×r) and λ (r)

    @property
    def converged(self):
        """(23) aggregated, or the early stop."""
        return self.certificate <= self.tau or self.early


class ADMM:
    """Algorithm 2 with the settings of one solve (see the module docstring).

    ``rho``: the clients' first ρᵢ (one per client; the server's block takes their
    mean), or None: each block chooses its own.  ``adaptive_rho``: the blocks' spectral
    rule (False: ρᵢ fixed, as in the paper).  ``eps``: (ε₁, ε₂) of the early stop.  The
    options are a :class:`~constrfl.settings.ADMMSettings`' (their one default is
    there), ``local_solver`` resolved (``"newton"``, ``"newton-cg"`` or ``"lbfgs"``).
    """

    start_type = M.ADMM_START

    def __init__(self, names, rho, regularizer, eps, *, max_iter, adaptive_rho,
                 local_max_iter, local_solver, dim):
        self.initial_rho = ({} if rho is None else
                            dict({n: float(r) for n, r in zip(names, rho)},
                                 server=float(np.mean(rho))))
        self.P, self.n, self.eps = regularizer, len(names), eps
        self.max_iter = max_iter
        exact = isinstance(regularizer, (Zero, SquaredL2, L1))      # (18) stays exact
        self.metric = exact and (dim is None or dim <= METRIC_MAX_DIM)
        self.sketch = exact and not self.metric
        self._eigen = None     # (metric, λ, Q): Σᵢ JᵢᵀJᵢ = Q diag(λ) Qᵀ, this subproblem
        self.local = {"local_max_iter": int(local_max_iter),
                      "local_hessian": local_solver == "newton",
                      "adaptive": bool(adaptive_rho)}
        if local_solver == "newton-cg":            # (the field only where it is asked)
            self.local["local_products"] = True

    def gamma(self, beta):
        return 1.0 / ((self.n + 1) * beta)

    def start_message(self, k, beta, previous=None):
        """Payload of ``admm.start``: the clients' share γ of the proximal term (the
        server's block has none: its share is in the w-step); cold without a
        ``previous`` subproblem, with each block's first ρᵢ if given."""
        cold = previous is None
        payload = {"gamma": self.gamma(beta), "cold": cold, "metric": self.metric,
                   **self.local}
        if self.sketch and cold:
            payload["count_rows"] = True
        elif self.sketch and previous.rows:
            k = min(int(previous.rows) + SKETCH_OVERSAMPLING, previous.wk.size)
            if k * previous.wk.size <= SKETCH_MAX_ENTRIES:
                payload["sketch"] = random_sketch(previous.wk.size, k)
        per_client = ({n: {"rho": r} for n, r in self.initial_rho.items()} if cold
                      else {})
        per_client["server"] = dict(per_client.get("server", {}), gamma=0.0)
        return payload, per_client

    def begin(self, sums, wk, tau, beta, previous=None, eta=None):
        """The subproblem's first state from the sums of the blocks' ``admm.start``
        replies: Σᵢ ρᵢ, Σᵢ Rᵢvᵢ and Σᵢ JᵢᵀJᵢ.  Algorithm 2's Ψ_k has η = β
        (:class:`~constrfl.settings.ADMMSettings`)."""
        if eta not in (None, beta):
            raise ValueError(f"the ADMM's proximal term has eta = beta, got {eta!r}")
        metric, sketch = sums.get("metric"), sums.get("metric_sketch")
        rows = sums.get("constraint_rows", None if previous is None else previous.rows)
        basis = values = None
        if sketch is not None and np.any(sketch):       # (sums arrive flat: d×k)
            Y = np.reshape(sketch, (wk.size, -1))
            basis, values = nystrom(Y, random_sketch(*Y.shape))
        return ADMMState(wk=wk, tau=tau, w=wk, Rv=sums["Rv"], rho=sums["rho"],
                         metric=metric if metric is not None and np.any(metric) else None,
                         rows=rows, metric_basis=basis, metric_values=values)

    def w_step(self, s, gamma):
        """(18) with the penalties Rᵢ = ρᵢI + JᵢᵀJᵢ: w = argmin P + γ/2‖· − wᵏ‖² +
        Σᵢ ½‖· − vᵢ‖²_Rᵢ; the prox of P when no block has a metric, else the linear
        system (bI + M)w = Σᵢ Rᵢvᵢ + γwᵏ, b = σ + ∇²P (P zero or a ridge) and
        M = Σᵢ JᵢᵀJᵢ, by M's eigendecomposition (one a subproblem; from the sketch,
        M = U diag(λ) Uᵀ of rank r ≤ m, the system by Woodbury), refined once.  With
        P = λ‖·‖₁: :func:`metric_prox_step`.  (No other P asks for the metric.)"""
        sigma = s.rho + gamma
        if s.metric is None and s.metric_basis is None:
            return self.P.prox((s.Rv + gamma * s.wk) / sigma, 1.0 / sigma)
        if isinstance(self.P, L1):
            return metric_prox_step(self.P, s.Rv + gamma * s.wk, sigma, *self._factor(s))
        b = sigma + (self.P.lam if isinstance(self.P, SquaredL2) else 0.0)
        if s.metric is None:
            U, lam = s.metric_basis, s.metric_values

            def M_times(x):
                return U @ (lam * (U.T @ x))

            def solve(r):          # (bI + UΛUᵀ)⁻¹r, b a scalar or a diagonal (Woodbury)
                Ur = U.T @ (r / b)
                inner = np.diag(1.0 / lam) + U.T @ (U / np.reshape(b, (-1, 1)))
                return r / b - (U @ np.linalg.solve(inner, Ur)) / b

            rhs = s.Rv + gamma * s.wk
            w = solve(rhs)
            return w + solve(rhs - b * w - M_times(w))
        M = unpack_upper(s.metric, s.wk.size)
        if np.ndim(b):                     # a weighted ridge: bI + M has no shared basis
            system = M + np.diag(b)

            def solve(r):
                return np.linalg.solve(system, r)
        else:
            lam, Q = self._eigen_of(s, M)

            def solve(r):
                return Q @ ((Q.T @ r) / (lam + b))
        rhs = s.Rv + gamma * s.wk
        w = solve(rhs)
        # one step of iterative refinement: the certificate is exact only to the
        # w-step's own residual
        return w + solve(rhs - b * w - M @ w)

    def _eigen_of(self, s, M=None):
        """``(λ, Q)``: M = Σᵢ JᵢᵀJᵢ = Q diag(λ) Qᵀ, once a subproblem."""
        if self._eigen is None or self._eigen[0] is not s.metric:
            M = unpack_upper(s.metric, s.wk.size) if M is None else M
            self._eigen = (s.metric, *np.linalg.eigh(M))
        return self._eigen[1:]

    def _factor(self, s):
        """``(U, λ)``, M = Σᵢ JᵢᵀJᵢ = U diag(λ) Uᵀ with λ > 0: the sketch's factor, or the
        dense M's eigendecomposition without its null space."""
        if s.metric is None:
            return s.metric_basis, s.metric_values
        lam, Q = self._eigen_of(s)
        keep = lam > np.finfo(float).eps * lam.size * max(float(lam[-1]), 0.0)
        return Q[:, keep], lam[keep]

    def run(self, fed, s, beta, kkt_met=None, ahead=None):
        """Rounds until ‖Σᵢ eᵢ‖∞ ≤ τ, the early stop, or ``max_iter``; ``s`` is updated
        after each completed round.  Returns ``(w, converged)``.  (The blocks' rounds
        carry no KKT shares at the server's w, nor the next start: ``kkt_met`` and
        ``ahead`` are not used.)"""
        gamma = self.gamma(beta)
        eps1, eps2 = self.eps
        while not s.done and s.iterations < self.max_iter:
            w = self.w_step(s, gamma)                                      # (18)
            if not np.all(np.isfinite(w)):
                raise NonFiniteIterate(f"non-finite ADMM iterate in round {s.iterations + 1}")
            sums = fed.broadcast(M.ADMM_STEP, {"w": w, "tol": s.tau}, include_server=True)
            cert = float(np.max(np.abs(sums["e"])))
            if not np.isfinite(cert):
                raise NonFiniteIterate(f"non-finite stationarity shares in round {s.iterations + 1}")
            s.certificate = cert
            s.early = (cert + float(np.max(np.abs(w - s.wk))) / beta <= eps1
                       and np.sqrt(sums["definition1_sq"]) <= eps2)
            s.Rv, s.rho = sums["Rv"], sums["rho"]
            s.w, s.iterations = w, s.iterations + 1
            s.done = s.converged
        s.done = True
        return s.w, s.converged


def metric_prox_step(P, r, sigma, U, lam):
    """argmin_w P(w) + σ/2‖w‖² + ½wᵀUΛUᵀw − rᵀw for P = λ‖·‖₁ (separable, its prox's
    generalized derivative a 0/1 diagonal D), through its dual in y ∈ ℝᵏ, A = UΛ^½:
    w(y) = prox_{P/σ}((r − Ay)/σ) and y the minimizer of the strongly convex
    φ(y) = ½‖y‖² − min_w [P(w) + σ/2‖w‖² − (r − Ay)ᵀw], ∇φ(y) = y − Aᵀw(y), a piecewise
    linear map.  Newton (the generalized Hessian I + AᵀDA/σ) with backtracking on φ ends
    where a full step keeps D: there w(y) solves the problem up to rounding."""
    A = U * np.sqrt(lam)

    def at(y):
        v = r - A @ y
        w = P.prox(v / sigma, 1.0 / sigma)
        return w, 0.5 * (y @ y) - (P.value(w) + 0.5 * sigma * (w @ w) - v @ w), y - A.T @ w

    y = np.zeros(A.shape[1])
    w, phi, F = at(y)
    for _ in range(METRIC_PROX_STEPS):
        D = w != 0
        step = -np.linalg.solve(np.eye(y.size) + A[D].T @ A[D] / sigma, F)
        t = 1.0
        while True:
            w_t, phi_t, F_t = at(y + t * step)
            if phi_t <= phi + 1e-4 * t * (F @ step) or t < 1e-12:
                break
            t *= 0.5
        y, w, phi, F = y + t * step, w_t, phi_t, F_t
        if t == 1.0 and np.array_equal(w != 0, D):
            break
    return w
