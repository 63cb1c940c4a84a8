"""End to end, both halves: an agent in this process reaches, with ``MCPTools.stdio``, an
agent served by ``hpd-agent mcp`` in another (``examples/mcp_planner.py``: Planner, whose
nested Clarifier asks). The remote question reaches this run's stream as an
``mcp.elicitation`` question of the calling agent, naming the remote asker's path; the
answer, given by request id, lets the remote Clarifier go on in the same turn. Skipped
until the server half (``hpd_agent.mcp.mcp_server``) is in the package."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp_client_harness import stdio_children

from hpd_agent import Agent, ClarificationRequest, InvalidAnswerError, ToolCallFinished
from hpd_agent.mcp import ELICITATION, MCPTools
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_remote_agents_question_reaches_this_runs_human(mode: str) -> None:
    planner = MCPTools.stdio(
        sys.executable,
        ["-m", "hpd_agent.cli", "mcp", "mcp_planner:planner"],
        cwd=ROOT / "examples",
        env={"PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])},
        mode=mode,  # type: ignore[arg-type]
    )
    lead = Agent(
        "Lead",
        model=ScriptedModel(
            [tool_call("Planner", _id="call_plan", query="a todo API"), text("lead done")]
        ),
        tools=[planner],
    )
    boss = Agent(
        "Boss",
        model=ScriptedModel([tool_call("Lead", query="plan it"), text("boss done")]),
        tools=[lead.as_tool()],
    )
    asked: list[ClarificationRequest] = []
    planned: list[str] = []
    served: list[int] = []
    async with boss.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                asked.append(event)
                served.extend(stdio_children(b"mcp_planner:planner"))
                with pytest.raises(InvalidAnswerError):
                    await run.respond(event.request_id, {"answer": "MySQL"})  # not an option
                await run.respond(event.request_id, {"answer": "PostgreSQL"})
            elif isinstance(event, ToolCallFinished) and event.tool_name == "Planner":
                planned.append(event.result)
    [question] = asked
    assert question.agent_path == ("Boss", "Lead")
    assert question.tool_call_id == "call_plan"
    assert question.question == "Planner > Clarifier: Which database should the plan assume?"
    assert question.data is not None and question.data["name"] == ELICITATION
    assert question.data["schema"]["properties"]["answer"]["enum"] == ["SQLite", "PostgreSQL"]
    assert planned == ["Plan: build it on what the Clarifier learned (The user chose PostgreSQL.)"]
    assert run.result.output == "boss done"
    assert len(served) == 1  # the server process, while its question waited
    assert stdio_children(b"mcp_planner:planner") == []  # gone with the run
