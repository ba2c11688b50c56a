"""Result records: :class:`Multipliers`, :class:`KKT` and :class:`SolveResult`."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Multipliers", "KKT", "SolveResult", "STATUSES"]

STATUSES = ("optimal", "max_iterations", "numerical_error", "infeasible")


@dataclass
class Multipliers:
    """One owner's multipliers: ``ineq`` (μ ≥ 0, for c ≤ 0) and ``eq`` (ν, for h = 0),
    in the order the owner's constraints were given (vector-valued ones expanded)."""

    ineq: np.ndarray
    eq: np.ndarray


@dataclass
class KKT:
    """Residuals of ALGORITHMS.md §2 at a point ``(w, μ, ν)``, all in the ∞-norm.

    * ``stationarity`` = dist∞(0, ∇f + ∇c·μ + ∇h·ν + ∂P(w)), exact unless
      ``exact_stationarity`` is False (then the regularizer's documented stand-in: the
      prox-gradient residual ‖w − prox_P(w − g)‖∞ for the nuclear norm);
    * ``feasibility`` = max(‖[c(w)]₊‖∞, ‖h(w)‖∞);
    * ``complementarity`` = ‖min(μ, −c(w))‖∞ (the natural residual);
    * ``definition1`` = max(dist∞(c(w), N_{R₊}(μ)), ‖h(w)‖∞), the feasibility measure of
      Definition 1 (ε₂ bounds it).
    """

    stationarity: float
    feasibility: float
    complementarity: float
    definition1: float
    exact_stationarity: bool = True

    def meets(self, eps1, eps2):
        """True when (w, μ, ν) is (ε₁, ε₂)-optimal in the sense of Definition 1."""
        return self.stationarity <= eps1 and self.definition1 <= eps2

    def failures(self, eps1, eps2):
        """Names of the residuals above their tolerance, with their values."""
        out = []
        if not self.stationarity <= eps1:
            out.append(f"stationarity {self.stationarity:.2e} > {eps1:.1e}")
        if not self.definition1 <= eps2:
            out.append(f"feasibility/complementarity (Definition 1) "
                       f"{self.definition1:.2e} > {eps2:.1e}")
        return out


@dataclass
class SolveResult:
    """What :func:`constrfl.solve` returns (a plain record, like scipy's OptimizeResult).

    ``multipliers`` maps each owner (``"server"`` and the client names) to its
    :class:`Multipliers`, in the Lagrangian convention ``F + μᵀc + νᵀh`` with μ ≥ 0.
    ``kkt`` is recomputed from scratch at the returned point.  ``rounds``, ``bytes_up``
    and ``bytes_down`` count the messages of ALGORITHMS.md §3–4 (8 bytes a float).
    ``history`` holds one dict per outer iteration.
    """

    w: np.ndarray
    status: str
    message: str
    objective: float
    multipliers: dict
    kkt: KKT
    method: str
    outer_iterations: int = 0
    inner_iterations: int = 0
    rounds: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    time: float = 0.0
    history: list = field(default_factory=list)

    @property
    def success(self):
        return self.status == "optimal"

    def __repr__(self):
        k = self.kkt
        return (f"SolveResult(status={self.status!r}, objective={self.objective:.10g}, "
                f"stationarity={k.stationarity:.2e}, feasibility={k.feasibility:.2e}, "
                f"outer={self.outer_iterations}, inner={self.inner_iterations}, "
                f"rounds={self.rounds}, time={self.time:.3f}s)")
