"""An in-memory Flower ``Grid`` for tests and quick runs: no Ray, no sockets.

:class:`LocalGrid` plays the SuperLink and the SuperNodes in this process.  Each node
has a node config (its ``--node-config``), a ``Context`` and its own ClientApp instance
(its "process": what the app caches, it caches per node).  A pushed message is
delivered at once, as on a deployment:

1. the message goes through Flower's serialization (deflated into the objects a
   SuperLink stores, inflated back: :func:`~.codec.wire_round_trip`), so the ClientApp
   sees exactly what would arrive over the network;
2. the node's ``Context`` goes through Flower's protobuf serde, as it does between a
   SuperNode and its ClientApp process;
3. the ClientApp runs; an exception becomes an ``Error`` reply
   (``CLIENT_APP_RAISED_EXCEPTION``), as Flower reports it;
4. the reply makes the same round trip back and waits to be pulled.

**Faults**, for tests: ``faults`` is a callable ``(site, node_id, message) -> action``
called before each delivery (``site`` the node's ``site`` config value): ``None``
delivers; ``"drop"`` loses the message (no reply ever comes); ``"drop_reply"`` runs
the ClientApp and loses its reply; ``"unavailable"`` answers with Flower's
``NODE_UNAVAILABLE`` error.  :meth:`restart` replaces a node by a new one (new node id,
empty ``context.state``, a fresh ClientApp "process"), :meth:`remove` takes a node away
(messages to it are answered ``NODE_UNAVAILABLE``), :meth:`add` brings one in.
"""
from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from dataclasses import dataclass, field

from flwr.app import Context, Error, Message, RecordDict
from flwr.common.constant import ErrorCode
from flwr.common.serde import context_from_proto, context_to_proto
from flwr.serverapp import Grid
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from . import codec

__all__ = ["LocalGrid", "task_identity"]


@dataclass
class _Node:
    node_config: dict
    make_app: object
    app: object
    context: Context
    delivered: int = 0


@dataclass
class _Stats:
    pushed: int = 0          # messages the server pushed
    delivered: int = 0       # messages a ClientApp ran
    bytes_down: int = 0      # bytes of the deflated messages
    bytes_up: int = 0        # bytes of the deflated replies
    seconds_in_apps: float = 0.0
    faults: list = field(default_factory=list)


class LocalGrid(Grid):
    """``nodes``: ``[(node_config, make_app)]``, ``make_app()`` returning the node's
    ClientApp; ``run_config``: the run config every node's context carries.
    ``serialize_context=False`` keeps each node's ``Context`` object as the simulation
    engine does (no serde between messages)."""

    def __init__(self, nodes, *, run_id=1, run_config=None, serialize_context=True,
                 faults=None):
        self._run = Run.create_empty(run_id)
        self.run_config = dict(run_config or {})
        self.serialize_context = serialize_context
        self.faults = faults
        self.stats = _Stats()
        self._ids = itertools.count(1001)
        self.nodes = {}
        self._replies = {}
        for node_config, make_app in nodes:
            self.add(node_config, make_app)

    # -- the federation's membership ---------------------------------------------------
    def add(self, node_config, make_app):
        """A new SuperNode (a new node id) with this config; returns its node id."""
        node_id = next(self._ids)
        self.nodes[node_id] = _Node(dict(node_config), make_app, make_app(),
                                    Context(run_id=self._run.run_id, node_id=node_id,
                                            node_config=dict(node_config),
                                            state=RecordDict(),
                                            run_config=dict(self.run_config)))
        return node_id

    def restart(self, node_id):
        """The node's SuperNode restarts: it comes back under a new node id, with an
        empty ``context.state`` and a fresh ClientApp.  Returns the new node id."""
        node = self.nodes.pop(node_id)
        return self.add(node.node_config, node.make_app)

    def remove(self, node_id):
        """The node goes away for good; returns ``(node_config, make_app)``."""
        node = self.nodes.pop(node_id)
        return node.node_config, node.make_app

    def node_of(self, site, key="site"):
        """The node id whose config has ``key == site``."""
        return next(i for i, n in self.nodes.items() if n.node_config.get(key) == site)

    # -- the Grid interface ------------------------------------------------------------
    def set_run(self, run):
        self._run = run

    @property
    def run(self):
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self):
        return list(self.nodes)

    def push_messages(self, messages):
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            ids.append(msg.metadata.message_id)
            self.stats.pushed += 1
            self._deliver(msg)
        return ids

    def pull_messages(self, message_ids):
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages, *, timeout=None):
        return self.pull_messages(self.push_messages(messages))

    # -- delivery ----------------------------------------------------------------------------
    def _deliver(self, msg):
        wire, nbytes = codec.wire_round_trip(msg)
        self.stats.bytes_down += nbytes
        node = self.nodes.get(msg.metadata.dst_node_id)
        action = None
        if node is not None and self.faults is not None:
            action = self.faults(node.node_config.get("site"), msg.metadata.dst_node_id, wire)
            if action is not None:
                self.stats.faults.append((node.node_config.get("site"),
                                          msg.metadata.message_type, action))
        if action == "drop":
            return
        if node is None or action == "unavailable":
            reply = Message(Error(ErrorCode.NODE_UNAVAILABLE, "Error: Node Unavailable"),
                            reply_to=wire)
        else:
            reply = self._run_app(node, wire)
            if action == "drop_reply":
                return
        reply.metadata.__dict__["_message_id"] = uuid.uuid4().hex
        back, nbytes = codec.wire_round_trip(reply)
        self.stats.bytes_up += nbytes
        self._replies[msg.metadata.message_id] = back

    def _run_app(self, node, msg):
        context = node.context
        if self.serialize_context:
            context = context_from_proto(context_to_proto(context))
        t = time.perf_counter()
        try:
            reply = node.app(msg, context)
        except Exception as exc:          # what Flower's runtime makes of it
            reply = Message(Error(ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                                  f"{type(exc)}:<'{exc}'>"), reply_to=msg)
        else:
            node.context = context
        self.stats.seconds_in_apps += time.perf_counter() - t
        self.stats.delivered += 1
        node.delivered += 1
        return reply


@contextlib.contextmanager
def task_identity(run_id=1, node_id=0, task_id=1):
    """Flower creates messages for the task of this process (``TaskIdentity``), set by
    its runtimes; a ServerApp run outside one needs it set (and restored after)."""
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = run_id, node_id, task_id
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved
