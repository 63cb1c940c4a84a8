"""A2A both ways: process A's Orchestrator calls a Planner process B serves over A2A, and
B's nested Clarifier asks A's human mid-turn.

``planner`` (offline, scripted) hands the task to its Clarifier, which asks which database
the plan should assume. Served with ``hpd-agent serve --a2a a2a_planner:planner`` (run from
this folder), it is process B. Run as a program, this file starts B as a subprocess and
plays process A: an Orchestrator whose only tool is ``RemoteAgent(url_of_B).as_tool()``.
B's question reaches A's stream with the whole path, ``Orchestrator > Planner > Clarifier``;
A answers it by request id; the answer goes into B's task, B's Clarifier goes on in the
same turn, and A gets the plan::

    python examples/a2a_planner.py
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from hpd_agent import Agent, ClarificationRequest, ask_user
from hpd_agent.events import format_path
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


def _orchestrate(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = _results(messages)
    if not got:
        return tool_call("Planner", query="a todo API")
    return text(f"The remote Planner says: {got[-1]}")


HERE = Path(__file__).resolve().parent


async def main(url: str) -> None:
    """Process A: the Orchestrator over the remote Planner; the human's answer by request id."""
    from hpd_agent.a2a import RemoteAgent

    remote = RemoteAgent(url)
    await remote.read_card()
    orchestrator = Agent(
        "Orchestrator", model=FunctionModel(_orchestrate), tools=[remote.as_tool()]
    )
    async with orchestrator.stream("plan a todo API") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                print(f"question from {format_path(event.agent_path)}: {event.question}")
                await run.respond(event.request_id, "PostgreSQL")
                print(f"answered 'PostgreSQL' to request {event.request_id}")
    print(f"Result: {run.result.output}")


if __name__ == "__main__":
    import anyio

    serve_b = ["-m", "hpd_agent.cli", "serve", "--a2a", "a2a_planner:planner", "--port", "0"]
    b = subprocess.Popen([sys.executable, *serve_b], cwd=HERE, stdout=subprocess.PIPE, text=True)
    try:
        assert b.stdout is not None
        url = b.stdout.readline().rsplit(" ", 1)[-1].strip()  # "Serving Planner over A2A on URL"
        print(f"process B serves the Planner at {url}")
        anyio.run(main, url)
    finally:
        b.terminate()
        b.wait(10)
