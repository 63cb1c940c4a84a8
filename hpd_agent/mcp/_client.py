"""Connections to one MCP server for one root run, and a tool call through them.

``Connections`` opens ``mcp.Client`` sessions in the root run's ``RunResources`` (closed
when the root run ends) and serves each call one:

- a 2026-07-28 connection serves every call at once: a server's question comes back as
  the call's result (``InputRequiredResult``), so it names its call. Each round of a call
  is a journaled step (``ctx.step``): a durable run interrupted while the questions wait
  keeps the ``requestState``, and its resume sends the retry with it (the server must still
  accept that state: the same sealing key);
- a 2025-11-25 connection's ``elicitation/create`` does not say which call it belongs to,
  so such a connection serves one call at a time: a call takes an idle one, or opens one
  more (for stdio, one more server process) when all are busy. Calls one after another
  share one connection; overlapping calls never wait for each other (a call waiting for
  its human would otherwise hold up the next). Nothing of such a call is journaled but
  its result: a resumed run makes it again (at least once).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..text import error_text
from ..tools import RunResources, ToolContext
from ..version import __version__
from ._client_elicitation import answer_all, answer_one, asked
from ._client_errors import MCPServerError, first_error

__all__ = ["MAX_ROUNDS", "Address", "Connection", "Connections"]

MAX_ROUNDS = 10
"""Rounds of ``InputRequiredResult`` one call may take (the SDK's default too)."""

_STATE_ONLY_WAIT = (0.05, 0.25)
"""First and longest pause before retrying a round that asked nothing (state only)."""

_CLIENT_INFO = types.Implementation(name="hpd-agent", version=__version__)

_BROKEN = (OSError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
"""What a call raises when its connection is gone (not the server refusing the call)."""


@dataclass(frozen=True, kw_only=True)
class Address:
    """How to reach a server: a command (stdio) or a URL (streamable HTTP)."""

    label: str
    mode: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | Path | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict[str, str])

    def transport(self) -> Any:
        """What ``mcp.Client`` connects through."""
        if self.command is not None:
            return StdioServerParameters(
                command=self.command,
                args=list(self.args),
                env=None if self.env is None else dict(self.env),
                cwd=self.cwd,
            )
        assert self.url is not None
        return _http(self.url, dict(self.headers))


@asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncGenerator[Any]:
    # No read timeout: on 2025-11-25 a call's response stream stays open while its
    # question waits for a human, which may take hours.
    timeout = httpx2.Timeout(30.0, read=None)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


@dataclass(eq=False)
class _Call:
    """The call a 2025-11-25 connection serves now, and the questions it has open."""

    ctx: ToolContext
    about: dict[str, Any]
    scopes: set[anyio.CancelScope] = field(default_factory=set[anyio.CancelScope])
    seen: dict[str, int] = field(default_factory=dict[str, int])
    """How often each remote request id was asked in this call (``_asker``)."""


class Connection:
    """One open client session with the server."""

    def __init__(self, address: Address) -> None:
        self.address = address
        self.client: Client | None = None
        self.serving: _Call | None = None
        self.broken = False
        """Set when a call found the connection gone: it is not used again (it stays
        open, like the others, until the run ends)."""

    @property
    def session(self) -> ClientSession:
        assert self.client is not None
        return self.client.session

    @property
    def protocol(self) -> str:
        assert self.client is not None
        return self.client.protocol_version

    @property
    def modern(self) -> bool:
        """Whether questions come back as results (2026-07-28 and later)."""
        return self.protocol in MODERN_PROTOCOL_VERSIONS

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """The SDK's elicitation callback (2025-11-25): ask from the call being served.

        Its question ends when the call does (the call was cancelled, or the server gave
        up): the server then gets "cancel".
        """
        call = self.serving
        if call is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="hpd-agent asks its user only while one of your tools is called",
            )
        result: types.ElicitResult = types.ElicitResult(action="cancel")
        with anyio.CancelScope() as scope:
            call.scopes.add(scope)
            try:
                how, rid = asked(call.ctx, params, call.seen)
                result = await answer_one(how, rid, params, call.about)
            except MCPServerError as e:
                return types.ErrorData(code=types.INVALID_PARAMS, message=str(e))
            finally:
                call.scopes.discard(scope)
        return result


class Connections:
    """The connections of one server in one root run (see the module docstring)."""

    def __init__(self, address: Address, resources: RunResources) -> None:
        self.address = address
        self._resources = resources
        self._shared: Connection | None = None
        self._idle: list[Connection] = []

    async def open(self) -> Connection:
        """A new connection, open until the root run ends; the first decides the pool.

        Raises:
            MCPServerError: The server cannot be started or reached, or refused to talk.
        """
        connection = Connection(self.address)
        client = Client(
            self.address.transport(),
            mode=self.address.mode,
            elicitation_callback=connection.elicit,
            client_info=_CLIENT_INFO,
        )
        try:
            connection.client = await self._resources.enter(client)
        except Exception as e:
            raise MCPServerError(
                f"{self.address.label} could not be reached: {error_text(first_error(e))}"
            ) from e
        if connection.modern:
            self._shared = connection
        return connection

    async def list_tools(self, connection: Connection) -> list[types.Tool]:
        """Every tool the server lists (all pages).

        Raises:
            MCPServerError: The server answered the listing with an error.
        """
        assert connection.client is not None
        found: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(1000):
            try:
                page = await connection.client.list_tools(cursor=cursor)
            except MCPError as e:
                raise MCPServerError(f"{self.address.label} refused tools/list: {e.message}") from e
            found.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return found

    def keep(self, connection: Connection) -> None:
        """Put a freshly opened 2025-11-25 connection in the pool."""
        if not connection.modern:
            self._idle.append(connection)

    @asynccontextmanager
    async def _lease(self) -> AsyncGenerator[Connection]:
        shared = self._shared
        if shared is not None and not shared.broken:
            yield shared
            return
        if shared is not None:  # broken: the next call opens a new one
            self._shared = None
            connection = await self.open()
            if connection.modern:
                yield connection
                return
        else:
            connection = self._idle.pop() if self._idle else await self.open()
        try:
            yield connection
        finally:  # the server answered, or the call was given up: it serves the next
            if not connection.broken:
                self._idle.append(connection)

    async def call(
        self, ctx: ToolContext, name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        """Call the server's tool ``name`` for ``ctx``, asking its questions from ``ctx``.

        Raises:
            MCPServerError: The server failed the call (an error response, a broken
                connection, too many rounds of input).
        """
        about = {"server": self.address.label, "tool": name}
        async with self._lease() as connection:
            about["protocol"] = connection.protocol
            if connection.modern:
                return await _rounds(ctx, connection, name, arguments, about)
            return await _served(ctx, connection, name, arguments, about)


async def _served(
    ctx: ToolContext,
    connection: Connection,
    name: str,
    arguments: dict[str, Any],
    about: dict[str, Any],
) -> types.CallToolResult:
    """A 2025-11-25 call: its elicitations arrive through ``Connection.elicit``."""
    call = connection.serving = _Call(ctx, about)
    try:
        result = await connection.session.call_tool(name, arguments)
    except MCPError as e:
        raise _refused(connection, name, e) from e
    except _BROKEN as e:
        raise _broken(connection, name, e) from e
    finally:
        connection.serving = None
        for scope in call.scopes:  # questions the server still has open end with the call
            scope.cancel()
    assert isinstance(result, types.CallToolResult)
    return result


async def _rounds(
    ctx: ToolContext,
    connection: Connection,
    name: str,
    arguments: dict[str, Any],
    about: dict[str, Any],
) -> types.CallToolResult:
    """A 2026-07-28 call: send, answer what the server asks, send again with its state.

    Each send is a journaled step, so a resumed run replays the rounds it had and goes on
    from the questions of the last one (answered from the store, or still waiting).
    """
    responses: dict[str, types.InputResponse] | None = None
    state: str | None = None
    pause = _STATE_ONLY_WAIT[0]
    seen: dict[str, int] = {}  # remote request ids asked in earlier rounds (``_asker``)
    for round_ in range(MAX_ROUNDS + 1):
        data = await ctx.step(
            f"mcp tools/call {name} round {round_}",
            _send,
            connection,
            name,
            arguments,
            responses,
            state,
        )
        if data.get("resultType") != "input_required":
            return types.CallToolResult.model_validate(data)
        needs = types.InputRequiredResult.model_validate(data)
        if needs.input_requests:
            responses, pause = (
                await answer_all(ctx, needs, about, seen),
                _STATE_ONLY_WAIT[0],
            )
        else:
            responses = None
            await anyio.sleep(pause)
            pause = min(pause * 2, _STATE_ONLY_WAIT[1])
        state = needs.request_state
    raise MCPServerError(
        f"{about['server']} kept asking for input past {MAX_ROUNDS} rounds of {name!r}"
    )


async def _send(
    connection: Connection,
    name: str,
    arguments: dict[str, Any],
    responses: dict[str, types.InputResponse] | None,
    state: str | None,
) -> dict[str, Any]:
    """One ``tools/call`` round, as JSON (what a journaled step keeps).

    Raises:
        MCPServerError: The server refused the round, or the connection broke (journaled
            as such: a replay raises it again, with its message).
    """
    try:
        result = await connection.session.call_tool(
            name,
            arguments,
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
        )
    except MCPError as e:
        raise _refused(connection, name, e) from e
    except _BROKEN as e:
        raise _broken(connection, name, e) from e
    dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _refused(connection: Connection, name: str, error: MCPError) -> MCPServerError:
    if error.code == types.CONNECTION_CLOSED:  # the server went away (its process ended)
        return _broken(connection, name, error)
    label = connection.address.label
    return MCPServerError(f"{label} failed tools/call {name!r}: {error.message}")


def _broken(connection: Connection, name: str, error: BaseException) -> MCPServerError:
    connection.broken = True
    label = connection.address.label
    return MCPServerError(f"{label}: the connection broke during {name!r}: {error_text(error)}")
