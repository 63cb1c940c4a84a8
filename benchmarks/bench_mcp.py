"""What the MCP client's bridge adds to one elicitation round trip.

    python benchmarks/bench_mcp.py [--calls 100] [--rounds 5] [--transports stdio,http]
                                   [--modes auto,legacy]

One MCP tool, ``ask``, asks the user a one-field form every call (2025-11-25: an
``elicitation/create`` during the call; 2026-07-28: an ``InputRequiredResult``, then the
retry carrying the answer). The same server process serves two clients in turn, interleaved
round by round so that drift on a shared machine hits both alike:

- ``sdk``: the SDK's own ``Client.call_tool`` with an ``elicitation_callback`` that answers
  at once (on 2026-07-28 the SDK drives the retry itself);
- ``bridge``: an hpd_agent agent holding ``MCPTools`` whose scripted model calls ``ask``
  once per turn; each elicitation is a ``ClarificationRequest`` on the run's stream, answered
  by the consumer with ``run.respond``. Its figure includes the model turn, the tool call,
  the question's events and the answer's check against the form's schema.

Per call: wall time of calls 2..N on one open connection (the first one, and the
connection's opening and closing, are left out), median over rounds. The server runs in a
subprocess (stdio) or on 127.0.0.1 (streamable HTTP), as ``--serve``. Prints a table and
one ``RESULT_JSON`` line; the target is bridge / sdk <= 1.2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's hpd_agent

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

from hpd_agent import Agent, ClarificationRequest, ToolCallFinished
from hpd_agent.mcp import MCPTools
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, text, tool_call

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
TARGET = 1.2
HERE = str(Path(__file__).resolve())


# -- the server ---------------------------------------------------------------------------------
def _server() -> Any:
    from mcp.server.lowlevel import Server

    tool = types.Tool(name="ask", description="Ask a name.", input_schema={"type": "object"})

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        if ctx.protocol_version < "2026":
            got = await ctx.session.elicit_form("Name?", SCHEMA, ctx.request_id)
            return types.CallToolResult(content=[types.TextContent(text=got.content["name"])])
        if params.input_responses is None:
            form = types.ElicitRequestFormParams(message="Name?", requested_schema=SCHEMA)
            return types.InputRequiredResult(
                input_requests={"n": types.ElicitRequest(params=form)}, request_state="s"
            )
        got = params.input_responses["n"]
        assert isinstance(got, types.ElicitResult) and got.content is not None
        return types.CallToolResult(content=[types.TextContent(text=str(got.content["name"]))])

    return Server("bench", on_list_tools=list_tools, on_call_tool=call_tool)


def serve(transport: str) -> None:
    server = _server()
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(main)
        return
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])


# -- the two clients ---------------------------------------------------------------------------
async def sdk_round(target: Any, mode: str, calls: int) -> float:
    """Seconds per call of the SDK's own client, calls 2..N."""

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with Client(target, mode=mode, elicitation_callback=answer) as client:
        await client.call_tool("ask", {})
        start = time.perf_counter()
        for _ in range(calls - 1):
            result = await client.call_tool("ask", {})
            assert isinstance(result.content[0], types.TextContent)
            assert result.content[0].text == "Ada"
        return (time.perf_counter() - start) / (calls - 1)


async def bridge_round(tools: MCPTools, calls: int) -> float:
    """Seconds per call through an agent, calls 2..N (from the first call's end)."""

    def step(messages: Sequence[Message], params: ModelRequestParams) -> Any:
        done = sum(isinstance(m, ToolResultMessage) for m in messages)
        return tool_call("ask") if done < calls else text("done")

    agent = Agent("Bench", model=FunctionModel(step), tools=[tools], max_turns=calls + 1)
    finished: list[float] = []
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                await run.respond(event.request_id, {"name": "Ada"})
            elif isinstance(event, ToolCallFinished):
                assert event.result == "Ada", event.result
                finished.append(time.perf_counter())
    assert run.result.output == "done" and len(finished) == calls
    return (finished[-1] - finished[0]) / (calls - 1)


async def measure(
    transport: str, mode: str, url: str | None, calls: int, rounds: int
) -> dict[str, Any]:
    here = HERE
    if transport == "stdio":
        sdk_target: Any = StdioServerParameters(
            command=sys.executable, args=[here, "--serve", "stdio"]
        )
        tools = MCPTools.stdio(sys.executable, [here, "--serve", "stdio"], mode=mode)  # type: ignore[arg-type]
    else:
        assert url is not None
        sdk_target, tools = url, MCPTools.http(url, mode=mode)  # type: ignore[arg-type]
    sdk: list[float] = []
    bridge: list[float] = []
    for r in range(rounds):
        pair = [("sdk", sdk_round(sdk_target, mode, calls)), ("bridge", bridge_round(tools, calls))]
        for name, coro in pair if r % 2 == 0 else reversed(pair):
            (sdk if name == "sdk" else bridge).append(await coro)
    s, b = statistics.median(sdk), statistics.median(bridge)
    return {
        "transport": transport,
        "protocol": "2026-07-28" if mode == "auto" else "2025-11-25",
        "sdk_ms": round(s * 1e3, 4),
        "bridge_ms": round(b * 1e3, 4),
        "added_ms": round((b - s) * 1e3, 4),
        "ratio": round(b / s, 3),
    }


def _http_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", "http"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("PORT "), line
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/mcp"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--transports", default="stdio,http")
    ap.add_argument("--modes", default="auto,legacy")
    ap.add_argument("--serve", choices=("stdio", "http"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve(a.serve)
        return
    rows: list[dict[str, Any]] = []
    for transport in a.transports.split(","):
        proc, url = _http_server() if transport == "http" else (None, None)
        try:
            for mode in a.modes.split(","):
                rows.append(anyio.run(measure, transport, mode, url, a.calls, a.rounds))
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait()
    print(
        f"{'transport':<10}{'protocol':<12}{'sdk ms':>10}{'bridge ms':>11}{'added ms':>10}{'ratio':>8}"
    )
    for row in rows:
        print(
            f"{row['transport']:<10}{row['protocol']:<12}{row['sdk_ms']:>10.3f}"
            f"{row['bridge_ms']:>11.3f}{row['added_ms']:>10.3f}{row['ratio']:>8.3f}"
        )
    worst = max(r["ratio"] for r in rows)
    print(
        f"worst ratio {worst:.3f} (target <= {TARGET}: {'met' if worst <= TARGET else 'not met'})"
    )
    print("RESULT_JSON " + json.dumps({"rows": rows, "worst_ratio": worst, "target": TARGET}))


if __name__ == "__main__":
    main()
