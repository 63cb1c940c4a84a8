"""Agent as tool: an Orchestrator delegates to a ResearchAgent it calls like any tool.

Every event of the tree arrives on the root run's one stream, tagged with the path of the
agent that produced it.

    python examples/agent_as_tool.py
"""

from __future__ import annotations

import anyio

from hpd_agent import Agent
from hpd_agent.events import (
    AgentFinished,
    AgentStarted,
    ToolCallFinished,
    ToolCallStarted,
    format_path,
)
from hpd_agent.testing import ScriptedModel, text, tool_call

research = Agent(
    "ResearchAgent",
    model=ScriptedModel([text("SQLite is embedded and needs no server; Postgres scales out.")]),
    instructions="Research the question and answer in one sentence.",
    description="Researches a technical question.",
)

orchestrator = Agent(
    "Orchestrator",
    model=ScriptedModel(
        [
            tool_call("ResearchAgent", query="SQLite or Postgres for a small app?"),
            text("Go with SQLite for now: no server to run; move to Postgres when you scale."),
        ]
    ),
    instructions="You coordinate. Use ResearchAgent for facts.",
    tools=[research.as_tool()],
)


async def main() -> None:
    async with orchestrator.stream("Which database should I use?") as run:
        async for event in run:
            path = format_path(event.agent_path)
            match event:
                case AgentStarted():
                    print(f"[{path}] started on: {event.input}")
                case ToolCallStarted():
                    print(f"[{path}] calls {event.tool_name}({event.arguments})")
                case ToolCallFinished():
                    print(f"[{path}] {event.tool_name} returned: {event.result}")
                case AgentFinished():
                    print(f"[{path}] finished (depth {event.depth})")
                case _:
                    pass
    print("Answer:", run.result.output)


if __name__ == "__main__":
    anyio.run(main)
