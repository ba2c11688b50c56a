"""The SuperLink's API-specific middlewares on their own API only (flwr 1.42).

Every request to flwr 1.42's SuperLink passes the eight starlette middlewares of
``flwr.superlink.main._get_middleware``.  Six of them act on one API only and hand any
other request on unchanged (``return await call_next(request)`` when the path is not
theirs): the Control API's no-cache headers, authentication, license check and event
log (paths ``/v1/control/``), the Fleet API's SuperNode authentication and event log
(``/v1/fleet/``).  Handing on is not free: each is a ``BaseHTTPMiddleware``, which for
every request starts a task group, a memory stream and a streamed response around the
rest of the stack.  A deployed round is ~80 SuperLink requests (pushes, pulls and
object transfers of the ServerApp and the SuperNodes), so these pass-throughs were a
third of the SuperLink's CPU.

:func:`scope_superlink_middleware` keeps the same middlewares in the same order, each
wrapped in :class:`Scoped`, which calls it for the requests of its API and the next
layer directly for the others: for every request the same middleware code runs as
before, minus the layers that would only have handed it on.
"""
from __future__ import annotations

from . import pinned

__all__ = ["Scoped", "SCOPES", "scope_superlink_middleware"]

#: the path prefix of the API each of flwr 1.42's API-specific SuperLink middlewares
#: acts on (module, class name): every other request it hands on unchanged
SCOPES = {
    ("flwr.superlink.routers.control.middlewares", "ControlSensitiveResponseMiddleware"):
        "/v1/control/",
    ("flwr.superlink.routers.control.middlewares", "ControlAuthenticationMiddleware"):
        "/v1/control/",
    ("flwr.superlink.routers.control.middlewares", "ControlLicenseMiddleware"):
        "/v1/control/",
    ("flwr.superlink.routers.control.middlewares", "ControlEventLogMiddleware"):
        "/v1/control/",
    ("flwr.superlink.routers.fleet.node_auth", "NodeAuthMiddleware"): "/v1/fleet/",
    ("flwr.superlink.routers.fleet.middlewares", "FleetEventLogMiddleware"): "/v1/fleet/",
}


class Scoped:
    """ASGI middleware: ``middleware(app)`` for the HTTP requests whose path starts with
    ``prefix``, ``app`` itself for any other request.  (Starlette's ``request.url.path``,
    which the middlewares test, is the ASGI ``path`` up to a ``?`` or ``#``: the same
    answer to "starts with ``prefix``".)"""

    def __init__(self, app, middleware, prefix):
        self.app, self.middleware, self.prefix = app, middleware(app), prefix

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith(self.prefix):
            await self.middleware(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def _scope_of(middleware):
    """The path prefix :data:`SCOPES` gives a middleware built without options."""
    if middleware.args or middleware.kwargs:
        return None
    return SCOPES.get((middleware.cls.__module__, middleware.cls.__qualname__))


def scope_superlink_middleware():
    """In this process, build the SuperLink's FastAPI app with each middleware of
    :data:`SCOPES` :class:`Scoped` to its API (``flwr.superlink.main._get_middleware``,
    which ``create_app`` calls, wrapped).  False on an untested flwr (nothing changed)."""
    if not pinned.tested():
        return False
    from starlette.middleware import Middleware
    from flwr.superlink import main as module

    def make(stock):
        def get_middleware():
            layers = []
            for middleware in stock():
                prefix = _scope_of(middleware)
                layers.append(middleware if prefix is None
                              else Middleware(Scoped, middleware.cls, prefix))
            return layers
        return get_middleware

    pinned.wrap_once(module, "_get_middleware", make)
    return True
