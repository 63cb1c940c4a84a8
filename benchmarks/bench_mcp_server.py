"""What serving an agent over MCP adds to one question's round trip.

One ``tools/call`` whose tool asks the client one question (an elicitation) and returns
the answer, timed from the client (the MCP SDK's ``Client`` with an elicitation callback
that answers at once), on both protocol versions (2025-11-25: ``elicitation/create`` during
the call; 2026-07-28: ``InputRequiredResult``, then the retry):

- ours: ``hpd_agent.mcp.mcp_server(agent)``; the agent (scripted model, no delay) calls a
  tool that asks with ``ctx.ask``; the question goes out once the run settles;
- SDK: its own ``MCPServer`` whose tool asks through a ``Resolve``/``Elicit`` resolver,
  the SDK's way of eliciting on both protocol versions;
- raw: the SDK's low-level ``Server`` eliciting by hand (``elicit_form``, or an
  ``InputRequiredResult`` it answers itself on the retry): the floor of a round trip.

Transports: in process (``Client(server)``: no I/O, the harshest ratio) and streamable
HTTP on 127.0.0.1 (uvicorn in this process). Calls alternate between the two servers in
blocks, so drift hits both alike; the medians are printed, and their ratio.

Usage: ``python benchmarks/bench_mcp_server.py [--calls 300] [--transport memory|http]``;
prints a table and one ``RESULT_JSON {...}`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.resolve import Elicit, Resolve  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from hpd_agent import Agent, ToolContext, tool  # noqa: E402
from hpd_agent.messages import Message, ToolResultMessage  # noqa: E402
from hpd_agent.models import ModelRequestParams  # noqa: E402
from hpd_agent.testing import FunctionModel, Step, text, tool_call  # noqa: E402

QUESTION = "Which database?"
BLOCK = 10
"""Calls in a row on one server before switching to the other."""


def our_server() -> Any:
    from hpd_agent.mcp import mcp_server

    @tool
    async def pick(ctx: ToolContext) -> str:
        """Ask the client."""
        return await ctx.ask(QUESTION)

    def plan(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        got = [m.content for m in messages if isinstance(m, ToolResultMessage)]
        return text(f"picked {got[-1]}") if got else tool_call("pick")

    return mcp_server(Agent("Planner", model=FunctionModel(plan), tools=[pick]))


class Answer(BaseModel):
    answer: str


def ask(query: str) -> Elicit[Answer]:
    """The SDK's resolver: elicit the answer before the tool body runs."""
    return Elicit(QUESTION, Answer)


def sdk_server() -> Any:
    server = MCPServer("Planner", log_level="WARNING")

    @server.tool(name="Planner")
    async def planner(query: str, picked: Annotated[Answer, Resolve(ask)]) -> str:
        return f"picked {picked.answer}"

    return server


def raw_server() -> Any:
    """The SDK's low-level ``Server`` eliciting by hand: the floor of a round trip."""
    from mcp.server import Server
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    }
    tool_def = types.Tool(name="Planner", input_schema={"type": "object"})

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool_def])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            if params.request_state is None:
                form = types.ElicitRequestFormParams(message=QUESTION, requested_schema=schema)
                return types.InputRequiredResult(
                    input_requests={"q": types.ElicitRequest(params=form)}, request_state="s"
                )
            reply = (params.input_responses or {})["q"]
        else:
            reply = await ctx.session.elicit_form(
                QUESTION, schema, related_request_id=ctx.request_id
            )
        assert isinstance(reply, types.ElicitResult) and reply.content is not None
        return types.CallToolResult(
            content=[types.TextContent(text=f"picked {reply.content['answer']}")]
        )

    server = Server("Planner", on_list_tools=list_tools, on_call_tool=call_tool)
    security = RequestStateSecurity.ephemeral()
    server.middleware.append(RequestStateBoundary(security, default_audience="Planner"))
    return server


async def _answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert params.message.endswith(QUESTION), params.message
    return types.ElicitResult(action="accept", content={"answer": "SQLite"})


@asynccontextmanager
async def connected(server: Any, transport: str, mode: str) -> AsyncIterator[Client]:
    if transport == "memory":
        async with Client(server, mode=mode, elicitation_callback=_answer) as client:
            yield client
        return
    import uvicorn

    app = server.streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(uv.serve, [sock])
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        try:
            async with Client(url, mode=mode, elicitation_callback=_answer) as client:
                yield client
        finally:
            uv.should_exit = True
    sock.close()


async def _one(client: Client) -> float:
    start = time.perf_counter()
    result = await client.call_tool("Planner", {"query": "a todo API"})
    elapsed = time.perf_counter() - start
    block = result.content[0]
    assert isinstance(block, types.TextContent) and block.text == "picked SQLite", result
    return elapsed


async def measure(transport: str, mode: str, calls: int) -> dict[str, Any]:
    async with (
        connected(our_server(), transport, mode) as ours,
        connected(sdk_server(), transport, mode) as sdk,
        connected(raw_server(), transport, mode) as raw,
    ):
        clients = (("ours", ours), ("sdk", sdk), ("raw", raw))
        for _, client in clients:  # warm up each
            for _ in range(BLOCK):
                await _one(client)
        times: dict[str, list[float]] = {name: [] for name, _ in clients}
        while len(times["ours"]) < calls:
            for name, client in clients:
                for _ in range(BLOCK):
                    times[name].append(await _one(client))
    ms = {name: statistics.median(t) * 1000 for name, t in times.items()}
    return {
        "transport": transport,
        "protocol": "2025-11-25" if mode == "legacy" else "2026-07-28",
        "calls": len(times["ours"]),
        "ours_ms": round(ms["ours"], 3),
        "sdk_ms": round(ms["sdk"], 3),
        "raw_ms": round(ms["raw"], 3),
        "ratio": round(ms["ours"] / ms["sdk"], 3),
        "ratio_raw": round(ms["ours"] / ms["raw"], 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per server and case")
    parser.add_argument("--transport", choices=["memory", "http"], action="append")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for transport in args.transport or ["memory", "http"]:
        for mode in ("legacy", "auto"):
            rows.append(anyio.run(measure, transport, mode, args.calls, backend="asyncio"))
    print(
        f"{'transport':<10}{'protocol':<12}{'ours ms':>9}{'SDK ms':>9}{'ratio':>7}"
        f"{'raw ms':>9}{'ratio':>7}   (medians per call)"
    )
    for r in rows:
        print(
            f"{r['transport']:<10}{r['protocol']:<12}{r['ours_ms']:>9.3f}{r['sdk_ms']:>9.3f}"
            f"{r['ratio']:>7.2f}{r['raw_ms']:>9.3f}{r['ratio_raw']:>7.2f}"
        )
    print("RESULT_JSON " + json.dumps({"bench": "mcp_server", "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
