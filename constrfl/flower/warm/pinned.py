"""The flwr versions whose internals constrfl's Flower commands (warm SuperExec,
SuperNode, SuperLink) were tested with, and the way back to Flower's own commands on any
other.

:mod:`.superexec`, :mod:`.supernode`, :mod:`.superlink`, :mod:`.holds`, :mod:`.scoped`
and :mod:`.waits` run Flower's own entry points and functions but reach into flwr's
internals (module globals of ``run_superexec``, ``run_clientapp``,
``start_client_internal``, the handler modules and ``flwr.superlink.main``, default
arguments of the object pulls), which Flower may change in any minor release.  On a
flwr whose minor version is not in :data:`TESTED` the commands say so on stderr and
replace themselves (``exec``, same PID) by the stock command with the same arguments,
and the waits are left as they are: the deployment still works, at Flower's own speed.
On a tested one, :func:`wrap_once` is how they replace a flwr function where its
callers look it up.
"""
from __future__ import annotations

import importlib.metadata
import os
import sys

__all__ = ["TESTED", "STOCK", "installed", "tested", "untested", "run_stock", "wrap_once"]

#: minor versions of flwr the internals were tested with (tests/test_flower_warm*.py)
TESTED = ("1.42",)

#: the Flower command each constrfl command stands in for
STOCK = {"constrfl.flower.warm.superexec": "flower-superexec",
         "constrfl.flower.warm.supernode": "flower-supernode",
         "constrfl.flower.warm.superlink": "flower-superlink"}


def installed():
    """The installed flwr's version (from its distribution's metadata)."""
    return importlib.metadata.version("flwr")


def tested(version=None):
    """Whether flwr ``version`` (default: the installed one) is a tested minor version."""
    version = installed() if version is None else str(version)
    return ".".join(version.split(".")[:2]) in TESTED


def untested(command, version=None):
    """``None`` on a tested flwr, else the message saying that ``command`` runs the
    stock one instead."""
    version = installed() if version is None else str(version)
    if tested(version):
        return None
    return (f"constrfl: {command} was tested with flwr {', '.join(TESTED)}.x only and "
            f"flwr {version} is installed: running Flower's own `{STOCK[command]}` "
            f"instead (a new process per message, Flower's own waits).")


def stock_if_untested(command, args):
    """On an untested flwr, :func:`run_stock` with :func:`untested`'s message (it does
    not come back unless ``exec`` is stubbed) and True; on a tested one, False."""
    message = untested(command)
    if message:
        run_stock(command, args, message)
    return bool(message)


def run_stock(command, args, message):
    """Say ``message`` on stderr and become the stock command (``exec``: same PID, so
    whoever started this process can still stop it)."""
    print(message, file=sys.stderr, flush=True)
    os.execvp(STOCK[command], [STOCK[command], *args])


def wrap_once(module, name, make):
    """``module.name`` (a flwr function, looked up there by its callers) replaced by
    ``make(original)`` in this process, once: a second call keeps the first wrapper."""
    original = getattr(module, name)
    if getattr(original, "__wrapped_by_constrfl__", False):
        return
    wrapper = make(original)
    wrapper.__wrapped_by_constrfl__ = True
    wrapper.__wrapped__ = original
    setattr(module, name, wrapper)
