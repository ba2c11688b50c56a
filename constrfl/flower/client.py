"""The ClientApp: one site's side of the protocol on a Flower SuperNode.

A site is identified by the name of the :class:`constrfl.Client` that the user's
``build_client(context)`` returns — built from the site's own data, located through
the SuperNode's ``--node-config`` (``context.node_config``, e.g.
``site="hospital-a" data="/data/a.csv"``; the run config is ``context.run_config``); a
client without a name is named after ``node_config[site_key]``.  Never by node id: a
restarted SuperNode gets a new one.

Every message runs the site's :class:`~constrfl.federation.PartyRuntime` (the pure
handlers of :mod:`constrfl.parties`) on its state, which lives

* in ``context.state`` (the SuperNode keeps it in memory between messages, for the run),
* and in a site-local file pair ``<state_dir>/<site>.state.0|1``
  (:class:`~.codec.SiteStore`), written before the reply leaves, so that a restarted
  SuperNode (new node id, empty ``context.state``) carries on where it was.

Both hold the solve's id: a message of another solve starts from a fresh state.  The
runtime answers a sequence number it already answered from its cache, so a resent
message (the server retries after a lost reply or a restart) is harmless.  Every
message also names the last message this site answered (``prev``); a site whose state
is elsewhere (lost, or the server resumed from an older result) answers a
``client_error`` instead of computing from the wrong state.
"""
from __future__ import annotations

import copy
import logging
import os
from pathlib import Path

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from .. import status as st
from ..errors import PartyError
from ..parties import PartyContext
from ..federation.runtime import PartyRuntime
from ..problem import Client
from . import codec
from .secure import secure_sum_mod

__all__ = ["client_app", "DEFAULT_STATE_DIR"]

log = logging.getLogger("constrfl.flower")

#: where a site keeps its state unless the node config, ``state_dir`` or
#: ``$CONSTRFL_STATE_DIR`` say otherwise
DEFAULT_STATE_DIR = Path.home() / ".cache" / "constrfl" / "flower"


def client_app(build_client, *, regularizer=None, site_key="site", state_dir=None, mods=None,
               disclose=False):
    """A Flower ``ClientApp`` serving every constrfl message for one site.

    Parameters
    ----------
    build_client : callable ``(context: flwr.app.Context) -> constrfl.Client``,
        building the site's client from its own data (``context.node_config``: the
        SuperNode's ``--node-config``; ``context.run_config``: the run's config).
        Called once per process, node config and run config (the client, with its
        data and cached factorizations, is kept for later messages).
    regularizer : the problem's public regularizer P (default: none); only the clients
        of the composite baselines (FedMid, FedDualAvg) use it, and it must be the
        server's.
    site_key : node-config key naming the site when the built client has no name.
    state_dir : directory of the site-local state files; the node-config key
        ``state-dir`` overrides it; default ``$CONSTRFL_STATE_DIR``, else
        ``~/.cache/constrfl/flower``.
    mods : Flower mods wrapped around every message (``ClientApp(mods=...)``), inside
        the secure sum's own (:func:`~.secure.secure_sum_mod`, always the outermost).
    disclose : let this site's own values of the protocol's *disclosed* fields reach
        the server (the compact Hessians of ``inner="newton-basis"``, a solve with
        ``private=False``); default False: the site sends only sums
        (:data:`constrfl.messages.FIELDS`) and answers such a request with an error.
    """
    if not callable(build_client):
        raise TypeError(f"build_client must be callable, got {type(build_client).__name__}")
    contexts, stores = {}, {}          # this process's: per node config, per state file

    def party_of(context):
        key = (tuple(sorted(context.node_config.items())),
               tuple(sorted(context.run_config.items())))
        if key not in contexts:
            contexts[key] = _build(build_client, context, site_key, regularizer)
        return contexts[key]

    def hello(context):
        """Which site this node serves; a site that cannot be built says so (the
        server ends the solve ``client_error`` naming it, instead of waiting)."""
        try:
            return {"site": party_of(context)[1]}
        except Exception as exc:
            log.exception("constrfl: building the site of node config %s failed",
                          dict(context.node_config))
            return {"site": str(context.node_config.get(site_key, "")),
                    "error": f"building the site failed: {type(exc).__name__}: {exc}"}

    def store_of(context, name):
        path = _state_path(context.node_config, state_dir, name)
        if path not in stores:
            stores[path] = codec.SiteStore(path)
        return stores[path]

    # the secure sum's mod, outermost: the handler and the user's mods see plain replies
    app = ClientApp(mods=[secure_sum_mod(lambda context: party_of(context)[1], store_of),
                          *(mods or [])])

    def handler(message_type):
        def handle(msg: Message, context: Context) -> Message:
            if message_type == codec.HELLO:
                return Message(RecordDict({codec.META: ConfigRecord(hello(context))}),
                               reply_to=msg)
            party_ctx, name = party_of(context)
            fields = codec.meta(msg.content)
            store = store_of(context, name)
            runtime = _runtime(party_ctx, context, store, fields["solve"], disclose)
            if runtime.seq not in (fields["prev"], fields["seq"]):
                reply = PartyError(
                    st.CLIENT_ERROR, "state",
                    f"the site's state is at message {runtime.seq} of this solve, the "
                    f"server expects {fields['prev']} (state lost, or the server resumed "
                    f"from an older result)").named(name)
            else:
                resent = runtime.seq == fields["seq"]      # answered from the cache
                reply = runtime.call(fields["seq"], message_type, codec.decode(msg.content))
            out = {"seq": fields["seq"], "site": name, "solve": fields["solve"]}
            if isinstance(reply, PartyError):
                return Message(codec.encode_error(reply, out), reply_to=msg)
            if not resent:
                _keep(context, runtime, fields["solve"], store)
            return Message(codec.encode(reply, out), reply_to=msg)
        return handle

    for t in codec.known_types():
        category, action = codec.flower_type(t).split(".")
        getattr(app, category)(action)(handler(t))
    return app


def _build(build_client, context, site_key, regularizer):
    node_config = context.node_config
    client = build_client(context)
    if not isinstance(client, Client):
        raise TypeError(f"build_client must return a constrfl.Client, got "
                        f"{type(client).__name__}")
    if client.name is None:
        if site_key not in node_config:
            raise ValueError(f"the client built for node config {dict(node_config)} has "
                             f"no name and the node config has no {site_key!r} key")
        client = copy.copy(client)
        client.name = str(node_config[site_key])
    return PartyContext(client, regularizer), client.name


def _state_path(node_config, state_dir, name):
    root = node_config.get("state-dir") or state_dir or os.environ.get("CONSTRFL_STATE_DIR")
    root = DEFAULT_STATE_DIR if not root else Path(os.path.expanduser(str(root)))
    return root / f"{name}.state"


def _runtime(party_ctx, context, store, solve, disclose):
    """The site's runtime for ``solve``: the newer of ``context.state`` and the site's
    file (written before each reply leaves: newer than ``context.state`` after a
    restarted SuperNode, or when the SuperNode stored a ClientApp's context after its
    reply went out and the next message came first), else fresh."""
    snapshot, fields = codec.state_from_records(context.state)
    if fields.get("solve") != solve:
        snapshot = None
    try:
        saved, saved_fields = store.load()
    except OSError as err:
        log.warning("constrfl site %s: cannot read %s (%s)", party_ctx.party.name,
                    store.path, err)
        saved, saved_fields = None, {}
    if (saved is not None and saved_fields.get("solve") == solve
            and (snapshot is None or saved["seq"] > snapshot["seq"])):
        log.info("constrfl site %s: state of solve %s restored from %s (message %d%s)",
                 party_ctx.party.name, solve, store.path, saved["seq"],
                 "" if snapshot is None else f"; context.state had {snapshot['seq']}")
        snapshot = saved
    return PartyRuntime(party_ctx, snapshot, disclose)


def _keep(context, runtime, solve, store):
    """Store the runtime's snapshot in the site's file, then in ``context.state``."""
    blob = codec.pack_state(runtime.snapshot(), {"solve": solve})
    try:
        store.save(blob)
    except OSError as err:          # the reply still goes out; context.state holds it
        log.warning("constrfl site %s: cannot write %s (%s); a restart of this "
                    "SuperNode would lose the site's state", runtime.ctx.party.name,
                    store.path, err)
    context.state[codec.META] = codec.state_to_records(blob)
