"""Who may reach a server: the one guard every server we ship (web, A2A, MCP over HTTP) puts
in front of all its routes, a plain ASGI middleware (no web framework).

Checked in this order, the first refusal answering ``{"error": ...}``:

- Host (DNS rebinding: a page on ``evil.example`` whose name its owner points at 127.0.0.1
  reaches the server with ``Host: evil.example``). Only loopback names (``localhost``,
  127.0.0.0/8, ``::1``) and the configured names are served, the port not compared; any other
  Host gets 421. With a token and no configured names every Host is served: such a server is
  reached by names it cannot know, and the token (which a foreign page cannot send) guards it.
- Origin (cross-site requests): a browser names the page that sent a request in ``Origin``;
  only the server's own origin (the Host it was reached by) and configured origins pass, any
  other (``null`` included) gets 403. Clients that are not browsers send no Origin.
- The bearer token (401 with ``WWW-Authenticate: Bearer``), except on the server's public
  paths. Tokens are named; the name of the one a request carried is put in its scope under
  ``IDENTITY``.
- A body-carrying method (POST, PUT, PATCH) must send ``Content-Type: application/json``
  (415: a ``text/plain`` post is what any page can send without a CORS preflight) and at most
  ``max_body`` bytes (413), counted as the body arrives (a chunked body too), all of it read
  before the app runs.

How deep a JSON body nests is each server's rule past the guard (its own limit and its own
way of saying no: a 400, a JSON-RPC error), counted one way: ``nests_deeper``.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from itertools import accumulate
from typing import Any
from urllib.parse import urlsplit

from .._values.urls import is_loopback  # shared with the action questions' URL rule
from ..exceptions import UserError
from ..text import bounded

__all__ = [
    "DEFAULT_MAX_BODY",
    "IDENTITY",
    "LOCAL",
    "TOKEN",
    "Guard",
    "client_name",
    "identity_of",
    "is_loopback",
    "nests_deeper",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

IDENTITY = "hpd_agent.identity"
"""The scope key naming who a request came as: a token's name, ``LOCAL`` on a server without
tokens, None on a public path reached without a token."""

LOCAL = "local"
"""The identity of every request to a server without tokens (reachable only from this machine
or through a configured name)."""

TOKEN = "token"
"""The name of a server's single token (``--token SECRET``)."""


def identity_of(scope: Mapping[str, Any]) -> str:
    """Who a request past the guard came as: the name of the token it carried, ``LOCAL``
    on a server without tokens (an answer's ``answered_by`` on the web and the inbox)."""
    return scope.get(IDENTITY) or LOCAL


MAX_CLIENT_NAME = 200
"""The longest client name kept with each answer it gives (the client chooses it)."""


def client_name(value: object, default: str) -> str:
    """Who a protocol client says it is (MCP's and ACP's ``clientInfo.name``), as an answer
    records it: a non-blank string cut to ``MAX_CLIENT_NAME`` characters (lone surrogates
    spelled out), else ``default``. The other side chooses it: a megabyte of name is not
    written into every record it answers."""
    if not isinstance(value, str) or not value.strip():
        return default
    return bounded(value, MAX_CLIENT_NAME)


DEFAULT_MAX_BODY = 4 << 20
"""Largest request body a server accepts unless told otherwise (bytes; the MCP SDK's own)."""

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_SHOWN = 80
"""Characters of a refused Host or Origin quoted in the error."""
_KNOWN_HOSTS = 64
"""How many ``Host`` values a guard remembers its verdict on (a client sends the same one
on every request; a client sending new ones each time only empties the memory)."""


def nests_deeper(body: bytes, limit: int) -> bool:
    """Whether the arrays and objects of the JSON text ``body`` nest deeper than ``limit``
    (brackets inside strings do not count; text that is not JSON gets some answer, the
    parser then says why). Counted without recursion, and only for a body holding more
    brackets than ``limit`` (counting them is one pass in C): an ordinary body costs
    nothing more, a deep one never reaches a recursive parser."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False  # too few brackets to nest too deep
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", body))
    steps = (1 if b in b"[{" else -1 for b in brackets)
    return max(accumulate(steps, initial=0)) > limit


def _hostname(netloc: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8000`` -> ``::1``), lowercased."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")] if "]" in netloc else netloc
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def _quote(value: str) -> str:
    shown = value[:_SHOWN] + ("..." if len(value) > _SHOWN else "")
    return json.dumps(shown)


def _secrets(tokens: str | Mapping[str, str] | None) -> dict[str, bytes]:
    """Each token's name and the ``Authorization`` value that carries it."""
    named = {TOKEN: tokens} if isinstance(tokens, str) else dict(tokens or {})
    for name, secret in named.items():
        if not name or not secret:
            raise UserError("a server's token and its name must not be empty")
    return {name: f"Bearer {secret}".encode() for name, secret in named.items()}


class Guard:
    """ASGI middleware applying the Host, Origin, token and body rules to every HTTP request
    (other scopes, the lifespan among them, pass untouched).

    Args:
        app: The app guarded.
        tokens: A bearer token (named ``TOKEN``), or several by name; None: no token is
            asked for and every request comes as ``LOCAL``.
        hosts: Host names served besides the loopback ones; None: only those without a
            token, any name with one.
        origins: Browser origins (``https://app.example``) served besides the server's own.
        public: Whether a path is served without a token (an agent card, a web page).
        max_body: Largest body accepted, in bytes.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: str | Mapping[str, str] | None = None,
        hosts: Iterable[str] | None = None,
        origins: Iterable[str] = (),
        public: Callable[[str], bool] | None = None,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        self.app = app
        self.tokens = _secrets(tokens)
        self.hosts = None if hosts is None else {_hostname(h) for h in hosts}
        self.any_host = self.hosts is None and bool(self.tokens)
        self.origins = {o.strip().rstrip("/").lower() for o in origins}
        self.public = public
        self.max_body = max_body
        self._verdicts: dict[bytes, str | None] = {}
        """``host_refusal`` of each ``Host`` header seen last (no name parsing per request)."""

    def host_refusal(self, host: str) -> str | None:
        """Why a request reaching the server as ``host`` is refused (421), or None."""
        name = _hostname(host)
        if self.any_host or is_loopback(name) or (self.hosts and name in self.hosts):
            return None
        return (
            f"Host {_quote(host)} is not served here (DNS rebinding guard): use a loopback "
            "address or a host name the server allows"
        )

    def origin_refusal(self, origin: str | None, host: str) -> str | None:
        """Why a request from ``origin`` reaching the server as ``host`` is refused (403)."""
        if origin is None:
            return None  # not sent by a browser page
        parts = urlsplit(origin.strip().lower())
        if parts.scheme in ("http", "https") and parts.netloc == host.strip().lower():
            return None  # the server's own page
        if origin.strip().rstrip("/").lower() in self.origins:
            return None
        return (
            f"Origin {_quote(origin)} may not call this server (cross-site guard): only its own "
            "page and the origins it allows"
        )

    def _remember(self, raw_host: bytes, refusal: str | None) -> str | None:
        verdicts = self._verdicts
        if len(verdicts) >= _KNOWN_HOSTS:
            verdicts.clear()
        verdicts[raw_host] = refusal
        return refusal

    def identity(self, authorization: bytes | None) -> str | None:
        """The name of the token ``authorization`` carries (every token compared, in
        constant time), ``LOCAL`` on a server without tokens, else None."""
        if not self.tokens:
            return LOCAL
        given = authorization or b""
        found = None
        for name, expected in self.tokens.items():
            if secrets.compare_digest(given, expected) and found is None:
                found = name
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        raw_host = headers.get(b"host", b"")
        host = raw_host.decode("latin-1")
        origin = headers.get(b"origin")
        verdicts = self._verdicts
        if raw_host in verdicts:
            refusal = verdicts[raw_host]
        else:
            refusal = self._remember(raw_host, self.host_refusal(host))
        if refusal is not None:
            await _refuse(send, 421, refusal)
            return
        refusal = self.origin_refusal(None if origin is None else origin.decode("latin-1"), host)
        if refusal is not None:
            await _refuse(send, 403, refusal)
            return
        name = self.identity(headers.get(b"authorization"))
        if name is None and not (self.public is not None and self.public(scope["path"])):
            await _refuse(send, 401, "missing or wrong bearer token")
            return
        scope[IDENTITY] = name
        if scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        await self._with_body(scope, receive, send, headers)

    async def _with_body(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]
    ) -> None:
        """The app called once the whole body is in: JSON, within ``max_body``."""
        media = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
        if media != b"application/json":
            await _refuse(send, 415, "Content-Type must be application/json")
            return
        declared = headers.get(b"content-length", b"")
        too_big = f"body over {self.max_body} bytes"
        if declared.isdigit() and int(declared) > self.max_body:
            await _refuse(send, 413, too_big)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left: nobody to answer
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
            if len(body) > self.max_body:
                await _refuse(send, 413, too_big)
                return
        await self.app(scope, _replay(bytes(body), receive), send)


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers by lowercased name, the first of a repeated one."""
    found: dict[bytes, bytes] = {}
    for name, value in scope.get("headers") or ():
        found.setdefault(bytes(name).lower(), bytes(value))
    return found


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` giving ``body`` whole, then what the client sends next (its leaving)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
