"""``mcp_server(agent)``: an agent served as one MCP tool whose questions become elicitations.

The tool is named after the agent and takes ``{"query": string}``; its result is the agent's
output text. A question asked anywhere in the agent's tree during the call reaches the MCP
client as an elicitation (see ``_server_calls``): its message is the asker's path joined by
`` > ``, then the question.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..agent import Agent
from ..exceptions import UserError
from ..store import Store, open_store
from ..text import shown
from ..version import __version__
from ._server_calls import Calls
from ._server_keys import StateCodec, kept_key
from ._server_runs import ServedRuns

__all__ = ["DEFAULT_STATE_TTL", "mcp_server"]

DEFAULT_STATE_TTL = 86400.0
"""Seconds a ``requestState`` stays valid, and a run waiting for its client's retry is kept:
a day, since a person answers the question at the other end (the SDK's default is 600 s)."""

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_log = logging.getLogger(__name__)


def mcp_server(
    agent: Agent,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    name: str | None = None,
    state_ttl: float = DEFAULT_STATE_TTL,
) -> Server[Calls]:
    """An MCP server (the SDK's low-level ``mcp.server.Server``) offering ``agent`` as a tool.

    Serve it as any SDK server: ``await server.run(read, write,
    server.create_initialization_options())`` over stdio, ``server.streamable_http_app()``
    over HTTP, or ``hpd-agent mcp MODULE:ATTR``. Its lifespan owns the runs.

    Args:
        agent: The agent to serve. Its tool is named after it (characters MCP does not
            allow in a tool name become ``_``) and takes ``{"query": string}``.
        store: A ``Store``, or a SQLite path / ``postgresql://`` DSN: runs are journaled
            there, and the key sealing ``requestState`` is kept there, so a restarted server
            continues a run whose question was pending when the client retries with its
            answer. None: runs live in this process only.
        name: The server's name (and the audience its ``requestState`` is sealed for);
            the agent's name by default.
        state_ttl: Seconds a ``requestState`` stays valid (protocol 2026-07-28); a run
            whose client has not come back by then is cancelled.

    Returns:
        The server.

    Raises:
        UserError: ``agent`` is not an ``Agent``, or ``state_ttl`` is not positive.
    """
    if not isinstance(agent, Agent):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"mcp_server needs an Agent, got {type(agent).__name__}")
    if not state_ttl > 0:
        raise UserError(f"state_ttl must be a positive number of seconds, got {state_ttl!r}")
    server_name = name or agent.name
    tool = _tool(agent)
    codec = StateCodec()
    server = Server[Calls](
        server_name,
        version=__version__,
        lifespan=_lifespan(agent, store, codec, state_ttl, tool.name),
        get_tool_input_schema=lambda called: tool.input_schema if called == tool.name else None,
        on_list_tools=partial(_list_tools, tool),
        on_call_tool=_call_tool,
    )
    security = RequestStateSecurity(codec=codec, ttl=state_ttl, audience=server_name)
    server.middleware.append(RequestStateBoundary(security, default_audience=server_name))
    return server


def _lifespan(
    agent: Agent,
    store: Store | str | os.PathLike[str] | None,
    codec: StateCodec,
    state_ttl: float,
    tool_name: str,
) -> Callable[[Server[Calls]], AbstractAsyncContextManager[Calls]]:
    """The server's lifespan: the store opened (a location) and its key used, the task
    group the runs live in."""

    @asynccontextmanager
    async def lifespan(_: Server[Calls]) -> AsyncGenerator[Calls]:
        opened = open_store(store) if isinstance(store, (str, os.PathLike)) else store
        try:
            if opened is not None:
                codec.use(await kept_key(opened))
            async with anyio.create_task_group() as tg:
                yield Calls(ServedRuns(agent, opened, tg, state_ttl), tool_name)
                tg.cancel_scope.cancel()  # a shutdown leaves stored runs resumable
        finally:
            if opened is not None and opened is not store:
                await opened.aclose()

    return lifespan


async def _list_tools(
    tool: types.Tool, ctx: ServerRequestContext[Calls], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[tool])


async def _call_tool(
    ctx: ServerRequestContext[Calls], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    calls = ctx.lifespan_context
    if params.name != calls.tool_name:
        raise MCPError(
            INVALID_PARAMS, f"no tool {shown(params.name)}: this server has {calls.tool_name!r}"
        )
    query = (params.arguments or {}).get("query")
    if not isinstance(query, str):
        return types.CallToolResult(
            content=[types.TextContent(text='the tool takes {"query": string}')], is_error=True
        )
    try:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return await calls.input_round(ctx, params, query)
        return await calls.elicited(ctx, query)
    except MCPError:
        raise
    except Exception:
        # On 2025-11-25 the SDK would send the exception's text to the client: a store's
        # error names runs, requests, paths, a lease's holder (host and process id).
        _log.exception("the call of %s failed", calls.tool_name)
        raise MCPError(INTERNAL_ERROR, "Internal server error") from None


def _tool(agent: Agent) -> types.Tool:
    name = _NOT_IN_NAME.sub("_", agent.name)[:128]
    about = agent.description or (
        f"Ask {agent.name} to carry out a task; it may ask you questions on the way."
    )
    return types.Tool(
        name=name,
        description=about,
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": f"The task for {agent.name}."}
            },
            "required": ["query"],
        },
    )
