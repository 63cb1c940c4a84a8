"""``hpd_agent.hosting.Guard`` on its own, driven as an ASGI server drives it: the Host,
Origin, token and body rules, their order, and that a refused request never reaches the app."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from hpd_agent.exceptions import UserError
from hpd_agent.hosting import IDENTITY, LOCAL, TOKEN, Guard

pytestmark = pytest.mark.anyio

JSON = {"content-type": "application/json"}


@dataclass
class App:
    """The guarded app: what it was called with, and the body it read."""

    scopes: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    bodies: list[bytes] = field(default_factory=list[bytes])
    after: list[str] = field(default_factory=list[str])

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scopes.append(dict(scope))
        if scope["type"] != "http":
            return
        body = b""
        if scope["method"] == "POST":
            message = await receive()
            body = message["body"]
            assert message["more_body"] is False
            self.after.append((await receive())["type"])  # then the client's leaving
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


@dataclass
class Answer:
    status: int
    headers: dict[bytes, bytes]
    body: bytes
    read: int
    """How many ``receive`` calls the guard and the app made."""

    def error(self) -> str:
        return json.loads(self.body)["error"]


async def call(
    guard: Guard,
    *,
    method: str = "GET",
    path: str = "/x",
    headers: Mapping[str, str] | None = None,
    chunks: Sequence[bytes] = (),
) -> Answer:
    """One request through ``guard``: ``headers`` (a loopback Host unless given), the body
    in ``chunks`` (``more_body`` on all but the last), then the client's leaving."""
    given = {"host": "127.0.0.1:8000", **{k.lower(): v for k, v in (headers or {}).items()}}
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.encode(), v.encode()) for k, v in given.items()],
    }
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    messages.append({"type": "http.disconnect"})
    read = 0

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return messages[min(read - 1, len(messages) - 1)]

    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    await guard(scope, receive, send)
    if not sent:
        return Answer(0, {}, b"", read)
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    return Answer(start["status"], dict(start["headers"]), body, read)


@pytest.mark.parametrize(
    ("host", "served"),
    [
        ("127.0.0.1:8000", True),
        ("127.0.0.2:8000", True),
        ("127.255.0.9", True),
        ("LOCALHOST:8000", True),
        ("localhost", True),
        ("[::1]:8000", True),
        ("agent.internal:8000", True),
        ("evil.example:8000", False),
        ("127.0.0.1.evil.example:8000", False),
        ("localhost.evil.example", False),
        ("[::2]:8000", False),
        ("10.0.0.1:8000", False),
        ("", False),
    ],
)
def test_the_host_rule(host: str, served: bool) -> None:
    app = App()
    assert (Guard(app, hosts=["agent.internal"]).host_refusal(host) is None) is served
    # Without configured names: a token serves any Host, no token only the loopback ones.
    assert Guard(app, tokens="t").host_refusal(host) is None
    loopback_only = Guard(app).host_refusal(host) is None
    assert loopback_only is (served and "internal" not in host)
    # Configured names bind with a token too.
    assert (Guard(app, tokens="t", hosts=["agent.internal"]).host_refusal(host) is None) is served


async def test_each_host_is_judged_once_and_its_verdict_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client sends the same Host on every request: its name is parsed (``ipaddress``)
    once, and a later request gets the same verdict, a refusal too; a memory full of Hosts
    is emptied, not grown, and judges the same."""
    from hpd_agent.hosting import _guard

    judged: list[str] = []
    real = _guard.is_loopback

    def counted(host: str) -> bool:
        judged.append(host)
        return real(host)

    monkeypatch.setattr(_guard, "is_loopback", counted)
    app = App()
    guard = Guard(app)
    for _ in range(3):
        assert (await call(guard)).status == 200
        assert (await call(guard, headers={"host": "evil.example"})).status == 421
    assert judged == ["127.0.0.1", "evil.example"]
    for i in range(200):  # new Hosts each time: judged each, the memory stays bounded
        assert (await call(guard, headers={"host": f"127.0.0.{i % 250}:{i}"})).status == 200
        assert (await call(guard, headers={"host": f"evil{i}.example"})).status == 421
    assert len(guard._verdicts) <= 64  # pyright: ignore[reportPrivateUsage]
    assert (await call(guard, headers={"host": "evil.example"})).status == 421
    assert len(app.scopes) == 3 + 200


@pytest.mark.parametrize(
    ("origin", "served"),
    [
        (None, True),  # not a browser
        ("http://127.0.0.2:8000", True),  # the server's own page
        ("HTTP://127.0.0.2:8000", True),
        ("https://127.0.0.2:8000", True),
        ("https://app.example", True),  # configured
        ("https://APP.example/", True),
        ("http://127.0.0.2:8001", False),  # another port is another origin
        ("http://evil.example", False),
        ("null", False),
        ("file://", False),
        ("", False),
    ],
)
def test_the_origin_rule(origin: str | None, served: bool) -> None:
    guard = Guard(App(), origins=["https://app.example"])
    assert (guard.origin_refusal(origin, "127.0.0.2:8000") is None) is served


async def test_the_rules_apply_in_order_and_a_refused_request_never_reaches_the_app() -> None:
    app = App()
    guard = Guard(app, tokens="s3cret")
    bad = {
        "Host": "evil.example",
        "Origin": "http://other.example",
        "Content-Type": "text/plain",
    }
    body = [b'{"run": true}']
    first = await call(guard, method="POST", headers=bad, chunks=body)
    # With a token any Host is served: the Origin is the first refusal.
    assert first.status == 403 and "cross-site" in first.error()
    bad.pop("Origin")
    second = await call(guard, method="POST", headers=bad, chunks=body)
    assert second.status == 401 and second.headers[b"www-authenticate"] == b"Bearer"
    bad["Authorization"] = "Bearer s3cret"
    third = await call(guard, method="POST", headers=bad, chunks=body)
    assert third.status == 415
    assert third.error() == "Content-Type must be application/json"
    assert [first.read, second.read, third.read] == [0, 0, 0]  # no body read for a refusal
    assert app.scopes == []
    bad["Content-Type"] = "application/json; charset=utf-8"
    ok = await call(guard, method="POST", headers=bad, chunks=body)
    assert ok.status == 200 and app.bodies == [b'{"run": true}']
    assert app.after == ["http.disconnect"]  # after the replayed body, the client's own
    refused = await call(Guard(app), headers={"Host": "evil.example:1"})
    assert refused.status == 421 and "DNS rebinding" in refused.error()
    assert len(app.scopes) == 1


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", "", "x/json"])
@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH"])
async def test_a_body_must_be_json(kind: str, method: str) -> None:
    app = App()
    answer = await call(Guard(app), method=method, headers={"Content-Type": kind}, chunks=[b"{}"])
    assert answer.status == 415 and app.scopes == []


async def test_methods_without_a_body_pass_untouched() -> None:
    app = App()
    for method in ("GET", "DELETE", "HEAD", "OPTIONS"):
        answer = await call(Guard(app), method=method, headers={"Content-Type": "text/plain"})
        assert answer.status == 200 and answer.read == 0
    assert [s["method"] for s in app.scopes] == ["GET", "DELETE", "HEAD", "OPTIONS"]


async def test_a_body_over_the_limit_is_refused_declared_or_chunked() -> None:
    app = App()
    guard = Guard(app, max_body=10)
    declared = await call(
        guard, method="POST", headers={**JSON, "Content-Length": "11"}, chunks=[b"x" * 11]
    )
    assert declared.status == 413 and declared.read == 0
    assert declared.error() == "body over 10 bytes"
    # No Content-Length (chunked): counted as it arrives, refused at the chunk that passes.
    chunked = await call(guard, method="POST", headers=JSON, chunks=[b"x" * 6] * 5)
    assert chunked.status == 413 and chunked.read == 2
    assert app.scopes == []
    at_limit = await call(guard, method="POST", headers=JSON, chunks=[b"12345", b"", b"67890"])
    assert at_limit.status == 200 and app.bodies == [b"1234567890"]


async def test_a_client_leaving_mid_body_is_not_answered() -> None:
    gone = App()
    guard = Guard(gone)
    headers = [(b"host", b"localhost"), (b"content-type", b"application/json")]
    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    messages = iter(
        [{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}]
    )
    sent: list[Any] = []

    async def receive() -> Any:
        return next(messages)

    async def send(message: Any) -> None:
        sent.append(message)

    await guard(scope, receive, send)
    assert sent == [] and gone.scopes == []


async def test_named_tokens_put_who_called_in_the_scope() -> None:
    app = App()
    guard = Guard(
        app, tokens={"alice": "a-secret", "bob": "b-secret"}, public=lambda p: p == "/card"
    )
    for given, status in [("Bearer b-secret", 200), ("Bearer a-secret", 200), ("Bearer x", 401)]:
        answer = await call(guard, headers={"Authorization": given})
        assert answer.status == status
    assert await call(guard, headers={"Authorization": "b-secret"}) == Answer(
        401,
        {
            b"content-type": b"application/json",
            b"content-length": b"42",
            b"www-authenticate": b"Bearer",
        },
        b'{"error": "missing or wrong bearer token"}',
        0,
    )
    assert (await call(guard, path="/card")).status == 200  # public
    card = await call(guard, path="/card", headers={"Authorization": "Bearer a-secret"})
    assert card.status == 200
    assert [s[IDENTITY] for s in app.scopes] == ["bob", "alice", None, "alice"]
    await call(Guard(app, tokens="t"), headers={"Authorization": "Bearer t"})
    await call(Guard(app))
    assert [s[IDENTITY] for s in app.scopes[-2:]] == [TOKEN, LOCAL]


async def test_other_scopes_pass() -> None:
    app = App()
    guard = Guard(app, tokens="t")

    async def receive() -> Any:
        return {"type": "lifespan.startup"}

    async def send(message: Any) -> None:
        raise AssertionError(message)

    await guard({"type": "lifespan"}, receive, send)
    assert app.scopes == [{"type": "lifespan"}]


async def test_a_refused_value_is_quoted_bounded() -> None:
    guard = Guard(App())
    host = await call(guard, headers={"Host": "evil" * 10_000})
    origin = await call(guard, headers={"Origin": "https://" + "e" * 10_000})
    for answer in (host, origin):
        assert len(answer.body) < 400 and '..."' in answer.error()


@pytest.mark.parametrize("tokens", ["", {"": "x"}, {"alice": ""}])
def test_an_empty_token_or_name_is_refused(tokens: Any) -> None:
    with pytest.raises(UserError, match="must not be empty"):
        Guard(App(), tokens=tokens)


def test_a_json_body_depth_is_counted_one_way() -> None:
    """``nests_deeper``: what the web and A2A servers count against their own limits."""
    from hpd_agent.hosting import nests_deeper

    assert not nests_deeper(b"[" * 3 + b"]" * 3, 3)
    assert nests_deeper(b"[" * 4 + b"]" * 4, 3)
    assert nests_deeper(b'{"a": [[[[1]]]]}', 4)
    # Brackets inside strings (escaped quotes too) are text, not nesting.
    assert not nests_deeper(b'["[[[[[", "\\"[[[[[", {"k": "{{{{{"}]', 2)
    assert not nests_deeper(b"[" * 1_000_000, 1_000_000)  # too few brackets: not even counted
    assert nests_deeper(b"[" * 1_000_000, 100)  # counted without recursion
