"""An agent served over MCP asks its client: a nested agent's question becomes an elicitation.

``planner`` (offline, scripted) hands the task to its Clarifier, which asks which database
the plan should assume. Served with ``hpd-agent mcp mcp_planner:planner`` (run from this
folder), it is one MCP tool, ``Planner``; the Clarifier's question reaches the MCP client as
an elicitation whose message names the asker, ``Planner > Clarifier: ...``. The client's
answer goes back to the waiting Clarifier, which goes on in the same turn.

Run as a program, this starts that server as a subprocess over stdio and calls it with the
MCP SDK's own client, once on each protocol version (2025-11-25: an ``elicitation/create``
during the call; 2026-07-28: an ``InputRequiredResult`` and a retry)::

    python examples/mcp_planner.py
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from hpd_agent import Agent, ask_user
from hpd_agent.messages import Message, ToolResultMessage, UserMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text, tool_call


def _results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def _clarify(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = _results(messages)
    if not got:
        return tool_call(
            "ask_user",
            question="Which database should the plan assume?",
            options=["SQLite", "PostgreSQL"],
        )
    return text(f"The user chose {got[-1]}.")


def _plan(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = _results(messages)
    if not got:
        task = next(m.content for m in messages if isinstance(m, UserMessage))
        return tool_call("Clarifier", query=f"What must I know to plan: {task}?")
    return text(f"Plan: build it on what the Clarifier learned ({got[-1]})")


clarifier = Agent(
    "Clarifier",
    model=FunctionModel(_clarify),
    tools=[ask_user()],
    description="Finds out what the plan depends on, asking the user.",
)
planner = Agent(
    "Planner",
    model=FunctionModel(_plan),
    tools=[clarifier.as_tool()],
    description="Plans a software task; asks what it must know first.",
)


HERE = Path(__file__).resolve().parent


async def _call(mode: str) -> None:
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.session import ClientRequestContext

    async def answer(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        print(f"  elicitation: {params.message}")
        return types.ElicitResult(action="accept", content={"answer": "PostgreSQL"})

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hpd_agent.cli", "mcp", "mcp_planner:planner"],
        env=dict(os.environ),
        cwd=str(HERE),
    )
    async with Client(server, mode=mode, elicitation_callback=answer) as client:
        print(f"{mode}: protocol {client.protocol_version}")
        result = await client.call_tool("Planner", {"query": "a todo API"})
        block = result.content[0]
        print(f"  result: {block.text if isinstance(block, types.TextContent) else block}")


async def main() -> None:
    for mode in ("legacy", "auto"):
        await _call(mode)


if __name__ == "__main__":
    import anyio

    anyio.run(main)
