"""Both halves of MCP: an agent here uses an agent served over MCP in another process, and
the remote agent's nested question reaches the human here, mid-turn.

Process B is ``hpd-agent mcp mcp_planner:planner`` (``examples/mcp_planner.py``: a Planner
whose nested Clarifier asks which database to assume), started by ``MCPTools.stdio`` on
first use and ended with this run. Process A is this script: an Orchestrator whose model
calls B's one tool, ``Planner``. When B's Clarifier asks, B sends an elicitation; here it
becomes a question of the Orchestrator's ``Planner`` call, on this run's stream, asked
from the remote asker's path (``Orchestrator > Planner > Clarifier``, which B names in the
elicitation's ``_meta``) and its form the remote question's schema. This script answers it by request id; B's Clarifier goes on in the same turn, and
the plan comes back as the tool's result. Offline: both processes use scripted models::

    python examples/mcp_orchestrator.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio

from hpd_agent import Agent, ClarificationRequest, ToolCallFinished
from hpd_agent.events import format_path
from hpd_agent.mcp import ELICITATION, MCPTools
from hpd_agent.testing import ScriptedModel, text, tool_call

HERE = Path(__file__).resolve().parent


def orchestrator(mode: str) -> Agent:
    """The Orchestrator of process A, reaching process B's Planner over stdio."""
    planner = MCPTools.stdio(
        sys.executable,
        ["-m", "hpd_agent.cli", "mcp", "mcp_planner:planner"],
        cwd=HERE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), *sys.path])},
        mode="legacy" if mode == "legacy" else "auto",
    )
    return Agent(
        "Orchestrator",
        model=ScriptedModel(
            [tool_call("Planner", query="a todo API"), text("Orchestrator: the plan is in.")]
        ),
        tools=[planner],
    )


async def run(mode: str) -> None:
    async with orchestrator(mode).stream("Plan a todo API") as live:
        async for event in live:
            if isinstance(event, ClarificationRequest) and event.data.get("name") == ELICITATION:
                print(f"[{format_path(event.agent_path)}] asks: {event.question}")
                print(f"  form: {sorted(event.data['schema']['properties'])}")
                await live.respond(event.request_id, {"answer": "PostgreSQL"})
                print(f"  answered PostgreSQL to {event.request_id}")
            elif isinstance(event, ToolCallFinished) and event.tool_name == "Planner":
                print(f"  Planner returned: {event.result}")
    assert live.result is not None
    print(f"{mode}: {live.result.status}: {live.result.output}")


async def main() -> None:
    for mode in ("legacy", "auto"):
        await run(mode)


if __name__ == "__main__":
    anyio.run(main)
