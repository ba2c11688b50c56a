"""The messages of the protocol: their names, what a payload may hold, how it is counted.

A message type is ``"<phase>.<action>"`` (Flower's convention); a compound type
``"a.b+c.d"`` asks the party to run the handlers ``a.b`` then ``c.d`` on one payload and
answer once, so that e.g. the multiplier round of an outer iteration carries the first
round of the next subproblem (one round instead of two).

Payloads and replies are flat dicts whose values are float64 NumPy arrays or Python
scalars (float, int, bool): what :mod:`constrfl.flower.codec` packs bit-exactly into a
Flower record.  Traffic counts 8 bytes for every array entry and every scalar.
"""
from __future__ import annotations

import numbers

import numpy as np

from .kernels import pack_upper, unpack_upper   # the Hessians' wire format

__all__ = ["MessageType", "FLOAT", "floats", "check_payload", "trial_points", "trial_steps",
           "pack_upper", "unpack_upper"]

FLOAT = 8  # bytes a float on the wire
_FLOAT64 = np.dtype(np.float64)


class MessageType:
    """The message types the solvers send (their handlers: :mod:`constrfl.parties`)."""

    SCALE_STATS = "scale.stats"    # column statistics at w⁰ for the scaling (§8a)
    AL_BEGIN = "al.begin"          # start subproblem (9) at centre w with penalty β
    AL_UPDATE = "al.update"        # multiplier step 3 at w, KKT share; start the next (9)
    KKT_REPORT = "kkt.report"      # KKT share at w with given multipliers (baselines)
    ADMM_START = "admm.start"      # Algorithm 2: uᵢ = wᵏ, λᵢ (cold or warm), upload vᵢ, Jᵢ
    ADMM_STEP = "admm.step"        # Algorithm 2: (22), (19), (20)
    NEWTON_EVAL = "newton.eval"    # ALᵢ at trial points (+ gradient, Hessian)
    NEWTON_HVP = "newton.hvp"      # ∇²ALᵢ(w) v, for Newton-CG
    NEWTON_BASIS = "newton.basis"  # columns of the party's row basis (newton-basis)
    FEAS_EVAL = "feas.eval"        # ‖[cᵢ]₊‖² + ‖hᵢ‖² likewise (infeasibility check)
    SGD_TRAIN = "sgd.train"        # FedAvg/FedOpt/FedMid(-OSP) clients: K local steps
    DUAL_TRAIN = "dual.train"      # FedDualAvg clients
    ADAM_TRAIN = "adam.train"      # FedCAda clients

    def __init__(self):
        raise TypeError("MessageType is a namespace of constants")

    @staticmethod
    def compound(*types):
        return "+".join(types)


def floats(payload):
    """Number of floats a payload puts on the wire."""
    return sum(v.size if isinstance(v, np.ndarray) else 1 for v in payload.values())


def check_payload(payload, what="payload"):
    """Raise TypeError unless ``payload`` is a flat dict of float64 arrays and scalars."""
    if not isinstance(payload, dict):
        raise TypeError(f"{what} must be a dict, got {type(payload).__name__}")
    for key, v in payload.items():
        if not isinstance(key, str):
            raise TypeError(f"{what} keys must be strings, got {key!r}")
        if isinstance(v, np.ndarray):
            if v.dtype != _FLOAT64:
                raise TypeError(f"{what}[{key!r}] must be float64, got {v.dtype}")
        elif not isinstance(v, (float, bool, numbers.Integral)) or isinstance(v, np.generic):
            raise TypeError(f"{what}[{key!r}] must be a float64 array or a Python scalar, "
                            f"got {type(v).__name__}")


def trial_steps(msg):
    """The points ``x + tⱼ(w − x)`` a ``newton.eval`` message asks for after ``w``, as
    the rows of a matrix (none without ``t``)."""
    if "t" not in msg:
        return np.zeros((0, msg["w"].size))
    x = msg["x"]
    return x + np.multiply.outer(msg["t"], msg["w"] - x)


def trial_points(msg):
    """The points a ``newton.eval`` message asks for: ``w``, then :func:`trial_steps`."""
    return [msg["w"], *trial_steps(msg)]
