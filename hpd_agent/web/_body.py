"""Where a request comes from: the Host and Origin rules, and the body rules of POST routes.

- Host (DNS rebinding): a page on ``evil.example`` whose name the attacker points at
  127.0.0.1 reaches the server with ``Host: evil.example:PORT``. Only loopback names
  (``localhost``, 127.0.0.0/8, ``::1``) and the configured names are served; any other Host
  gets 421. With a token and no configured names every Host is served: the server is then
  reachable by names it cannot know, and the token (which a foreign page cannot send) guards it.
- Origin (cross-site requests): a browser names the page that sent a request in ``Origin``;
  only the server's own origin (the Host it was reached by) and configured origins pass, any
  other (``null`` included) gets 403. Clients that are not browsers send no Origin.
- POST bodies must be ``Content-Type: application/json`` (415 otherwise: a ``text/plain``
  form post needs no CORS preflight), at most ``MAX_BODY`` bytes (413) and nest at most
  ``MAX_DEPTH`` arrays/objects deep (400).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, cast
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..hosting import is_loopback

__all__ = ["MAX_BODY", "MAX_DEPTH", "BodyError", "HostOriginGuard", "is_loopback", "parse_body"]

MAX_BODY = 1 << 20
"""Largest request body accepted (bytes); more gets 413."""

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in a JSON body; deeper gets 400."""

_SHOWN = 80
"""Characters of a refused Host or Origin quoted in the error."""


def _hostname(netloc: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8000`` -> ``::1``), lowercased."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")] if "]" in netloc else netloc
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def _quote(value: str) -> str:
    shown = value[:_SHOWN] + ("..." if len(value) > _SHOWN else "")
    return json.dumps(shown)


class HostOriginGuard:
    """ASGI middleware refusing foreign Hosts (421) and foreign Origins (403)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: Iterable[str] | None,
        origins: Iterable[str] = (),
        token: bool = False,
    ) -> None:
        self.app = app
        self.hosts = None if hosts is None else {_hostname(h) for h in hosts}
        self.any_host = self.hosts is None and token
        self.origins = {o.rstrip("/").lower() for o in origins}

    def host_refusal(self, host: str) -> str | None:
        name = _hostname(host)
        if self.any_host or is_loopback(name) or (self.hosts and name in self.hosts):
            return None
        return (
            f"Host {_quote(host)} is not served here (DNS rebinding guard): use a loopback "
            "address or a name given with --allow-host"
        )

    def origin_refusal(self, origin: str | None, host: str) -> str | None:
        if origin is None:
            return None  # not sent by a browser page
        parts = urlsplit(origin.strip().lower())
        if parts.scheme in ("http", "https") and parts.netloc == host.strip().lower():
            return None  # the server's own page
        if origin.strip().rstrip("/").lower() in self.origins:
            return None
        return (
            f"Origin {_quote(origin)} may not call this server (cross-site guard): only its own "
            "page and origins given with --allow-origin"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        refusal = self.host_refusal(host)
        status = 421
        if refusal is None:
            refusal, status = self.origin_refusal(headers.get("origin"), host), 403
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await JSONResponse({"error": refusal}, status_code=status)(scope, receive, send)


class BodyError(Exception):
    """A refused body: ``status`` (400, 413, 415) and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests arrays/objects deeper than ``MAX_DEPTH`` (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                return True
            container = cast(dict[str, Any] | list[Any], item)
            children = container.values() if isinstance(container, dict) else container
            stack.extend((child, depth + 1) for child in children)
    return False


def check_content_type(content_type: str | None) -> None:
    """Raise 415 unless the media type is ``application/json``."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise BodyError(415, "Content-Type must be application/json")


def parse_body(body: bytes) -> Any:
    """The JSON value of a body already within ``MAX_BODY``.

    Raises:
        BodyError: 400, not JSON or nested deeper than ``MAX_DEPTH``.
    """
    try:
        value = json.loads(body)
    except RecursionError:
        raise BodyError(400, f"body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        raise BodyError(400, "body is not JSON") from None
    if _too_deep(value):
        raise BodyError(400, f"body nests deeper than {MAX_DEPTH} levels")
    return value
