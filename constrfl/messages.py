"""The messages of the protocol: their names, who may see each field, what a payload may
hold, how it is counted.

A message type is ``"<phase>.<action>"`` (Flower's convention); a compound type
``"a.b+c.d"`` asks the party to run the handlers ``a.b`` then ``c.d`` on one payload and
answer once, so that e.g. the multiplier round of an outer iteration carries the first
round of the next subproblem (one round instead of two).

**Who sees what** (:data:`FIELDS`, docs/algorithms.md §9).  Every field of every message
is declared once here:

* a payload field is *public*: the server's broadcast, the same for every site (a
  per-client value, e.g. a user's ρᵢ, is the server's own choice for that site);
* a reply field is a *sum*: only Σ over the parties reaches the server
  (:mod:`constrfl.exactsum`: exact, whatever the order, and what a secure aggregation
  hides the addends of), *disclosed*: each site's own value reaches the server, which
  only ``private=False`` allows (the per-site Hessian forms of ``inner="newton-basis"``),
  or *public*: a site's own value that says nothing of its data (its public key in the
  secure sum's key agreement);
* the transport's own payload fields (:data:`TRANSPORT_FIELDS`: the secure sum's peers
  and a round's cohort) may ride on any message;
* what a handler keeps and never sends is *private* (listed for the docs: the
  multipliers, the ADMM block's uᵢ, λᵢ, ...).

:func:`check_payload` and :func:`check_reply` enforce the declarations at the boundary
(:class:`~constrfl.federation.Federation` and :class:`~constrfl.federation.runtime.PartyRuntime`):
an undeclared field is an error.

Payloads are flat dicts whose values are float64 NumPy arrays or Python scalars (float,
int, bool); replies likewise before a site encodes its sum fields.  Traffic counts 8
bytes for every payload entry and :data:`~constrfl.exactsum.RING_BYTES` = 32 for every
entry of a sum field (a disclosed float: 8).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .exactsum import RING_BYTES
from .kernels import pack_upper, unpack_upper   # the Hessians' wire format

__all__ = ["MessageType", "FLOAT", "floats", "check_payload", "check_reply", "trial_points",
           "trial_steps", "pack_upper", "unpack_upper", "FIELDS", "Fields", "SUM", "PUBLIC",
           "PRIVATE", "DISCLOSED", "fields_of", "wire_bytes", "SUMS", "LAYOUT",
           "TRANSPORT_FIELDS", "SECURE_MIN_CLIENTS", "SECURE_MIN_NEIGHBOURS", "NEXT"]

FLOAT = 8  # bytes a float on the wire
_FLOAT64 = np.dtype(np.float64)

SUM, PUBLIC, PRIVATE, DISCLOSED = "sum", "public", "private", "disclosed"


@dataclass(frozen=True)
class Fields:
    """The fields of one message type: the payload's (all public), the reply's ``{name:
    SUM or DISCLOSED}``, and what the handler keeps private."""

    payload: frozenset
    reply: dict
    private: tuple = ()


def _fields(payload, reply, private=""):
    return Fields(frozenset(payload.split()), dict(reply), tuple(private.split()))


#: a party's share of the KKT residuals (:func:`constrfl.residuals.party_share`), all sums
KKT_SHARE = {"lagrangian_grad": SUM, "objective_grad": SUM, "objective": SUM,
             "feasibility_max": SUM, "complementarity_max": SUM, "definition1_max": SUM,
             "linear_max": SUM, "offset_max": SUM}
#: what ``newton.eval`` and ``feas.eval`` evaluate (the compact Hessians: disclosed)
_EVALUATION = {"values": SUM, "grad": SUM, "hess": SUM, "no_hessian": SUM, "hv": SUM,
               "core": DISCLOSED, "models": DISCLOSED, "gram": DISCLOSED, "lowrank": DISCLOSED}
_EVAL_PAYLOAD = "w order x t v basis models"
#: the next subproblem's first evaluation, taken ahead on a subproblem's last trial
#: (``newton.eval`` with ``next_beta``: docs/algorithms.md §3, "The next start ahead"):
#: the start round's evaluation fields under this prefix
NEXT = "next_"
_NEXT_START = {NEXT + k: SUM for k in ("values", "grad", "hess", "no_hessian", "hv")}
_TRAIN_PAYLOAD = "x n_clients penalty_weight batch_size seed steps lr round"


class MessageType:
    """The message types the solvers send (their handlers: :mod:`constrfl.parties`)."""

    SCALE_STATS = "scale.stats"    # column statistics at w⁰ for the scaling (§8a)
    AL_BEGIN = "al.begin"          # start subproblem (9) at centre w with penalty β
    AL_UPDATE = "al.update"        # multiplier step 3 at w, KKT share; start the next (9)
    KKT_REPORT = "kkt.report"      # KKT share at w with given multipliers (baselines)
    ADMM_START = "admm.start"      # Algorithm 2: uᵢ = wᵏ, λᵢ (cold or warm), ρᵢ, Rᵢvᵢ
    ADMM_STEP = "admm.step"        # Algorithm 2: (22), (19), (20)
    NEWTON_EVAL = "newton.eval"    # ALᵢ at trial points (+ gradient, Hessian)
    NEWTON_HVP = "newton.hvp"      # ∇²ALᵢ(w) v, for Newton-CG
    NEWTON_BASIS = "newton.basis"  # columns of the party's row basis (newton-basis)
    SECURE_KEYS = "secure.keys"    # the secure sum's key agreement: a public key each
    FEAS_EVAL = "feas.eval"        # ‖[cᵢ]₊‖² + ‖hᵢ‖² likewise (infeasibility check)
    SGD_TRAIN = "sgd.train"        # FedAvg/FedOpt/FedMid(-OSP) clients: K local steps
    DUAL_TRAIN = "dual.train"      # FedDualAvg clients
    ADAM_TRAIN = "adam.train"      # FedCAda clients

    def __init__(self):
        raise TypeError("MessageType is a namespace of constants")

    @staticmethod
    def compound(*types):
        return "+".join(types)


M = MessageType
#: every message type's fields (docs/algorithms.md §9 lists them)
FIELDS = {
    M.SCALE_STATS: _fields("w", {"hessian_columns_sq": SUM, "jacobian_columns_sq": SUM,
                                 "objective_grad": SUM}, "scale_rows_ineq scale_rows_eq"),
    M.AL_BEGIN: _fields("w beta subproblem scale_columns scale_objective scale_rows",
                        KKT_SHARE, "mu nu wk subproblem scale_rows_ineq scale_rows_eq"),
    M.AL_UPDATE: _fields("w beta subproblem", dict(KKT_SHARE, multiplier_step_sq=SUM),
                         "mu nu wk subproblem"),
    M.KKT_REPORT: _fields("w penalty_weight", KKT_SHARE, "mu nu"),
    M.ADMM_START: _fields("gamma cold metric count_rows sketch local_max_iter local_hessian "
                          "local_products adaptive rho",
                          {"rho": SUM, "Rv": SUM, "metric": SUM, "metric_sketch": SUM,
                           "constraint_rows": SUM},
                          "u lam J"),
    M.ADMM_STEP: _fields("w tol", {"e": SUM, "Rv": SUM, "rho": SUM, "definition1_sq": SUM},
                         "u lam J"),
    M.NEWTON_EVAL: _fields(_EVAL_PAYLOAD + " kkt subproblem next_beta",
                           dict(_EVALUATION, **KKT_SHARE, multiplier_step_sq=SUM,
                                **_NEXT_START),
                           "mu nu pending_mu pending_nu pending_beta pending_wk "
                           "pending_subproblem"),
    M.NEWTON_HVP: _fields("w v violation subproblem", {"hv": SUM}),
    M.NEWTON_BASIS: _fields("start count", {"basis": DISCLOSED, "pattern": DISCLOSED}),
    M.FEAS_EVAL: _fields(_EVAL_PAYLOAD + " report",
                         dict(_EVALUATION, violation_max=SUM, nonconvex=SUM, rows=SUM)),
    M.SGD_TRAIN: _fields(_TRAIN_PAYLOAD + " prox", {"delta": SUM}),
    M.DUAL_TRAIN: _fields(_TRAIN_PAYLOAD + " offset", {"delta": SUM}),
    M.ADAM_TRAIN: _fields(_TRAIN_PAYLOAD + " m v beta1 beta2 eps correction",
                          {"delta": SUM, "m": SUM, "v": SUM}),
    M.SECURE_KEYS: _fields("", {"public_key": PUBLIC}, "private_key"),
}
#: the fewest clients a secure sum adds (with two, each could subtract its own upload from
#: the sum and read the other's; docs/flower.md, "Threat model")
SECURE_MIN_CLIENTS = 3
#: the neighbours each client masks its uploads with in a secure sum unless the solve
#: says (``secure=k``): the ring graph of :func:`constrfl.federation.secure.ring_neighbours`
#: (the server with fewer clients than this reads only sums; docs/flower.md, "Threat model")
SECURE_NEIGHBOURS = 4
#: the fewest neighbours a client masks with: with one, that neighbour and the server
#: together read its upload (a client refuses a round that asks for fewer)
SECURE_MIN_NEIGHBOURS = 2
#: what the transport adds to any message's payload: in a secure sum, the mark
#: ``masked`` (every message), every client's public key and the number of neighbours
#: (the first message after the key agreement), and the clients a round sums over where
#: not all (a baseline's sample), by their index
TRANSPORT_FIELDS = frozenset({"masked", "peers", "neighbours", "cohort"})


#: the keys of an encoded reply's sum fields (:func:`constrfl.federation.runtime.encode_reply`)
SUMS, LAYOUT = "sums", "layout"


def fields_of(message_type):
    """The :class:`Fields` of a (compound ``a+b``) message type: the union of its parts'."""
    parts = message_type.split("+")
    unknown = [p for p in parts if p not in FIELDS]
    if unknown:
        raise ValueError(f"unknown message type {unknown[0]!r}")
    if len(parts) == 1:
        return FIELDS[parts[0]]
    return Fields(frozenset().union(*(FIELDS[p].payload for p in parts)),
                  {k: v for p in parts for k, v in FIELDS[p].reply.items()},
                  tuple(x for p in parts for x in FIELDS[p].private))


def floats(payload):
    """Number of floats a payload puts on the wire."""
    return sum(v.size if isinstance(v, np.ndarray) else 1 for v in payload.values())


def wire_bytes(reply):
    """Bytes of an encoded reply: :data:`RING_BYTES` an entry of its sum fields (uint64
    limbs), 8 a float of a disclosed one (the layout, which the message type and d
    determine, is not counted)."""
    total = 0
    for k, v in reply.items():
        if k == SUMS:
            total += RING_BYTES * len(v)
        elif k != LAYOUT:
            total += FLOAT * (v.size if isinstance(v, np.ndarray) else 1)
    return total


def _check_values(payload, what):
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


def check_payload(payload, what="payload", message_type=None):
    """Raise TypeError unless ``payload`` is a flat dict of float64 arrays and scalars;
    with ``message_type``, ValueError for a field it does not declare."""
    _check_values(payload, what)
    if message_type is not None:
        undeclared = sorted(set(payload) - fields_of(message_type).payload - TRANSPORT_FIELDS)
        if undeclared:
            raise ValueError(f"{what} of {message_type!r}: undeclared fields {undeclared} "
                             f"(constrfl.messages.FIELDS)")


def check_reply(message_type, reply, disclose=False):
    """Raise unless ``reply`` holds only the reply fields ``message_type`` declares,
    each a float64 array or Python scalar, and disclosed fields only with ``disclose``
    (``private=False``)."""
    _check_values(reply, f"reply to {message_type!r}")
    declared = fields_of(message_type).reply
    undeclared = sorted(set(reply) - set(declared))
    if undeclared:
        raise ValueError(f"reply to {message_type!r}: undeclared fields {undeclared} "
                         f"(constrfl.messages.FIELDS)")
    if not disclose:
        shown = sorted(k for k in reply if declared[k] == DISCLOSED)
        if shown:
            raise ValueError(f"reply to {message_type!r}: {shown} would show the server "
                             "this site's own values; only private=False allows that")


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
