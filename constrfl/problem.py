"""Who holds what: :class:`Client`, :class:`Server` and the :class:`Problem` (5).

Each party owns its functions (and through them its data): an objective fᵢ, inequality
constraints cᵢ(w) ≤ 0 and affine equalities hᵢ(w) = 0.  The constraints of a party are
stacked in list order into one vector: a scalar function gives one row, a vector-valued
one gives ``size`` rows; the multipliers of that party follow the same order.

The solvers reach a party's data only through the evaluation methods below, called on
that party's behalf (docs/algorithms.md §1: only party i evaluates fᵢ, cᵢ, hᵢ).
"""
from __future__ import annotations

import collections
import copy
import functools
import math
import numbers

import numpy as np

from . import status as st
from .errors import PartyError
from .functions import Function
from .prox import Regularizer, Zero
from .stacked import StackedRows

__all__ = ["Client", "Server", "Problem", "ServerSide", "ServerView"]

_FLOAT64 = np.dtype(np.float64)


class Party:
    """Objective, inequality and equality functions held by one party."""

    kind = "party"

    def __init__(self, objective=None, constraints=(), equalities=(), name=None):
        self.name = name
        self.objective = objective
        self.constraints = _as_list(constraints)
        self.equalities = _as_list(equalities)
        self._check_types()
        first = next((f.dim for _, f in self._slots() if f.dim is not None), None)
        if first is not None:
            self.check_dim(first)
        self.ineq_sizes = [1 if c.size is None else c.size for c in self.constraints]
        self.eq_sizes = [1 if h.size is None else h.size for h in self.equalities]
        self.n_ineq, self.n_eq = sum(self.ineq_sizes), sum(self.eq_sizes)

    # -- validation -------------------------------------------------------------------
    def _where(self):
        return self.kind if self.name in (None, self.kind) else f"{self.kind} {self.name!r}"

    def _slots(self):
        if self.objective is not None:
            yield "objective", self.objective
        for k, c in enumerate(self.constraints):
            yield f"constraints[{k}]", c
        for k, h in enumerate(self.equalities):
            yield f"equalities[{k}]", h

    def _check_types(self):
        if self.objective is not None and not isinstance(self.objective, Function):
            raise TypeError(f"{self._where()}: objective must be a constrfl Function or "
                            f"None, got {type(self.objective).__name__}")
        for slot, f in self._slots():
            if not isinstance(f, Function):
                raise TypeError(f"{self._where()}: {slot} must be a constrfl Function, "
                                f"got {type(f).__name__}")
            if slot == "objective" and f.size is not None:
                raise ValueError(f"{self._where()}: objective must be scalar-valued, "
                                 f"got output size {f.size}")
            if slot.startswith("equalities") and not f.is_affine:
                raise ValueError(f"{self._where()}: {slot} must be affine (h(w) = Cw + d), "
                                 f"got a {f.curvature} function")
            try:
                f.check_finite()
            except ValueError as err:
                raise ValueError(f"{self._where()}: {slot}: {err}") from None

    def check_dim(self, dim):
        for slot, f in self._slots():
            if f.dim is not None and f.dim != dim:
                raise ValueError(f"{self._where()}: {slot} has input dimension {f.dim}, "
                                 f"expected {dim}")

    @property
    def dims(self):
        return {f.dim for _, f in self._slots()} - {None}

    @property
    def is_empty(self):
        return self.objective is None and not self.constraints and not self.equalities

    @property
    def is_convex(self):
        return all(f.is_convex for _, f in self._slots())

    @property
    def dense_products(self):
        """True when a Hessian product of some function forms its d×d Hessian
        (:attr:`~constrfl.functions.Function.dense_products`)."""
        return any(f.dense_products for _, f in self._slots())

    @property
    def constant_hessian(self):
        """True when the AL term's Hessian does not depend on w or the multipliers:
        a quadratic (or no) objective, affine equalities, no inequalities."""
        return (not self.constraints
                and (self.objective is None or self.objective.quadratic))

    @functools.cached_property
    def convex_curved_inequalities(self):
        """True when the inequalities are convex and some is not affine (its ∇²cⱼ ⪰ 0
        enters the AL's Hessian); asked at every evaluation, so kept (the functions are
        fixed once the party is built, as for :attr:`stacked`)."""
        return (all(c.is_convex for c in self.constraints)
                and any(not c.is_affine for c in self.constraints))

    @functools.cached_property
    def stacked(self):
        """The objective and inequalities as stacked row losses
        (:class:`~constrfl.stacked.StackedRows`), or None when they are not all
        combinations of row losses."""
        return StackedRows.of(self)

    # -- evaluation (called on the party's behalf) ------------------------------------
    # Every call of a user function goes through _call and the checks below: an
    # exception, an output of the wrong shape or a NaN/inf becomes a PartyError naming
    # the slot (the runtime adds the party), which ends the solve with a status.
    def f_value_grad(self, w):
        f = self.objective
        if f is None:
            return 0.0, np.zeros_like(w)
        v, g = _call("objective", f, "value_grad", w)
        return _scalar("objective", v), _checked("objective", "gradient", g, (w.size,))

    def f_value(self, w):
        f = self.objective
        return 0.0 if f is None else _scalar("objective", _call("objective", f, "value", w))

    def f_minibatch_grad(self, w, rng, batch_size=None):
        """∇fᵢ on a minibatch of the party's own rows (drawn by ``rng``)."""
        if self.objective is None:
            return np.zeros_like(w)
        g = _call("objective", self.objective, "minibatch_grad", w, rng, batch_size)
        return _checked("objective", "gradient", g, (w.size,))

    def f_hess(self, w):
        """∇²fᵢ (0.0 without an objective, None when the objective has no Hessian)."""
        if self.objective is None:
            return 0.0
        H = _call("objective", self.objective, "hess", w)
        return None if H is None else _checked("objective", "Hessian", H, (w.size, w.size))

    def f_hessvec(self, w, v):
        """∇²fᵢ(w) v (zeros without an objective, None when it has no Hessian)."""
        return self._f_products("hessvec", w, v)

    def f_hessvecs(self, w, V):
        """∇²fᵢ(w) times each row of V (m × d), likewise."""
        return self._f_products("hessvecs", w, V)

    def _f_products(self, method, w, v):
        if self.objective is None:
            return np.zeros(v.shape)
        Hv = _call("objective", self.objective, method, w, v)
        return None if Hv is None else _checked("objective", "Hessian product", Hv, v.shape)

    def c_hessvec(self, w, v, y):
        """``Σⱼ yⱼ ∇²cⱼ(w) v`` over the stacked inequality rows (None if a constraint with
        a nonzero weight has no Hessian)."""
        return self._c_products("hessvec", w, v, y)

    def c_hessvecs(self, w, V, y):
        """:meth:`c_hessvec` of each row of V (m × d)."""
        return self._c_products("hessvecs", w, V, y)

    def _c_products(self, method, w, v, y):
        out, start = np.zeros(v.shape), 0
        for k, (c, m) in enumerate(zip(self.constraints, self.ineq_sizes)):
            yc = y[start] if c.size is None else y[start:start + m]
            start += m
            if np.any(yc != 0) and not c.is_affine:
                Hv = _call(f"constraints[{k}]", c, method, w, v, yc)
                if Hv is None:
                    return None
                out = out + _checked(f"constraints[{k}]", "Hessian product", Hv, v.shape)
        return out

    def c_value(self, w):
        if not self.constraints:
            return np.zeros(0)
        if len(self.constraints) == 1:       # the common case, without the stacking
            return self._c_value(0, self.constraints[0], w)
        return np.concatenate([self._c_value(k, f, w) for k, f in enumerate(self.constraints)])

    def c_value_jac(self, w):
        """``(c(w), ∇c(w))`` in one pass over each constraint's data."""
        if not self.constraints:
            return np.zeros(0), np.zeros((0, w.shape[0]))
        pairs = [self._c_value_jac(k, f, w) for k, f in enumerate(self.constraints)]
        if len(pairs) == 1:                  # the common case, without the stacking
            return pairs[0]
        return np.concatenate([v for v, _ in pairs]), np.vstack([J for _, J in pairs])

    def c_hess(self, w, y):
        """``Σⱼ yⱼ ∇²cⱼ(w)`` over the stacked inequality rows (None if a constraint
        with a nonzero weight has no Hessian)."""
        H, start, d = None, 0, w.size
        for k, (c, m) in enumerate(zip(self.constraints, self.ineq_sizes)):
            if c.size is None:
                yc = float(y[start])
                active = yc != 0.0
            else:
                yc = y[start:start + m]
                active = yc.any()
            start += m
            if active and not c.is_affine:
                Hc = _call(f"constraints[{k}]", c, "hess", w, yc)
                if Hc is None:
                    return None
                Hc = _checked(f"constraints[{k}]", "Hessian", Hc, (d, d))
                H = Hc if H is None else H + Hc
        return 0.0 if H is None else H

    def h_value(self, w):
        if not self.equalities:
            return np.zeros(0)
        return np.concatenate([_rows(f"equalities[{k}]", f, _call(f"equalities[{k}]", f,
                                                                   "value", w))
                               for k, f in enumerate(self.equalities)])

    def h_jac(self, w):
        if not self.equalities:
            return np.zeros((0, w.shape[0]))
        return np.vstack([_jacobian(f"equalities[{k}]", f, _call(f"equalities[{k}]", f,
                                                                  "grad", w), w.size)
                          for k, f in enumerate(self.equalities)])

    def _c_value(self, k, f, w):
        return _rows(f"constraints[{k}]", f, _call(f"constraints[{k}]", f, "value", w))

    def _c_value_jac(self, k, f, w):
        slot = f"constraints[{k}]"
        v, J = _call(slot, f, "value_grad", w)
        return _rows(slot, f, v), _jacobian(slot, f, J, w.size)

    @property
    def n_samples(self):
        """Rows of data this party holds (each distinct data array counted once)."""
        seen = {}
        for _, f in self._slots():
            for sub in getattr(f, "terms", [f]):
                if sub.n_samples:
                    seen[id(sub.X)] = sub.n_samples
        return sum(seen.values())

    def __repr__(self):
        return (f"{type(self).__name__}(name={self.name!r}, objective={self.objective!r}, "
                f"{self.n_ineq} inequality rows, {self.n_eq} equality rows)")


class Client(Party):
    """A client i ≥ 1: local objective fᵢ, local constraints cᵢ ≤ 0 and hᵢ = 0."""

    kind = "client"

    def __init__(self, objective=None, constraints=(), equalities=(), name=None):
        if name is not None and (not isinstance(name, str) or name == "server"):
            raise ValueError(f"client name must be a string other than 'server', got {name!r}")
        super().__init__(objective, constraints, equalities, name)
        if self.is_empty:
            raise ValueError(f"{self._where() if self.name else 'client (unnamed)'}: has "
                             "neither an objective nor constraints")


class Server(Party):
    """The server (i = 0): optional f₀ and global constraints c₀ ≤ 0, h₀ = 0 on its data."""

    kind = "server"

    def __init__(self, objective=None, constraints=(), equalities=()):
        super().__init__(objective, constraints, equalities, name="server")


class ServerView:
    """What the server of a federation knows of problem (5): the dimension, the
    regularizer P, its own party (f₀, c₀, h₀) and the clients' names — not their
    functions or data.  The server-side algorithms (:mod:`constrfl.solvers`) use only
    this; a :class:`Problem` is one, and :class:`ServerSide` is one without clients
    (the Flower ServerApp's)."""

    dim: int
    regularizer: Regularizer
    server: "Server"

    @property
    def client_names(self):
        raise NotImplementedError

    @property
    def n_clients(self):
        return len(self.client_names)

    @property
    def party_names(self):
        """Every party's name: ``"server"``, then the clients."""
        return ["server", *self.client_names]

    def _set_server(self, server, regularizer):
        """The server's party and P, checked (defaults: no functions, P = 0)."""
        self.server = Server() if server is None else server
        if not isinstance(self.server, Server):
            raise TypeError(f"server must be a constrfl.Server, got {type(self.server).__name__}")
        self.regularizer = Zero() if regularizer is None else regularizer
        if not isinstance(self.regularizer, Regularizer):
            raise TypeError("regularizer must be a constrfl.prox.Regularizer, got "
                            f"{type(self.regularizer).__name__}")

    # the user's units (a :class:`constrfl.scaling.ScaledView` maps its x to them)
    @property
    def user_regularizer(self):
        return self.regularizer

    def user_point(self, w):
        return np.array(w, dtype=np.float64)

    def begin_payload(self):
        return {}

    def zero_multipliers(self):
        """``{party: (zeros, zeros)}`` for the parties whose constraint counts are known."""
        from .result import Multipliers
        return {p.name: Multipliers(np.zeros(p.n_ineq), np.zeros(p.n_eq))
                for p in self._known_parties()}

    def _known_parties(self):
        return [self.server]

    def client_rows(self):
        """Rows of data behind each client's objective, in client order (None when the
        server cannot know them)."""
        return None

    def client_samples(self):
        """Rows of data each client holds, in client order (None when not known)."""
        return None

    def constrained_parties(self):
        """Names of the parties with constraints (None when not known)."""
        return None

    def start_point(self, w0=None, seed=0):
        """``w0`` checked and projected onto dom P; by default a point on the unit
        sphere drawn from ``seed`` (the paper's choice)."""
        d = self.dim
        if w0 is None:
            if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
                raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
            v = np.random.default_rng(seed).standard_normal(d)
            w0 = v / np.linalg.norm(v)
        else:
            try:
                w0 = np.array(w0, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"w0 must be an array of {d} numbers, got {w0!r}") from None
            if w0.shape != (d,):
                raise ValueError(f"w0 has shape {w0.shape}, expected ({d},)")
            if not np.all(np.isfinite(w0)):
                raise ValueError("w0 contains NaN or inf")
        return self.regularizer.prox(w0, 0.0)


class ServerSide(ServerView):
    """The server's view without the clients: ``dim``, ``client_names`` (the fixed
    aggregation order), its own ``server`` party (default: none) and ``regularizer``."""

    def __init__(self, dim, client_names, server=None, regularizer=None):
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        self.dim = int(dim)
        names = list(client_names)
        if not names or len(set(names)) != len(names) or "server" in names \
                or not all(isinstance(n, str) for n in names):
            raise ValueError("client_names must be distinct strings other than 'server', "
                             f"at least one; got {names!r}")
        self._names = names
        self._set_server(server, regularizer)
        self.server.check_dim(self.dim)
        self.regularizer.check_dim(self.dim)

    @property
    def client_names(self):
        return list(self._names)

    def __repr__(self):
        return f"ServerSide(dim={self.dim}, clients={self.n_clients}, regularizer={self.regularizer!r})"


class Problem(ServerView):
    """``min f₀ + Σᵢ fᵢ + P  s.t.  cᵢ ≤ 0, hᵢ = 0 (i = 0..n)`` — problem (5).

    ``dim`` is inferred from the functions when not given.
    """

    def __init__(self, clients, server=None, regularizer=None, dim=None):
        if isinstance(clients, Client):
            clients = [clients]
        self.clients = list(clients)
        if not self.clients:
            raise ValueError("Problem needs at least one client")
        for i, c in enumerate(self.clients):
            if not isinstance(c, Client):
                raise TypeError(f"clients[{i}] must be a constrfl.Client, got {type(c).__name__}")
            if c.name is None:               # named here, on a copy: the caller's is unchanged
                self.clients[i] = c = copy.copy(c)
                c.name = f"client-{i}"
        names = [c.name for c in self.clients]
        dup = {n for n, k in collections.Counter(names).items() if k > 1}
        if dup:
            raise ValueError(f"client names must be unique; repeated: {sorted(dup)}")
        self._set_server(server, regularizer)
        self.dim = self._infer_dim(dim)
        for p in self.parties:
            p.check_dim(self.dim)
        self.regularizer.check_dim(self.dim)

    def _infer_dim(self, dim):
        if dim is not None:
            if int(dim) != dim or dim < 1:
                raise ValueError(f"dim must be a positive integer, got {dim!r}")
            return int(dim)
        for p in self.parties:
            if p.dims:
                return p.dims.pop()
        raise ValueError("cannot infer the dimension from the functions; pass dim=")

    @property
    def parties(self):
        """The server first, then the clients: every party."""
        return [self.server, *self.clients]

    @property
    def client_names(self):
        return [c.name for c in self.clients]

    def _known_parties(self):
        return self.parties

    def client_rows(self):
        return [0 if c.objective is None else c.objective.n_samples for c in self.clients]

    def client_samples(self):
        return [c.n_samples for c in self.clients]

    def constrained_parties(self):
        return [p.name for p in self.parties if p.n_ineq or p.n_eq]

    @property
    def is_convex(self):
        return all(p.is_convex for p in self.parties)

    def objective(self, w):
        """``F(w) = f₀(w) + Σᵢ fᵢ(w) + P(w)``."""
        return sum(p.f_value_grad(w)[0] for p in self.parties) + self.regularizer.value(w)

    def __repr__(self):
        return (f"Problem(dim={self.dim}, clients={self.n_clients}, "
                f"regularizer={self.regularizer!r})")


def _as_list(fs):
    if fs is None:
        return []
    if isinstance(fs, Function):
        return [fs]
    return list(fs)


def _call(slot, f, method, *args):
    """``f.method(*args)``; an exception becomes a PartyError (client_error) naming the
    slot, with the original as its cause."""
    try:
        return getattr(f, method)(*args)
    except Exception as exc:
        raise PartyError(st.CLIENT_ERROR, slot,
                         f"{method} raised {type(exc).__name__}: {exc}") from exc


def _checked(slot, what, a, shape):
    """``a`` as a float64 array of ``shape``: a wrong shape is a client_error, a NaN or
    inf a numerical_error, both naming the slot.  (Hot path: one sum in the entries'
    memory order decides that every entry is finite, not a BLAS dot, which starts
    threads on a Hessian, nor a ravel, which copies a transposed block of products; the
    exact test runs only when it overflows.)"""
    if type(a) is not np.ndarray or a.dtype != _FLOAT64:
        if a is None:           # (np.asarray(None, float) would be NaN: not a NaN of its)
            raise PartyError(st.CLIENT_ERROR, slot, f"its {what} is None (the function "
                             "returned nothing)") from TypeError(f"{what} is None")
        try:
            a = np.asarray(a, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise PartyError(st.CLIENT_ERROR, slot, f"its {what} is not numeric: "
                             f"{type(a).__name__}") from exc
    if a.shape != shape:
        raise PartyError(st.CLIENT_ERROR, slot, f"its {what} has shape {a.shape}, "
                         f"expected {shape}") from ValueError(f"{what} shape {a.shape}")
    if not math.isfinite(a.sum()) and not np.isfinite(a).all():
        raise PartyError(st.NUMERICAL_ERROR, slot, f"its {what} contains NaN or inf") \
            from FloatingPointError(f"non-finite {what}")
    return a


def _scalar(slot, v):
    """A scalar function's value as a finite float."""
    if type(v) is not float:
        v = _checked(slot, "value", v, ())
    if not math.isfinite(v):
        raise PartyError(st.NUMERICAL_ERROR, slot, f"its value contains NaN or inf ({v})") \
            from FloatingPointError(f"non-finite value {v}")
    return float(v)


def _rows(slot, f, v):
    """A constraint's value as a 1-D array (one entry, or ``size`` entries)."""
    if f.size is None:
        return np.array([_scalar(slot, v)])
    return _checked(slot, "value", v, (f.size,))


def _jacobian(slot, f, J, d):
    """A constraint's gradient as an (m, d) Jacobian."""
    return _checked(slot, "gradient", J, (d,) if f.size is None else (f.size, d)) \
        .reshape(-1, d)
