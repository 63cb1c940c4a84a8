"""``DepthLimit``: a JSON-RPC body nested too deep to read is refused before a2a-sdk reads it.

The SDK reads a body with ``json.loads``, which recurses once per level: a message whose
answer nests 100,000 arrays makes it raise ``RecursionError`` (answered as an internal
error naming it, a traceback logged). A body nesting deeper than ``MAX_DEPTH`` arrays and
objects gets a JSON-RPC "invalid request" saying so instead; nothing reaches the executor,
so the question it meant to answer stays open. Shallower bodies pass untouched (the SDK
refuses messages nesting deeper than protobuf reads, with its own "invalid params").

The depth is counted as every server counts it (``hpd_agent.hosting.nests_deeper``: without
recursion, and only for a body holding more brackets than ``MAX_DEPTH``): an ordinary call
costs nothing more.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..hosting import INVALID_REQUEST, nests_deeper

__all__ = ["MAX_DEPTH", "DepthLimit"]

MAX_DEPTH = 100
"""Deepest nesting of arrays and objects a JSON-RPC body may have."""


class DepthLimit:
    """ASGI middleware refusing a POST body that nests deeper than ``MAX_DEPTH``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body"))
        body = b"".join(chunks)
        if nests_deeper(body, MAX_DEPTH):
            error = {
                "code": INVALID_REQUEST,
                "message": f"invalid request: the JSON nests deeper than {MAX_DEPTH} levels",
            }
            response = JSONResponse({"jsonrpc": "2.0", "id": None, "error": error})
            await response(scope, receive, send)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)
