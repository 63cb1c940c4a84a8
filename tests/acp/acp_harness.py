"""The official Python SDK's client (``acp.ClientSideConnection``) against the ACP server in
this process (``hpd_agent.acp._server.serve_streams``), over a socket pair.

``Editor`` is the SDK ``Client``: it records every message on the wire in order (the SDK's
stream observer), each session's updates, and answers permissions and elicitations with the
test's callbacks (which may wait: the questions of parallel branches are outstanding
together).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from acp import connect_to_agent
from acp.client.connection import ClientSideConnection
from acp.connection import StreamEvent
from acp.schema import (
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    Implementation,
    RequestPermissionResponse,
)
from anyio.abc import SocketStream

from hpd_agent import Agent
from hpd_agent.acp._server import serve_streams
from hpd_agent.store import Store

Answer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


async def _cancelled_outcome(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "cancelled"}}


class Editor:
    """The SDK client's side: records the wire, answers with the test's callbacks."""

    def __init__(self, *, permission: Answer | None = None, form: Answer | None = None) -> None:
        self.permission = permission or _cancelled_outcome
        self.form = form
        self.wire: list[tuple[str, dict[str, Any]]] = []
        self._grew = anyio.Event()

    # -- the SDK's Client protocol ------------------------------------------------------------
    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        params = {
            "sessionId": session_id,
            "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True),
            "options": [o.model_dump(by_alias=True, exclude_none=True) for o in options],
        }
        return RequestPermissionResponse.model_validate(await self.permission(params))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None  # read from the wire log, in order

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        assert self.form is not None, "elicitation/create sent to a client without forms"
        params = {"message": message, **mode.model_dump(by_alias=True, exclude_none=True)}
        return await self.form(params)

    # -- what the server sent -----------------------------------------------------------------
    def observe(self, event: StreamEvent) -> None:
        self.wire.append((event.direction.value, event.message))
        self._grew.set()
        self._grew = anyio.Event()

    async def wait_for(self, method: str, count: int = 1) -> list[dict[str, Any]]:
        """Wait until the server has sent ``count`` messages of ``method``."""
        while len(found := self.received(method)) < count:
            await self._grew.wait()
        return found

    def response_index(self, request_id: int) -> int:
        """Where the response to our request ``request_id`` is on the wire."""
        return next(
            i
            for i, (d, m) in enumerate(self.wire)
            if d == "incoming" and m.get("id") == request_id and "method" not in m
        )

    def received(self, method: str | None = None) -> list[dict[str, Any]]:
        """Messages the server sent (requests and notifications; ``method`` only)."""
        return [
            m
            for d, m in self.wire
            if d == "incoming" and "method" in m and (method is None or m["method"] == method)
        ]

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        """The session's updates in order."""
        return [
            m["params"]["update"]
            for m in self.received("session/update")
            if m["params"]["sessionId"] == session_id
        ]

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u["content"]["text"] for u in self.updates(session_id) if u["sessionUpdate"] == kind
        )


def capabilities(forms: bool) -> ClientCapabilities:
    elicitation = ElicitationCapabilities(form=ElicitationFormCapabilities()) if forms else None
    return ClientCapabilities(elicitation=elicitation)


@asynccontextmanager
async def connected(
    agent: Agent,
    editor: Editor,
    *,
    store: Store | str | None = None,
    forms: bool = True,
    name: str | None = None,
) -> AsyncIterator[ClientSideConnection]:
    """The SDK's client connected to ``agent`` served in this process, initialized (with
    ``clientInfo.name`` = ``name`` when given)."""
    ours, theirs = socket.socketpair()
    stream = await SocketStream.from_socket(ours)
    reader, writer = await asyncio.open_connection(sock=theirs)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_streams(agent, stream, stream, store=store))
        conn = connect_to_agent(
            editor, writer, reader, use_unstable_protocol=True, observers=[editor.observe]
        )
        try:
            info = None if name is None else Implementation(name=name, version="1")
            await conn.initialize(
                protocol_version=1, client_capabilities=capabilities(forms), client_info=info
            )
            yield conn
        finally:
            await conn.close()
            writer.close()
            with anyio.fail_after(10):
                await stream.aclose()
