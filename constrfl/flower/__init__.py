"""constrfl on Flower (extra ``flower``): the only part of constrfl that imports ``flwr``.

* :func:`client_app` — a ClientApp serving one site, built by the user's function from
  the site's own data (located by the SuperNode's ``--node-config``), its state kept in
  ``context.state`` and in a site-local file;
* :func:`server_app` / :func:`run_server` — a ServerApp solving over the Grid with any
  method of :func:`constrfl.solve` but ``cproxal``, writing the result to a directory;
* :func:`simulate` — ``cf.solve``'s call through the real apps, on an in-memory Grid
  (:class:`LocalGrid`) or Flower's Ray simulation;
* :class:`FlowerFederation` — the :class:`~constrfl.federation.Federation` over a Grid.

See docs/flower.md.
"""
try:
    import flwr  # noqa: F401
except ModuleNotFoundError as err:  # pragma: no cover - depends on the environment
    # a ModuleNotFoundError (as flwr's own), so that pytest.importorskip skips on it
    raise ModuleNotFoundError("constrfl.flower needs Flower: pip install 'constrfl[flower]'",
                              name="flwr") from err

from .client import client_app
from .codec import flower_type
from .grid import LocalGrid
from .server import FlowerFederation, run_server, server_app
from .simulate import KnownServerSide, local_grid, simulate

__all__ = ["client_app", "server_app", "run_server", "simulate", "local_grid",
           "FlowerFederation", "LocalGrid", "KnownServerSide", "flower_type"]
