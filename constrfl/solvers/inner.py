"""What the outer loop (:func:`.proxal.proximal_al`) may call of an inner solver, the
solver of subproblem (9) to (10) (docs/algorithms.md §3): :class:`InnerSolver`, a
contract in optax's style, (init, update) over an explicit state.  Its implementations are
Algorithm 2 (:class:`.admm.ADMM`) and the proximal Newton method (:class:`.newton.Newton`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ..federation.base import Sums
from ..messages import NEXT

__all__ = ["InnerSolver", "InnerState", "NextStart"]

@dataclass
class NextStart:
    """The next subproblem's first evaluation, taken ahead on the current one's last
    trial (docs/algorithms.md §3, "The next start ahead"): the running subproblem's
    number k and the next one's penalty β (what the trials ask for), and, once
    subproblem k ended on such a trial, that round's sums (the parties' KKT shares at
    μ⁺, ν⁺ and the ``next_*`` evaluation; the run returns right after it, so the
    round is the federation's last)."""

    k: int                  # the subproblem running (its messages say so)
    beta: float             # the next one's penalty
    sums: Sums = None

    def keep(self, sums):
        self.sums = sums

    def drop(self):
        self.sums = None

    def start(self):
        """The kept round's ``next_*`` fields as the start round's would be named
        (``values``, ``grad``, ...): what the next subproblem's ``begin`` takes."""
        sums = self.sums
        return Sums({k[len(NEXT):]: v for k, v in sums.items() if k.startswith(NEXT)},
                    sums.parties,
                    {k[len(NEXT):]: n for k, n in sums.counts.items() if k.startswith(NEXT)},
                    {})


@runtime_checkable
class InnerState(Protocol):
    """A subproblem's state (plain data, saved with results): what the outer loop reads
    (and sets: ``tau``, the next subproblem's τ)."""

    tau: float           # τ_k of (10)
    iterations: int      # inner iterations of this subproblem so far
    certificate: float   # an upper bound on dist∞(0, ∂Ψ_k(w)) at the returned point


@runtime_checkable
class InnerSolver(Protocol):
    """An inner solver; the outer loop sends its first message of subproblem k riding on
    the multiplier round (``start_type``, ``start_message``), then hands it the round's
    sums (``begin``: a :class:`~constrfl.federation.Sums`) and runs it (``run``)."""

    start_type: str

    def start_message(self, k: int, beta: float, previous: InnerState | None = None
                      ) -> tuple[dict, dict]:
        """``(payload, per_client)`` of subproblem k's first message (``previous``: the
        last subproblem's state, for a warm start)."""

    def begin(self, sums: dict, wk: np.ndarray, tau: float, beta: float,
              previous: InnerState | None = None, eta: float | None = None) -> InnerState:
        """Subproblem k's first state, centred at wᵏ, from the first message's sums:
        Ψ_k with penalty β and proximal term ‖· − wᵏ‖²/(2η) (None: η = β)."""

    def run(self, fed, s: InnerState, beta: float, kkt_met=None, ahead: NextStart = None
            ) -> tuple[np.ndarray, bool]:
        """Rounds until (10) holds (``converged``) or the solver's own limit; ``s`` is
        updated after every completed round (so a solve stopped anywhere resumes).
        Returns ``(w, converged)``.  A solver whose rounds can carry the parties' KKT
        shares at a point x (those of ``al.update`` at x) asks for them and stops early
        at the first x where ``kkt_met(x, sums)`` is True (the solve ends there).  One
        that can take the next subproblem's first evaluation ahead (``ahead``) leaves in
        it the sums of the round the subproblem ended on, if it did on such a round."""
