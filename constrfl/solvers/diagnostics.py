"""What the outer loop concludes when it is not converging: infeasibility (with a
certificate), unboundedness, or iterates that run off (no minimizer).

**Infeasibility.**  When the constraint violation stalls: a certificate, or a larger β.

A stalled violation has two causes: an empty feasible set, or a penalty β too small for
the multiplier steps to push the iterates to it.  To tell them apart the server solves
the violation-minimization problem, federatedly (each owner evaluates its own term,
message ``feas.eval``),

    V* = min { V(w) = Σᵢ ‖[cᵢ(w)]₊‖² + ‖hᵢ(w)‖²  :  w ∈ dom P },

by the proximal Newton method from the current iterate.  The verdict:

* **infeasible** when the problem is convex, the minimizer found is certified stationary
  (dist∞(0, ∇V(w) + N_dom P(w)) ≤ ``STATIONARY``, so V* = V(w) for convex V) and its
  largest violation exceeds 10·ε₂: no point is feasible within the tolerance;
* otherwise β ← 10β and the outer loop goes on (a feasible point within ε₂ exists, or
  the evidence is not conclusive: a nonconvex problem, or no certified minimizer).
"""
from __future__ import annotations

import numpy as np

from ..federation.messages import MessageType as M
from ..prox import Box, L1Ball, L2Ball, Zero
from .newton import Newton

__all__ = ["stalled", "violation_check", "unbounded", "running_off", "STATIONARY"]

WINDOW = 5          # outer iterations between checks, and over which progress is judged
STATIONARY = 1e-9   # stationarity of V that certifies its minimum (convex V)
MAX_STEPS = 50      # Newton steps on V per check


def stalled(history, last_check, eps2):
    """The violation stayed above max(10ε₂, 1e-9) and did not halve over the last
    ``WINDOW`` outer iterations, the last check being at least ``WINDOW`` ago."""
    k = len(history)
    if k < WINDOW or k - last_check < WINDOW:
        return False
    v = [r["feasibility"] for r in history[-WINDOW:]]
    return min(v) > max(10 * eps2, 1e-9) and v[-1] > 0.5 * v[0]


def domain(P):
    """The indicator part of P: P itself for a set, nothing for a finite function."""
    return P if isinstance(P, (Box, L1Ball, L2Ball)) else Zero()


def violation_check(problem, fed, s, eps2):
    """Solve the violation-minimization problem from ``s.w``; return the verdict text if
    the problem is certified infeasible, else raise ``s.beta`` tenfold and return None."""
    newton = Newton(domain(problem.regularizer), max_iter=MAX_STEPS,
                    message_type=M.FEAS_EVAL)
    replies = fed.broadcast(M.FEAS_EVAL, {"w": s.w, "order": 2}, include_server=True)
    sub = newton.begin(replies, s.w, STATIONARY, np.inf)
    w, certified = newton.run(fed, sub, np.inf)
    replies = fed.broadcast(M.FEAS_EVAL, {"w": w, "order": 0, "report": True},
                            include_server=True)
    worst = max(r["violation"] for r in replies.values())
    convex = all(r["convex"] for r in replies.values())
    s.last_check = s.k
    text = (f"min ‖[c]₊‖² + ‖h‖² over dom P = {sub.f:.3e} (largest violation "
            f"{worst:.3e}, stationarity {sub.r:.1e}) after {sub.iterations} Newton steps")
    if convex and certified and worst > 10 * eps2:
        return "no point satisfies the constraints: " + text
    s.beta *= 10.0
    s.inner = None          # the next subproblem restarts with the new β
    s.history[-1]["infeasibility_check"] = text + f"; β raised to {s.beta:g}"
    return None


def unbounded(history, eps2):
    """The unboundedness signature, judged on the second half of the outer iterations
    (at least 20): every iterate feasible within ε₂, and the objective still falls as
    fast at the end as at the half-way point (mean decrease over 5 iterations, at least
    90%) while the stationarity residual has not fallen (at least 90%): steady descent
    along feasible points with no sign of a minimizer.  (A problem whose infimum is
    not attained — logistic loss on separable data — fails it: its decrease and its
    stationarity fall like 1/k.)  Returns the evidence text, or None."""
    k = len(history)
    if k < 20:
        return None
    half = history[k // 2:]

    def drop(i):
        return (history[i - 5]["objective"] - history[i]["objective"]) / 5

    first, last = drop(k // 2), drop(k - 1)
    if (all(r["feasibility"] <= eps2 for r in half) and first > 0 and last >= 0.9 * first
            and half[-1]["stationarity"] >= 0.9 * half[0]["stationarity"]):
        return (f"the objective falls by {last:.3g} per outer iteration (to "
                f"{half[-1]['objective']:.6g}) along feasible iterates, as fast as "
                f"{k - k // 2} iterations before, while the stationarity stays at "
                f"{half[-1]['stationarity']:.2e}: unbounded below")
    return None


def running_off(history):
    """A hint for a solve that ran out of iterations: ‖w‖∞ kept growing through the
    second half (every iteration, by 10% or more in all) — the problem may have no
    minimizer."""
    if len(history) < 10:
        return ""
    norms = [r["w_norm"] for r in history[len(history) // 2:]]
    if all(b > a for a, b in zip(norms, norms[1:])) and norms[-1] >= 1.1 * norms[0]:
        return (f"; ‖w‖∞ kept growing, from {norms[0]:.3g} to {norms[-1]:.3g} over the "
                f"last {len(norms)} outer iterations: the problem may have no minimizer "
                "(e.g. a logistic loss on separable data); add a ridge (prox.SquaredL2) "
                "or bound w")
    return ""
