"""``constrfl.flower.simulate``: ``cf.solve``'s call, run through the real Flower apps."""
from __future__ import annotations

import tempfile
from pathlib import Path

from ..parties import reported_multipliers
from ..problem import Problem, ServerSide
from ..settings import BASELINES
from . import codec
from .client import client_app
from .grid import LocalGrid
from .server import TRANSPORT, server_app

__all__ = ["simulate", "local_grid", "KnownServerSide"]

BACKENDS = ("inmemory", "ray")


class KnownServerSide(ServerSide):
    """The server's view of a simulated problem: :class:`ServerSide` (no client
    functions or data) plus what a deployment would tell its server up front — the
    clients' row counts (``rho="samples"``, ``epochs``), their constraint counts and
    which parties are constrained (the baselines' check) — so that ``simulate`` accepts
    and rejects exactly what ``cf.solve`` does."""

    def __init__(self, problem):
        super().__init__(problem.dim, problem.client_names, problem.server,
                         problem.regularizer)
        self._rows, self._samples = problem.client_rows(), problem.client_samples()
        self._constrained = problem.constrained_parties()
        self._parties = problem.parties

    def client_rows(self):
        return list(self._rows)

    def client_samples(self):
        return list(self._samples)

    def constrained_parties(self):
        return list(self._constrained)

    def _known_parties(self):
        return self._parties


def simulate(problem, *args, backend="inmemory", state_dir=None,
             client_timeout=TRANSPORT["client_timeout"],
             resend_after=TRANSPORT["resend_after"], poll_interval=None, faults=None,
             grid=None, **kwargs):
    """Solve ``problem`` as :func:`constrfl.solve` does, but through Flower: the
    ServerApp of :func:`~.server.server_app` and one ClientApp of
    :func:`~.client.client_app` per client, each building its site from its node
    config.  The other arguments are those of :func:`constrfl.solve` (``method``,
    ``tol``, ``w0``, ``seed``, ... and the options, with its defaults).  Returns the same
    :class:`~constrfl.result.SolveResult`: for the same arguments ``w``, the
    multipliers, ``rounds`` and the bytes are those of ``cf.solve``, bit for bit.  (The
    server's result holds only its own multipliers; each site keeps its own, and, as
    each site would tell its user, ``simulate`` reads them from the sites' states.)

    backend : ``"inmemory"`` — a :class:`~.grid.LocalGrid` in this process (every
        message and reply a copy; no Ray, no sockets; Flower's public API only) — or
        ``"ray"`` — Flower's simulation engine (``flwr[simulation]``), ClientApps in
        Ray actors.
    state_dir : the sites' state directory (default: a temporary one, removed after).
    client_timeout, resend_after, poll_interval : as for :func:`~.server.run_server`,
        with its defaults (:data:`~.server.TRANSPORT`) but for the poll: without a
        network, 1 ms in memory and 5 ms on Ray unless given.
    faults, grid : in memory only: a fault hook (see :class:`~.grid.LocalGrid`), or the
        grid itself (built by :func:`local_grid`) to act on between calls.
    resume : a result of an earlier ``simulate`` of the same problem; the sites'
        states come from ``state_dir``, which must be the earlier run's.

    ``method="cproxal"`` is refused (a centralized method: see :func:`run_server`).
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a constrfl.Problem, got {type(problem).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if kwargs.get("resume") is not None and state_dir is None and grid is None:
        raise ValueError("resume needs the sites' states: pass the state_dir (or grid) "
                         "of the simulation that produced the result")
    view = KnownServerSide(problem)
    disclose = kwargs.get("private") is False     # the sites let newton-basis's forms out
    with contextlib_tempdir(state_dir) as sdir:
        kwargs.update(client_timeout=client_timeout, resend_after=resend_after)
        if backend == "inmemory":
            if grid is None:
                grid = local_grid(problem, sdir, faults=faults, disclose=disclose)
            elif faults is not None:
                grid.faults = faults
            results = []
            app = server_app(view, *args, on_result=results.append,
                             poll_interval=poll_interval or 1e-3, **kwargs)
            app(grid, _server_context(grid.run.run_id))
            return _with_site_multipliers(results[0], problem,
                                          getattr(grid, "state_dir", sdir))
        if faults is not None or grid is not None:
            raise ValueError("faults and grid apply to backend='inmemory' only")
        return _with_site_multipliers(
            _simulate_ray(problem, view, args, sdir, disclose,
                          poll_interval=poll_interval or 5e-3, **kwargs), problem, sdir)


def _with_site_multipliers(res, problem, state_dir):
    """``res`` with each site's multipliers as the site reports them to its user: those
    of its last KKT share of the kind the result's point belongs to, read from its
    state file (:mod:`.codec`)."""
    solver = res.state["solver"]
    record = "report" if res.method in BASELINES else solver.reported
    for client in problem.clients:
        snapshot, _ = codec.SiteStore(Path(state_dir) / f"{client.name}.state").load()
        if snapshot is not None:
            res.multipliers[client.name] = reported_multipliers(
                client, snapshot["state"], record, solver.reported_seq)
    return res


def local_grid(problem, state_dir, faults=None, disclose=False):
    """The :class:`~.grid.LocalGrid` of ``problem``: one node per client, node config
    ``{"site": name}``, each running :func:`~.client.client_app` with its state in
    ``state_dir`` (``disclose``: the sites allow ``private=False``)."""
    clients = {c.name: c for c in problem.clients}

    def make_app():
        return client_app(lambda ctx: clients[ctx.node_config["site"]],
                          regularizer=problem.regularizer, state_dir=state_dir,
                          disclose=disclose)
    grid = LocalGrid([({"site": name}, make_app) for name in clients], faults=faults)
    grid.state_dir = state_dir            # where the sites keep their states
    return grid


def _server_context(run_id):
    from flwr.app import Context, RecordDict
    return Context(run_id=run_id, node_id=0, node_config={}, state=RecordDict(),
                   run_config={})


def _simulate_ray(problem, view, args, state_dir, disclose, **kwargs):
    from flwr.simulation import run_simulation
    clients = problem.clients
    results = []
    sapp = server_app(view, *args, on_result=results.append, **kwargs)
    capp = client_app(lambda ctx: clients[int(ctx.node_config["partition-id"])],
                      regularizer=problem.regularizer, state_dir=state_dir,
                      disclose=disclose)
    run_simulation(server_app=sapp, client_app=capp, num_supernodes=len(clients),
                   backend_name="ray",
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"logging_level": "ERROR",
                                                 "log_to_driver": False}})
    if not results:
        raise RuntimeError("the Ray simulation ended without a result (see Flower's log)")
    return results[0]


class contextlib_tempdir:
    """``state_dir`` if given, else a temporary directory removed on exit."""

    def __init__(self, path):
        self.path, self.tmp = path, None

    def __enter__(self):
        if self.path is not None:
            return self.path
        self.tmp = tempfile.TemporaryDirectory(prefix="constrfl-flower-")
        return self.tmp.name

    def __exit__(self, *exc):
        if self.tmp is not None:
            self.tmp.cleanup()
