"""Algorithm 1 (federated proximal AL) and Algorithm 3 (cProx-AL): one outer loop.

Outer step k (ALGORITHMS.md §3): find w^{k+1} with dist∞(0, ∂Ψ_k(w^{k+1})) ≤ τ_k (10),
update each owner's multipliers (step 3), and stop when the KKT residuals of §2,
recomputed at (w^{k+1}, μ^{k+1}, ν^{k+1}), meet (ε₁, ε₂).  By Theorem 3 the paper's rule
(11) implies that, so this stops no later than (11) does; both are recorded.

The methods differ only in the subproblem solver: ``fedproxal`` runs Algorithm 2
(:mod:`.admm`) over the clients, or a federated proximal Newton method
(``inner="newton"``); ``cproxal`` minimizes the pooled Ψ_k directly
(:func:`.local.minimize_composite`).
"""
from __future__ import annotations

import numpy as np

from ..kkt import party_residuals
from ..result import KKT, Multipliers
from .admm import Node, Traffic, admm
from .augmented import AugmentedTerm, plus_quadratic, pooled
from .local import minimize_composite


class FederatedSubsolver:
    """Ψ_k by Algorithm 2; the server talks to the clients' :class:`Node` s only."""

    communicates = True

    def __init__(self, problem, rhos, q, max_inner, local_max_iter, adaptive_rho=True,
                 local_solver="newton"):
        self.problem, self.q, self.max_inner = problem, q, max_inner
        self.adaptive_rho = adaptive_rho
        self.clients = [Node(c, r, local_max_iter, local_solver)
                        for c, r in zip(problem.clients, rhos)]
        server = problem.server
        self.server = (None if server.is_empty
                       else Node(server, float(np.mean(rhos)), local_max_iter, local_solver))
        self.traffic = Traffic()
        self.n, self.d = problem.n_clients, problem.dim

    @property
    def nodes(self):
        return self.clients + ([self.server] if self.server is not None else [])

    def subproblem(self, wk, beta, tau):
        gamma = 1.0 / ((self.n + 1) * beta)
        cold = self.traffic.rounds == 0
        v = [c.begin(wk, beta, gamma, cold) for c in self.clients]
        if self.server is not None:
            v.append(self.server.begin(wk, beta, 0.0, cold))      # γ-share in the w-step
        if cold:
            self.traffic.exchange(self.n, self.d, self.d)    # w⁰ down, first uploads up
        else:
            self.traffic.add_upload(self.n, self.d)          # rides on the last round
        w, iters, ok, _ = admm(self.clients, self.server, wk, v, gamma,
                               self.problem.regularizer, tau, self.traffic,
                               q=self.q, max_iter=self.max_inner,
                               adaptive_rho=self.adaptive_rho)
        return w, iters, ok

    def finish(self, w):
        return _finish(self.nodes, self.problem, w, self.traffic)

    def multipliers(self):
        return _multipliers(self.problem, self.nodes)


class NewtonSubsolver:
    """Ψ_k by proximal Newton on Σᵢ ALᵢ + 1/(2β)‖w − wᵏ‖² + P.

    Pooled (cProx-AL, Algorithm 3: no communication), or federated (``inner="newton"``):
    the server holds w and P; every evaluation is one round in which it broadcasts the
    trial point and each client uploads its ALᵢ value (line search), plus gradient and
    Hessian (the upper triangle, d(d+1)/2 floats) when the step needs them.  The
    server's own AL₀ is evaluated at the server.  The stop test dist∞(0, ∂Ψ_k(w)) ≤ τ_k
    is computed exactly from the aggregated gradient.
    """

    def __init__(self, problem, max_iter, federated=False):
        self.problem, self.max_iter = problem, max_iter
        self.communicates = federated
        self.nodes = [_Owner(p) for p in problem.parties if not p.is_empty]
        self.traffic = Traffic()

    def subproblem(self, wk, beta, tau):
        for o in self.nodes:
            o.term = AugmentedTerm(o.party, beta, o.mu, o.nu)
        total = pooled([o.term for o in self.nodes])
        if self.communicates:
            total = self._counted(total)
        psi = plus_quadratic(total, 1.0 / beta, wk)
        res = minimize_composite(psi, self.problem.regularizer, wk, tau, self.max_iter)
        return res.x, res.iterations, res.converged

    def _counted(self, total):
        n, d = self.problem.n_clients, self.problem.dim

        def evaluate(w, order=2):
            up = 1 + (d if order >= 1 else 0) + (d * (d + 1) // 2 if order >= 2 else 0)
            self.traffic.exchange(n, d, up)
            return total(w, order)
        return evaluate

    def finish(self, w):
        return _finish(self.nodes, self.problem, w, self.traffic if self.communicates else None)

    def multipliers(self):
        return _multipliers(self.problem, self.nodes)


class _Owner:
    """A party's multipliers and current AL term (no ADMM state needed)."""

    def __init__(self, party):
        self.party = party
        self.mu, self.nu = np.zeros(party.n_ineq), np.zeros(party.n_eq)

    finish = Node.finish


def _finish(nodes, problem, w, traffic=None):
    """Every owner updates its multipliers and reports its KKT share at (w, μ⁺, ν⁺).
    Federated, this is one round: w^{k+1} down; Δμ, Δν, the Lagrangian-gradient share
    and 3 residuals up."""
    if traffic is not None:
        traffic.exchange(problem.n_clients, problem.dim, problem.dim + 5)
    dmu = dnu = 0.0
    g = np.zeros(problem.dim)
    feas = compl = def1 = 0.0
    for node in nodes:
        a, b = node.finish(w)
        dmu, dnu = max(dmu, a), max(dnu, b)
        gp, fp, cp_, dp = party_residuals(node.party, w, Multipliers(node.mu, node.nu))
        g += gp
        feas, compl, def1 = max(feas, fp), max(compl, cp_), max(def1, dp)
    kkt = KKT(float(problem.regularizer.dist(w, g)), feas, compl, def1,
              problem.regularizer.exact_dist)
    return dmu, dnu, kkt


def _multipliers(problem, nodes):
    held = {n.party.name: Multipliers(n.mu.copy(), n.nu.copy()) for n in nodes}
    return {p.name: held.get(p.name, Multipliers(np.zeros(p.n_ineq), np.zeros(p.n_eq)))
            for p in problem.parties}


def proximal_al(problem, sub, w0, eps1, eps2, beta, s_bar, tau_decay, max_outer,
                report, callback):
    """The outer loop of Algorithms 1 and 3.

    τ_k = s̄/(k+1)² (the paper's schedule, ``tau_decay=None``) or s̄·rᵏ (``tau_decay=r``),
    never below ε₁/10 (a smaller τ_k cannot help the stop test).  Returns
    ``(w, status, message, history, outer, inner)``; ``status`` is ``"optimal"``,
    ``"max_iterations"``, ``"numerical_error"`` (the last finite iterate is kept) or
    ``"infeasible"`` (see :func:`_looks_infeasible`).
    """
    w = w0
    history = []
    inner_total = 0
    for k in range(max_outer):
        tau = s_bar / (k + 1) ** 2 if tau_decay is None else s_bar * tau_decay ** k
        tau = max(tau, eps1 / 10)
        with np.errstate(all="ignore"):
            w_new, inner, converged = sub.subproblem(w, beta, tau)
            inner_total += inner
            if not np.all(np.isfinite(w_new)):
                return (w, "numerical_error",
                        f"non-finite iterate in outer iteration {k}; returning the last "
                        "finite one", history, k, inner_total)
            state_before = sub.multipliers()
            dmu, dnu, kkt_k = sub.finish(w_new)
        dw = float(np.max(np.abs(w_new - w)))
        if not all(np.isfinite([dmu, dnu, kkt_k.stationarity, kkt_k.definition1])):
            return (w, "numerical_error", f"non-finite multipliers or residuals in outer "
                    f"iteration {k}; returning the last finite iterate", history, k,
                    inner_total)
        rule11 = dw + beta * tau <= beta * eps1 and max(dmu, dnu) <= beta * eps2
        rec = dict(k=k, tau=tau, inner_iterations=inner, inner_converged=converged,
                   step=dw, multiplier_step=max(dmu, dnu), rule11=rule11,
                   stationarity=kkt_k.stationarity, feasibility=kkt_k.feasibility,
                   complementarity=kkt_k.complementarity, definition1=kkt_k.definition1,
                   objective=problem.objective(w_new), rounds=sub.traffic.rounds,
                   mu_norm=_max_norm(sub.multipliers()))
        history.append(rec)
        report(rec)
        if callback is not None:
            callback(dict(rec, w=w_new.copy(), w_prev=w.copy(), beta=beta,
                          multipliers_prev=state_before, multipliers=sub.multipliers()))
        w = w_new
        if kkt_k.meets(eps1, eps2):
            return w, "optimal", f"KKT residuals meet tol after {k + 1} outer iterations " \
                f"({'with' if rule11 else 'before'} the stop rule (11))", history, k + 1, \
                inner_total
        if _looks_infeasible(history, beta, eps2):
            return (w, "infeasible", "constraint violation stalls while the multipliers "
                    "grow without bound", history, k + 1, inner_total)
    failed = "; ".join(kkt_k.failures(eps1, eps2))
    return (w, "max_iterations", f"reached max_outer={max_outer} with {failed}", history,
            max_outer, inner_total)


def _max_norm(mults):
    return max((float(np.max(np.abs(np.concatenate([m.ineq, m.eq])), initial=0.0))
                for m in mults.values()), default=0.0)


def _looks_infeasible(history, beta, eps2, patience=10):
    """Infeasibility heuristic: over the last ``patience`` outer iterations the violation
    stayed above max(100ε₂, 1e-6) and fell by less than 10% while ‖μ, ν‖∞ grew by at
    least half of β·violation per iteration — what the multiplier step (step 3) does when
    c(w) ≤ 0 cannot be reached.  Checked from outer iteration 2·patience on."""
    if len(history) < 2 * patience:
        return False
    window = history[-patience - 1:]
    v = [r["feasibility"] for r in window]
    stalled = min(v) > max(100 * eps2, 1e-6) and v[-1] >= 0.9 * v[0]
    growing = window[-1]["mu_norm"] - window[0]["mu_norm"] >= 0.5 * patience * beta * min(v)
    return stalled and growing
