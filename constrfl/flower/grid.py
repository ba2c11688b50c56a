"""An in-memory Flower ``Grid`` for tests and quick runs: no Ray, no sockets.

:class:`LocalGrid` plays the SuperLink and the SuperNodes in this process.  Each node
has a node config (its ``--node-config``), a ``Context`` and its own ClientApp instance
(its "process": what the app caches, it caches per node).  A pushed message is
delivered at once, as on a deployment:

1. the ClientApp gets a copy of the message (its own metadata, with the message id a
   SuperLink would give it, and a deep copy of its content: nothing shared with the
   server's objects);
2. it gets a copy of the node's ``Context`` as well, as a ClientApp process gets one
   from its SuperNode (``serialize_context=False``: the same object every message, as
   Flower's simulation engine keeps it);
3. the ClientApp runs; an exception becomes an ``Error`` reply
   (``CLIENT_APP_RAISED_EXCEPTION``), as Flower reports it;
4. a copy of the reply waits to be pulled.

Only Flower's public modules are used (``flwr.app``, ``flwr.serverapp``): no runtime
sets the ServerApp's task here, so the grid makes the ServerApp's messages itself
(:meth:`create_message`, which :class:`~.server.FlowerFederation` calls on this grid).
That the codec's messages cross Flower's own serialization bit for bit is tested apart
(tests/test_flower_warm.py), and on every deployment.

**Faults**, for tests: ``faults`` is a callable ``(site, node_id, message) -> action``
called before each delivery (``site`` the node's ``site`` config value): ``None``
delivers; ``"drop"`` loses the message (no reply ever comes); ``"drop_reply"`` runs
the ClientApp and loses its reply; ``"unavailable"`` answers with Flower's
``NODE_UNAVAILABLE`` error.  :meth:`restart` replaces a node by a new one (new node id,
empty ``context.state``, a fresh ClientApp "process"), :meth:`remove` takes a node away
(messages to it are answered ``NODE_UNAVAILABLE``), :meth:`add` brings one in.
"""
from __future__ import annotations

import copy
import itertools
import time
import uuid
from dataclasses import dataclass, field

from flwr.app import DEFAULT_TTL, Context, Error, Message, Metadata, RecordDict
from flwr.serverapp import Grid

from . import codec

__all__ = ["LocalGrid"]

#: the node id Flower gives the SuperLink (the source of a ServerApp's messages)
SUPERLINK_NODE_ID = 1


@dataclass(frozen=True)
class LocalRun:
    """The run of a :class:`LocalGrid` (Flower's ``Grid.run``: its id)."""
    run_id: int


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
    seconds_in_apps: float = 0.0
    faults: list = field(default_factory=list)


class LocalGrid(Grid):
    """``nodes``: ``[(node_config, make_app)]``, ``make_app()`` returning the node's
    ClientApp; ``run_config``: the run config every node's context carries.
    ``serialize_context=False`` keeps each node's ``Context`` object as the simulation
    engine does (no serde between messages)."""

    def __init__(self, nodes, *, run_id=1, run_config=None, serialize_context=True,
                 faults=None):
        self._run = LocalRun(run_id)
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
        """A message of the ServerApp's (from the SuperLink's node) with its message id."""
        return Message(metadata=Metadata(
            run_id=self._run.run_id, message_id=uuid.uuid4().hex,
            src_node_id=SUPERLINK_NODE_ID, dst_node_id=dst_node_id, reply_to_message_id="",
            group_id=group_id or "", created_at=time.time(), ttl=ttl or DEFAULT_TTL,
            message_type=message_type), content=content)

    def get_node_ids(self):
        return list(self.nodes)

    def push_messages(self, messages):
        ids = []
        for msg in messages:
            if not msg.metadata.message_id:
                raise ValueError("LocalGrid: push messages made by its create_message "
                                 "(a message id is given there)")
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
        wire = _copy(msg)
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
            reply = Message(Error(codec.NODE_UNAVAILABLE, "Error: Node Unavailable"),
                            reply_to=wire)
        else:
            reply = self._run_app(node, wire)
            if action == "drop_reply":
                return
        self._replies[msg.metadata.message_id] = _copy(reply)

    def _run_app(self, node, msg):
        context = node.context
        if self.serialize_context:
            context = Context(run_id=context.run_id, node_id=context.node_id,
                              node_config=dict(context.node_config),
                              state=copy.deepcopy(context.state),
                              run_config=dict(context.run_config))
        t = time.perf_counter()
        try:
            reply = node.app(msg, context)
        except Exception as exc:          # what Flower's runtime makes of it
            reply = Message(Error(codec.CLIENT_APP_RAISED_EXCEPTION,
                                  f"{type(exc)}:<'{exc}'>"), reply_to=msg)
        else:
            node.context = context
        self.stats.seconds_in_apps += time.perf_counter() - t
        self.stats.delivered += 1
        node.delivered += 1
        return reply


def _copy(message):
    """A message as its receiver gets it: the same metadata (a reply's message id the
    one a SuperLink would give it), its content deep-copied (nothing shared)."""
    m = message.metadata
    metadata = Metadata(run_id=m.run_id, message_id=m.message_id or uuid.uuid4().hex,
                        src_node_id=m.src_node_id, dst_node_id=m.dst_node_id,
                        reply_to_message_id=m.reply_to_message_id, group_id=m.group_id,
                        created_at=m.created_at, ttl=m.ttl, message_type=m.message_type,
                        src_task_id=m.src_task_id, dst_task_id=m.dst_task_id)
    if message.has_error():
        return Message(metadata=metadata, error=message.error)
    return Message(metadata=metadata, content=copy.deepcopy(message.content))
