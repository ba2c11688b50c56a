"""The server side on Flower: :class:`FlowerFederation` (a :class:`Federation` over a
Flower ``Grid``), :func:`run_server` (the body of a ServerApp) and :func:`server_app`.

**Sites.**  The server knows its clients by name (``ServerSide.client_names``), never by
node id.  It learns which node serves which site by asking (``query.constrfl_hello``)
every node it has not asked yet, whenever a site has no node, and again before every
resend (a restarted SuperNode comes back under a new node id).

**One round** (:meth:`FlowerFederation._exchange`): push one message per addressed site
(the same sequence number on every resend), pull the replies every ``poll_interval``
seconds, and

* a reply missing after ``resend_after`` seconds (then 2×, 4×, ... that after each
  further resend: a slow round is not flooded with copies), or a transport error reply
  (Flower's ``NODE_UNAVAILABLE``, ``MESSAGE_UNAVAILABLE``, ``CLIENT_APP_CRASHED``, ...):
  look for the site's node again and resend — at once when the site turned up on a new
  node (a restarted SuperNode).  The site answers a sequence number it has already
  answered from its cache, and a restarted site restores its state from its file;
* a ``CLIENT_APP_RAISED_EXCEPTION`` / ``LOAD_CLIENT_APP_EXCEPTION`` reply (the site's
  own code failed, e.g. its data did not load): ``client_error``, at once;
* still no answer ``client_timeout`` seconds after the first push: the round ends with
  :class:`~constrfl.errors.ClientFailure` naming the site (status ``client_failure``:
  the result keeps the last iterate, multipliers and history, and ``resume=`` continues
  it once the site is back).

The server never raises for a site's fault or a SuperLink hiccup (a Grid call that
raises is retried until the timeout) and never waits past ``client_timeout``;
Ctrl-C and ``max_time`` are honoured while waiting.
"""
from __future__ import annotations

import contextlib
import logging
import time
import uuid
from pathlib import Path

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.serverapp import ServerApp

from .. import status as st
from ..api import solve
from ..control import positive
from ..errors import ClientFailure, PartyError, SolveStop
from ..federation.base import Federation
from ..messages import SECURE_MIN_CLIENTS, MessageType as M
from ..parties import PartyContext
from ..federation.runtime import PartyRuntime
from ..problem import ServerView
from . import codec
from .grid import LocalGrid

__all__ = ["FlowerFederation", "run_server", "server_app", "FLOWER_KEY"]

log = logging.getLogger("constrfl.flower")

#: the entry of a result's ``state["parties"]`` that holds the Flower backend's own
#: bookkeeping (the solve's id, the last message each site answered): not a party
FLOWER_KEY = "@flower"

#: Flower error codes after which the site's own code failed (no retry)
APP_FAILED = (codec.CLIENT_APP_RAISED_EXCEPTION, codec.LOAD_CLIENT_APP_EXCEPTION)

#: the keywords of :func:`run_server` that go to :class:`FlowerFederation`, and their
#: defaults (the one source: :func:`~.simulate.simulate` takes them too)
TRANSPORT = {"client_timeout": 300.0, "resend_after": 30.0, "poll_interval": 0.1}


class FlowerFederation(Federation):
    """The clients of ``view`` behind a Flower ``grid`` (the server's own party runs
    here).  ``snapshots``: ``result.state["parties"]`` of a resumed solve.  After an
    error reply a site's message is resent after ``poll_interval``, doubling with each
    further error up to ``resend_after``."""

    def __init__(self, grid, view, snapshots=None, counted=True, *, control=None,
                 disclose=False, secure=False, client_timeout=TRANSPORT["client_timeout"],
                 resend_after=TRANSPORT["resend_after"],
                 poll_interval=TRANSPORT["poll_interval"]):
        snapshots = snapshots or {}
        own = (None if view.server.is_empty
               else PartyRuntime(PartyContext(view.server, view.regularizer),
                                 snapshots.get("server"), disclose))
        super().__init__(view.client_names, own, counted, control, secure, snapshots)
        self.grid = grid
        self.client_timeout = positive(client_timeout, "client_timeout")
        self.resend_after = positive(resend_after, "resend_after")
        self.poll_interval = positive(poll_interval, "poll_interval")
        saved = snapshots.get(FLOWER_KEY, {})
        self.solve_id = saved.get("solve") or uuid.uuid4().hex
        self.last_seq = dict(saved.get("last_seq", {}))     # site -> last answered seq
        self.nodes = {}          # site -> node id
        self.asked = {}          # node id -> when it was asked which site it serves
        self.hellos = {}         # message id -> node id, of the unanswered hellos
        self.hello_errors = {}   # node id -> the error of its last hello
        self.broken = {}         # site -> why its ClientApp cannot build it
        self.stats = {"messages": 0, "resends": 0, "hellos": 0, "transport_errors": 0}

    def snapshot(self):
        out = super().snapshot()
        out[FLOWER_KEY] = {"solve": self.solve_id, "last_seq": dict(self.last_seq)}
        return out

    # -- the Grid, guarded: a failing call is a missed poll, not a crash ----------------
    def _grid(self, what, *args):
        try:
            return getattr(self.grid, what)(*args), None
        except Exception as exc:      # a SuperLink hiccup: retried until the timeout
            self.stats["transport_errors"] += 1
            log.warning("constrfl: Grid.%s failed: %s: %s", what, type(exc).__name__, exc)
            return None, f"Grid.{what} failed: {type(exc).__name__}: {exc}"

    def _message(self, content, node, message_type, group):
        """A message to ``node``: ``Message(...)`` on Flower's runtimes (which tell it the
        ServerApp's run and task); the in-memory grid, with no runtime around it, makes
        its own (``Grid.create_message``)."""
        if isinstance(self.grid, LocalGrid):
            return self.grid.create_message(content, message_type, node, group)
        return Message(content, dst_node_id=node, message_type=message_type, group_id=group)

    def _push(self, messages):
        """Push ``[(key, Message)]``; ``({key: message id}, error)`` of those accepted."""
        if not messages:
            return {}, None
        ids, err = self._grid("push_messages", [m for _, m in messages])
        ids = list(ids or [])
        return {k: i for (k, _), i in zip(messages, ids) if i}, err

    # -- which node serves which site ---------------------------------------------------
    def _discover(self, now):
        """Ask the nodes not asked yet (or asked ``resend_after`` ago without an answer)
        which site they serve; forget the nodes that left.  Returns an error text."""
        nodes, err = self._grid("get_node_ids")
        if nodes is None:
            return err
        nodes = set(nodes)
        for site, node in list(self.nodes.items()):
            if node not in nodes:
                del self.nodes[site]
        self.hellos = {m: n for m, n in self.hellos.items() if n in nodes}
        waiting, served = set(self.hellos.values()), set(self.nodes.values())
        ask = [n for n in sorted(nodes - served) if n not in self.asked
               or (n in waiting and now - self.asked[n] >= self.resend_after)]
        content = RecordDict({codec.META: ConfigRecord({"solve": self.solve_id})})
        ids, err = self._push([(n, self._message(content, n, codec.flower_type(codec.HELLO),
                                                 "hello")) for n in ask])
        for node, mid in ids.items():
            self.hellos[mid], self.asked[node] = node, now
        self.stats["hellos"] += len(ids)
        return err

    def _hello_reply(self, reply, node):
        if reply.has_error():
            self.asked.pop(node, None)            # ask again
            self.hello_errors[node] = f"Flower error {reply.error.code}: {reply.error.reason}"
            return
        fields = codec.meta(reply.content)
        site = fields.get("site")
        if site in self.clients and "error" in fields:
            self.broken[site] = fields["error"]
        elif site in self.clients:                # (else: serves no site of ours)
            if self.nodes.get(site, node) != node:
                log.info("constrfl: site %r moved from node %s to node %s", site,
                         self.nodes[site], node)
            self.nodes[site] = node

    # -- one round ------------------------------------------------------------------------
    def _exchange(self, seq, message_type, payloads):
        ftype, group = codec.flower_type(message_type), str(seq)
        start = time.monotonic()
        pending, out = set(payloads), {}
        inflight = {}        # message id -> (site, node)
        sent_to, due = {}, {}  # site -> node of its last push, and when to resend
        pushes = {}            # site -> pushes so far (the resend interval doubles)
        errors, reason = {}, {}  # site -> error replies so far, why no answer yet
        while True:
            now = time.monotonic()
            if self.control.interrupted:
                return dict(out, **{n: SolveStop("interrupted (Ctrl-C)", st.INTERRUPTED)
                                    for n in pending})
            if self.control.past_deadline():
                return dict(out, **{n: SolveStop("max_time reached", st.TIME_LIMIT)
                                    for n in pending})
            if any(n not in self.nodes or (n in due and now >= due[n]) for n in pending):
                err = self._discover(now)
                for n in pending if err else ():
                    reason[n] = err
            for n in [n for n in pending if n in self.broken]:
                out[n] = PartyError(st.CLIENT_ERROR, "ClientApp",
                                    self.broken.pop(n)).named(n)
                pending.discard(n)
            push = []
            for n in sorted(pending):
                node = self.nodes.get(n)
                if node is None:
                    reason[n] = "no SuperNode serves this site" + (
                        f" (a node failed to answer which site it serves: "
                        f"{list(self.hello_errors.values())[-1]})" if self.hello_errors else "")
                elif n not in due or sent_to[n] != node or now >= due[n]:
                    fields = {"seq": seq, "solve": self.solve_id, "type": message_type,
                              "prev": self.last_seq.get(n, 0)}
                    push.append((n, self._message(codec.encode(payloads[n], fields), node,
                                                  ftype, group)))
            ids, err = self._push(push)
            for n, _ in push:
                if n not in ids:
                    reason[n] = err or "the SuperLink did not accept the message"
                    continue
                self.stats["resends" if n in due else "messages"] += 1
                inflight[ids[n]] = (n, self.nodes[n])
                pushes[n] = pushes.get(n, 0) + 1     # the k-th push waits 2ᵏ⁻¹·resend_after
                sent_to[n] = self.nodes[n]
                due[n] = now + self.resend_after * 2 ** (pushes[n] - 1)
            ids = list(inflight) + list(self.hellos)
            replies, err = self._grid("pull_messages", ids) if ids else ([], None)
            for reply in replies or []:
                mid = reply.metadata.reply_to_message_id
                if mid in self.hellos:
                    self._hello_reply(reply, self.hellos.pop(mid))
                    continue
                n, node = inflight.pop(mid, (None, None))
                if n not in pending:
                    continue                      # a duplicate: answered already
                value = self._reply(n, reply, seq, reason)
                if value is None:                 # a transport error: look for the
                    errors[n] = errors.get(n, 0) + 1      # site's node, resend soon
                    due[n] = now + min(self.resend_after,
                                       self.poll_interval * 2 ** (errors[n] - 1))
                    if self.nodes.get(n) == node:
                        del self.nodes[n]
                        self.asked.pop(node, None)
                    continue
                out[n] = value
                pending.discard(n)
                if isinstance(value, dict) and message_type != M.SECURE_KEYS:
                    self.last_seq[n] = seq        # (the key agreement is the mod's)
            if not pending:
                return out
            if time.monotonic() - start > self.client_timeout:
                for n in pending:
                    out[n] = ClientFailure(n, f"{reason.get(n, 'no reply')} (waited "
                                              f"client_timeout={self.client_timeout:g} s)")
                return out
            if not replies:     # (a held pull has waited already)
                time.sleep(max(0.0, self.poll_interval - (time.monotonic() - now)))

    def _reply(self, site, reply, seq, reason):
        """A site's answer (a reply dict or a PartyError), or None to keep waiting."""
        if reply.has_error():
            code, text = reply.error.code, reply.error.reason
            if code in APP_FAILED:
                return PartyError(st.CLIENT_ERROR, "ClientApp", text).named(site)
            self.stats["transport_errors"] += 1
            reason[site] = f"Flower error {code}: {text}"
            return None
        fields = codec.meta(reply.content)
        if (fields.get("seq"), fields.get("solve"), fields.get("site")) != (
                seq, self.solve_id, site):
            reason[site] = f"a reply that does not match the message: {fields}"
            return None
        return codec.decode(reply.content)


# -- the ServerApp ------------------------------------------------------------------------------

def run_server(grid, view, *args, output_dir=None, **kwargs):
    """Solve over the Flower ``grid`` (the body of a ServerApp's main); returns the
    :class:`~constrfl.result.SolveResult` and, with ``output_dir``, saves it there
    (``res.save``: ``result.json`` and ``arrays.npz``).

    ``view`` is what the server knows (:class:`constrfl.problem.ServerSide`: dimension,
    client names, its own functions, regularizer).  The other arguments are those of
    :func:`constrfl.solve` (``method``, ``tol``, ``w0``, ``seed``, ... and the options,
    with its defaults), for every method but ``cproxal`` (the centralized twin: it pools
    the data, which a federation does not), and :class:`FlowerFederation`'s
    :data:`TRANSPORT` options: ``client_timeout`` (seconds a round waits for a site,
    retrying, before the solve ends ``client_failure``), ``resend_after`` (seconds
    without a reply after which a message is sent again), ``poll_interval`` (seconds
    between pulls).

    Secure aggregation (``secure``, :mod:`constrfl.federation.secure`) is on by default
    with at least 3 sites (the server reads only the sums of their uploads;
    docs/flower.md, "Threat model"), unless ``private=False`` (whose disclosed forms are
    not sums) or the solve is resumed (it keeps its own setting); with 2 sites it is off,
    and said so in the log: each site could subtract its own upload from a sum and read
    the other's.
    """
    if not isinstance(view, ServerView):
        raise TypeError(f"view must be a constrfl.problem.ServerView (e.g. ServerSide), "
                        f"got {type(view).__name__}")
    transport = {k: kwargs.pop(k) for k in TRANSPORT if k in kwargs}
    if "secure" not in kwargs and kwargs.get("resume") is None:
        kwargs["secure"] = _secure_by_default(view, args, kwargs)

    def over_flower(method, snapshots, control, disclose, secure):
        if method == "cproxal":
            raise ValueError("method 'cproxal' is the centralized twin (subproblems on the "
                             "pooled data, no federation); on Flower use method='fedproxal' "
                             "with inner='newton' (the same proximal Newton steps over the "
                             "federation) or inner='admm'")
        return FlowerFederation(grid, view, snapshots, control=control, disclose=disclose,
                                secure=secure, **transport)

    with _outer_iterations_logged():
        res = solve(view, *args, federation=over_flower, **kwargs)
    if output_dir is not None:
        res.save(Path(output_dir))
    return res


def _secure_by_default(view, args, kwargs):
    """A deployment's ``secure``: on with at least 3 sites, for the federated methods
    with only sums in their uploads."""
    method = args[0] if args else kwargs.get("method", "fedproxal")
    if method == "cproxal" or kwargs.get("private", True) is False:
        return False
    if len(view.client_names) < SECURE_MIN_CLIENTS:
        log.warning("constrfl: secure aggregation is off: %d sites (it needs %d: with "
                    "fewer, a site could read another's uploads from a sum)",
                    len(view.client_names), SECURE_MIN_CLIENTS)
        return False
    return True


@contextlib.contextmanager
def _outer_iterations_logged():
    """A ServerApp's log gets a line per outer iteration (the ``constrfl`` logger's INFO
    records) unless the application configured that logger itself."""
    logger = logging.getLogger("constrfl")
    if logger.handlers:
        yield
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s constrfl: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def server_app(view, *args, on_result=None, **kwargs):
    """A Flower ``ServerApp`` running :func:`run_server` with these arguments.

    ``view`` is a :class:`~constrfl.problem.ServerView` or a callable
    ``(context) -> ServerView`` (built from the run config); ``on_result(result)`` is
    called with the result (e.g. to hand it back in a simulation).  The other arguments
    are :func:`run_server`'s (``method``, ``tol``, ``output_dir``, ``client_timeout``,
    options, ...).
    """
    app = ServerApp()

    @app.main()
    def main(grid, context):
        v = view if isinstance(view, ServerView) else view(context)
        res = run_server(grid, v, *args, **kwargs)
        if on_result is not None:
            on_result(res)

    return app
