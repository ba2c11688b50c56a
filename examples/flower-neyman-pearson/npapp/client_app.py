"""The ClientApp: a site builds its client from its own CSV.

Deployment: ``flower-supernode --node-config 'site="site-0" data="/path/site-0.csv"'``
(optional ``state-dir="..."``: where the site keeps its state across restarts).
Simulation (``flwr run`` on a simulation SuperLink): the node config holds
``partition-id``; the site is ``site-<partition-id>`` and its CSV is in ``sites-dir``
(the ServerApp first checks that the simulation has ``num-sites`` SuperNodes).

With ``CONSTRFL_NP_TRACE=<file>`` in the SuperNode's environment every message appends
``<pid> <unix time> <site> <message type>`` to that file (which processes ran which
messages).
"""
import os
import time

from constrfl.flower import client_app

from . import task


def build(context):
    cfg, run = context.node_config, context.run_config
    if "data" in cfg:
        name, path = str(cfg["site"]), cfg["data"]
    else:
        name = f"site-{int(cfg['partition-id'])}"
        path = task.sites_dir(run) / f"{name}.csv"
    return task.make_client(path, name, int(run["num-sites"]), float(run["max-class1-loss"]))


def trace(message, context, call_next):
    """A Flower mod: note which process ran which message."""
    path = os.environ.get("CONSTRFL_NP_TRACE")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{os.getpid()} {time.time():.6f} {context.node_config.get('site', '-')} "
                     f"{message.metadata.message_type}\n")
    return call_next(message, context)


app = client_app(build, mods=[trace])
