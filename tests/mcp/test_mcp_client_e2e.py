"""End to end, both halves: an agent in this process reaches, with ``MCPTools.stdio``, an
agent served by ``hpd-agent mcp`` in another (``examples/mcp_planner.py``: Planner, whose
nested Clarifier asks). The remote question reaches this run's stream as an
``mcp.elicitation`` question asked from the remote asker's path below the calling agent
(``Boss > Lead > Planner > Clarifier``, as over A2A), its text without the path; the answer,
given by request id, lets the remote Clarifier go on in the same turn. An answer the served
run refuses is asked again under a new request id, with the reason (in memory and durable)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from _child import PYTHONPATH
from mcp_client_harness import stdio_children

from hpd_agent import Agent, ClarificationRequest, InvalidAnswerError, ToolCallFinished
from hpd_agent.mcp import ELICITATION, MCPTools
from hpd_agent.store import SQLiteStore
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
    # Who asks is the path, as over A2A; the text is the question alone.
    assert question.agent_path == ("Boss", "Lead", "Planner", "Clarifier")
    assert question.tool_call_id == "call_plan"
    assert question.question == "Which database should the plan assume?"
    assert question.data is not None and question.data["name"] == ELICITATION
    assert question.data["schema"]["properties"]["answer"]["enum"] == ["SQLite", "PostgreSQL"]
    assert planned == ["Plan: build it on what the Clarifier learned (The user chose PostgreSQL.)"]
    assert run.result.output == "boss done"
    assert len(served) == 1  # the server process, while its question waited
    assert stdio_children(b"mcp_planner:planner") == []  # gone with the run


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("durable", [False, True], ids=["memory", "sqlite"])
async def test_an_answer_the_served_run_refuses_is_asked_again_under_a_new_id(
    mode: str, durable: bool, tmp_path: Path
) -> None:
    asker = MCPTools.stdio(
        sys.executable,
        ["-m", "hpd_agent.cli", "mcp", "tests.mcp.mcp_server_agents:asker"],
        cwd=ROOT,
        env={"PYTHONPATH": PYTHONPATH, "HPD_MCP_TEST_DIR": str(tmp_path)},
        mode=mode,  # type: ignore[arg-type]
    )
    boss = Agent(
        "Boss",
        model=ScriptedModel([tool_call("Asker", query="input"), text("boss done")]),
        tools=[asker],
    )
    store = SQLiteStore(tmp_path / "runs.db") if durable else None
    replies = iter(["   ", "bob"])  # blank fits the form; the served run refuses it
    asked: list[ClarificationRequest] = []
    results: list[str] = []
    with anyio.fail_after(120):  # the same answer sent back for ever would never end
        async with boss.stream("go", store=store) as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    asked.append(event)
                    await run.respond(event.request_id, {"answer": next(replies)})
                elif isinstance(event, ToolCallFinished):
                    results.append(event.result)
    first, second = asked
    assert first.agent_path == second.agent_path == ("Boss", "Asker")
    assert first.request_id != second.request_id
    assert first.question == "Please provide a value for 'recipient' (needed by kinds)."
    assert second.question == (
        f"{first.question}\n(Your last answer was not accepted: a value for 'recipient' is "
        "required; the answer was empty)"
    )
    assert results == ['answer: "bob"']
    assert run.result.output == "boss done"
