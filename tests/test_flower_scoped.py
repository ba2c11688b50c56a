"""The SuperLink's API-specific middlewares on their API only (constrfl.flower.warm.scoped):
each of flwr 1.42's middlewares named in SCOPES hands any request outside its API on
unchanged (the premise), and the SuperLink app built with them scoped answers requests
of every API exactly as the stock one (status, headers, body)."""
import asyncio
import warnings

import pytest

pytest.importorskip("flwr")

from flwr.proto import fleet_pb2, node_pb2  # noqa: E402
from flwr.superlink import main as link_main  # noqa: E402

from constrfl.flower.warm import scoped, superlink, waits  # noqa: E402


def http(path, method="POST"):
    return {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
            "query_string": b"", "headers": [(b"content-type", b"application/protobuf")],
            "scheme": "http", "server": ("127.0.0.1", 9093), "client": ("127.0.0.1", 5000),
            "root_path": "", "http_version": "1.1", "asgi": {"version": "3.0"},
            "state": {}}


def call(app, scope, body=b""):
    """Run one request through the ASGI ``app``; the status and body it answers."""
    sent, received = [], [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        return received.pop(0) if received else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


class Inner:
    """The next layer: answers 200 ``inner`` and notes the scopes it was called with."""

    def __init__(self):
        self.scopes = []

    async def __call__(self, scope, receive, send):
        self.scopes.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"inner"})


class Noting:
    """A middleware that notes the requests it sees, then calls the next layer."""
    seen = []

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        Noting.seen.append(scope["path"])
        await self.app(scope, receive, send)


def test_scoped_calls_its_middleware_for_its_prefix_only():
    Noting.seen = []
    inner = Inner()
    app = scoped.Scoped(inner, Noting, "/v1/fleet/")
    for path in ("/v1/fleet/pull-messages", "/v1/runtime/pull-messages", "/v1/fleetx",
                 "/v1/control/list-runs", "/v1/fleet/push-object"):
        assert call(app, http(path)) == (200, b"inner")
    assert Noting.seen == ["/v1/fleet/pull-messages", "/v1/fleet/push-object"]
    assert [s["path"] for s in inner.scopes][-1] == "/v1/fleet/push-object"
    assert len(inner.scopes) == 5


def stock_middleware():
    return getattr(link_main._get_middleware, "__wrapped__", link_main._get_middleware)()


def test_every_scoped_middleware_is_flwrs_and_hands_other_apis_on_unchanged():
    classes = {(m.cls.__module__, m.cls.__qualname__): m.cls for m in stock_middleware()}
    assert set(scoped.SCOPES) <= set(classes)
    for key, prefix in scoped.SCOPES.items():
        for other in ("/v1/runtime/pull-messages", "/v1/control/list-runs",
                      "/v1/fleet/pull-messages"):
            if other.startswith(prefix):
                continue
            inner = Inner()
            scope = http(other)
            assert call(classes[key](inner), scope) == (200, b"inner"), key
            assert [s["path"] for s in inner.scopes] == [other], key


def answers(app):
    """Status, headers and body of the SuperLink app's answers to requests of each API
    (run through its lifespan)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # starlette's TestClient on httpx
        from starlette.testclient import TestClient
    pull = fleet_pb2.PullMessagesRequest(node=node_pb2.Node(node_id=5)).SerializeToString()
    requests = [("/v1/fleet/pull-messages", pull),            # NodeAuth: 401
                ("/v1/fleet/pull-messages", b"junk"),         # translation: 400
                ("/v1/control/get-login-details", b""),       # no-cache headers
                ("/v1/control/stop-run", b""),                # a Control error: 404
                ("/v1/runtime/pull-messages", b""),           # no task token: 401
                ("/v1/runtime/pull-messages", b"\x01\x02"),   # 400
                ("/nowhere", b"")]
    out = []
    with TestClient(app) as client:
        for path, body in requests:
            r = client.post(path, content=body, headers={"content-type": "application/protobuf"})
            out.append((path, r.status_code, sorted(r.headers.items()), r.content))
    return out


def test_the_superlink_answers_every_api_as_flwrs(monkeypatch):
    monkeypatch.setattr(link_main, "_get_middleware", link_main._get_middleware)
    stock = link_main.create_app()
    assert scoped.scope_superlink_middleware()
    assert scoped.scope_superlink_middleware()           # (once: no second layer)
    app = link_main.create_app()
    layers = [(m.cls, m.args) for m in app.user_middleware]
    assert [cls if cls is not scoped.Scoped else args[0] for cls, args in layers] == [
        m.cls for m in stock.user_middleware]
    assert sum(cls is scoped.Scoped for cls, _ in layers) == len(scoped.SCOPES)
    expected = answers(stock)
    assert [a[1] for a in expected] == [401, 400, 200, 404, 401, 400, 404]
    assert ("cache-control", "no-store") in expected[2][2]
    assert answers(app) == expected


def test_the_superlink_command_scopes_them_unless_told_all_middleware(monkeypatch):
    monkeypatch.setattr(link_main, "_get_middleware", link_main._get_middleware)
    started = []
    monkeypatch.setattr(waits, "run_as_flower", lambda *args: started.append(args[-1]))
    superlink.main(["--hold", "0", "--all-middleware", "--insecure"])
    assert not hasattr(link_main._get_middleware, "__wrapped__")
    superlink.main(["--hold", "0", "--insecure"])
    assert any(m.cls is scoped.Scoped for m in link_main._get_middleware())
    assert started == ["SuperLink holds asks for messages and replies up to 0 s",
                       "SuperLink holds asks for messages and replies up to 0 s; "
                       "API middlewares on their API"]
