"""MCP servers for the client's tests: a low-level ``Server`` and an ``MCPServer`` (FastMCP).

Run as a process: ``python mcp_client_servers.py low|fast stdio|http LOG [--ephemeral]``.
Over stdio it serves its stdin/stdout; over HTTP it listens on 127.0.0.1 on a free port
and prints ``PORT <n>`` once it does (streamable HTTP at ``/mcp``). Every side effect of a
tool appends one line to ``LOG`` (a file: the server is another process), so a test counts
them. Both servers seal ``requestState`` with a fixed key (a restarted server accepts the
state a former one minted) unless ``--ephemeral``.

Both speak both protocol versions: the low-level one by hand (2025-11-25:
``elicitation/create`` during the call; 2026-07-28: ``InputRequiredResult`` and the retry),
the FastMCP one through the SDK's ``Resolve``/``Elicit`` resolvers.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import mcp_types as types
from mcp.server.elicitation import ElicitationResult
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, Field

KEY = b"hpd-agent-tests-request-state-k!"  # 32 bytes, fixed: restarts keep it

NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1}},
    "required": ["name"],
}


class Log:
    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def write(self, line: str) -> None:
        with self.path.open("a") as f:
            f.write(line + "\n")


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def _outcome(result: Any) -> str:
    if result.action == "accept" and result.content is not None:
        return f"accept {json.dumps(result.content, sort_keys=True)}"
    return str(result.action)


# -- the low-level server --------------------------------------------------------------------
def low_server(log: Log, ephemeral: bool) -> Server[Any]:
    tools = [
        types.Tool(
            name="add",
            description="Add two numbers.",
            input_schema={
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        ),
        types.Tool(name="fail", description="Always fails.", input_schema={"type": "object"}),
        types.Tool(
            name="ask",
            description="Ask the user their name.",
            input_schema={"type": "object", "properties": {"why": {"type": "string"}}},
        ),
        types.Tool(name="ask_two", description="Ask two things.", input_schema={"type": "object"}),
        types.Tool(
            name="visit",
            description="Send the user to a page.",
            input_schema={"type": "object", "properties": {"url": {"type": "string"}}},
        ),
        types.Tool(name="forms", description="Ask sampling.", input_schema={"type": "object"}),
        types.Tool(name="crash", description="The server dies.", input_schema={"type": "object"}),
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        modern = ctx.protocol_version >= "2026"
        name, answers, state = params.name, params.input_responses, params.request_state
        if name == "add":
            args = params.arguments or {}
            log.write("add")
            return _text(str(args["a"] + args["b"]))
        if name == "fail":
            return _text("boom: the tool failed", error=True)
        if name == "ask":
            why = (params.arguments or {}).get("why", "")
            message = f"What is your name?{' ' + why if why else ''}"
            if not modern:
                log.write("ask:start")
                result = await ctx.session.elicit_form(message, NAME_SCHEMA, ctx.request_id)
                log.write(f"ask:done {_outcome(result)}")
                return _text(f"ask {_outcome(result)}")
            if answers is None:
                log.write("ask:start")
                form = types.ElicitRequestFormParams(message=message, requested_schema=NAME_SCHEMA)
                return types.InputRequiredResult(
                    input_requests={"name": types.ElicitRequest(params=form)},
                    request_state="asked-name",
                )
            assert state == "asked-name", state
            log.write(f"ask:done {_outcome(answers['name'])}")
            return _text(f"ask {_outcome(answers['name'])}")
        if name == "ask_two":
            forms = {
                k: types.ElicitRequestFormParams(message=f"Your {k}?", requested_schema=NAME_SCHEMA)
                for k in ("first", "second")
            }
            if not modern:
                got = {
                    k: await ctx.session.elicit_form(f.message, NAME_SCHEMA, ctx.request_id)
                    for k, f in forms.items()
                }
                return _text(" | ".join(f"{k}={_outcome(r)}" for k, r in got.items()))
            if answers is None:
                log.write("ask_two:start")
                requests = {k: types.ElicitRequest(params=f) for k, f in forms.items()}
                return types.InputRequiredResult(input_requests=requests, request_state="two")
            return _text(" | ".join(f"{k}={_outcome(answers[k])}" for k in forms))
        if name == "visit":
            url = str((params.arguments or {}).get("url", "https://example.com/connect?x=1"))
            message = "Connect your account"
            if not modern:
                result = await ctx.session.elicit_url(message, url, "el-1", ctx.request_id)
                return _text(f"visit {result.action}")
            if answers is None:
                form = types.ElicitRequestURLParams(message=message, url=url)
                return types.InputRequiredResult(
                    input_requests={"go": types.ElicitRequest(params=form)}, request_state="v"
                )
            return _text(f"visit {answers['go'].action}")
        if name == "crash":
            log.write("crash")
            os._exit(3)
        if name == "forms":  # asks for sampling, which the client does not offer
            sample = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams(messages=[], max_tokens=5)
            )
            return types.InputRequiredResult(input_requests={"s": sample}, request_state="s")
        raise ValueError(f"unknown tool {name}")

    server: Server[Any] = Server("low", on_list_tools=list_tools, on_call_tool=call_tool)
    security = RequestStateSecurity.ephemeral() if ephemeral else RequestStateSecurity(keys=[KEY])
    server.middleware.append(RequestStateBoundary(security, default_audience="low"))
    return server


# -- the FastMCP server --------------------------------------------------------------------------
class Booking(BaseModel):
    email: str = Field(json_schema_extra={"format": "email"})
    day: str = Field(json_schema_extra={"format": "date"})
    size: Literal["small", "large"]
    extras: list[Literal["wifi", "parking", "breakfast"]] = []
    guests: int = Field(ge=1, le=4)
    pets: bool = False


def ask_booking() -> Elicit[Booking]:
    return Elicit("Booking details?", Booking)


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("Who is it for?", Name)


def fast_server(log: Log, ephemeral: bool) -> MCPServer[Any]:
    security = None if ephemeral else RequestStateSecurity(keys=[KEY])
    server: MCPServer[Any] = MCPServer("fast", request_state_security=security)

    @server.tool()
    def book(booking: Annotated[Booking, Resolve(ask_booking)]) -> str:
        """Book a room (asks the user for the details)."""
        log.write("book")
        return f"booked {booking.model_dump_json()}"

    @server.tool()
    def greet(who: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
        """Greet someone (asks whom)."""
        log.write(f"greet:{who.action}")
        return f"hello {who.data.name}" if who.action == "accept" else f"greet {who.action}"

    @server.tool()
    def shout(text: str) -> str:
        """Shout a text."""
        log.write("shout")
        return text.upper()

    return server


def build(kind: str, log: Log, ephemeral: bool) -> Server[Any]:
    if kind == "low":
        return low_server(log, ephemeral)
    return fast_server(log, ephemeral)._lowlevel_server  # pyright: ignore[reportPrivateUsage]


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(server: Server[Any]) -> None:
    import socket

    import uvicorn

    # Bound and listening before the port is told: a client may connect at once.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    kind, transport, log_path = sys.argv[1:4]
    server = build(kind, Log(log_path), "--ephemeral" in sys.argv)
    anyio.run(serve_stdio if transport == "stdio" else serve_http, server)


if __name__ == "__main__":
    main()
