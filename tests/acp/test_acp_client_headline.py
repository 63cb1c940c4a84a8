"""The headline, end to end (item 23): an Orchestrator whose tool is
``ACPAgent("hpd-agent", ["acp", "acp_agents:planner"], name="Planner")`` sees the remote
Clarifier's question on its own stream, as an ``acp.elicitation`` question whose path is
``("Orchestrator", "Planner", "Clarifier")``, answers it in the same turn, and gets the plan as
the tool's result; a permission asked at ``Top > Mid > Leaf`` over there arrives as a
``PermissionRequest`` at ``("Orchestrator", "Top", "Mid", "Leaf")`` and ``Approve`` lets the
remote tool run once. The served agents are the server tests' (``acp_agents.py``), in a child
``hpd-agent acp``; on asyncio and trio, no process left behind."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _child import PYTHONPATH
from acp_agents import counted
from acp_client_harness import children_running

from hpd_agent import (
    Agent,
    Approve,
    ClarificationRequest,
    PermissionRequest,
    PermissionResolved,
    RunFinished,
)
from hpd_agent.acp import ELICITATION, ACPAgent
from hpd_agent.events import Event
from hpd_agent.messages import ToolResultMessage
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
SCRIPT = Path(sys.executable).parent / "hpd-agent"
"""The ``hpd-agent`` command of this environment (``python -m hpd_agent.cli`` without it)."""


def served(ref: str, name: str, tmp: Path) -> ACPAgent:
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "hpd_agent.cli"]
    env = {"PYTHONPATH": PYTHONPATH, "HPD_ACP_TEST_DIR": str(tmp)}
    # MODULE:ATTR is importable from the current directory, as with hpd-agent mcp.
    return ACPAgent(command[0], [*command[1:], "acp", ref], name=name, cwd=HERE, env=env)


async def orchestrate(agent: ACPAgent, query: str, answer: Any) -> tuple[list[Event], Any]:
    model = ScriptedModel([tool_call(agent.name, query=query), text("done")])
    root = Agent("Orchestrator", model=model, tools=[agent.as_tool()])
    events: list[Event] = []
    async with root.stream("plan it") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, RunFinished):
                assert children_running(agent.args[-1]) == []  # reaped first
            elif isinstance(event, ClarificationRequest | PermissionRequest):
                assert len(children_running(agent.args[-1])) == 1  # the one process
                await run.respond(event.request_id, answer(event))
    return events, run.result


def _pick(event: Any) -> Any:
    [(prop, schema)] = event.data["schema"]["properties"].items()
    assert schema["enum"] == ["SQLite", "PostgreSQL"]
    return {prop: "PostgreSQL"}


async def test_the_remote_clarifiers_question_reaches_the_orchestrator(tmp_path: Path) -> None:
    planner = served("acp_agents:planner", "Planner", tmp_path)
    with anyio.fail_after(120):
        events, result = await orchestrate(planner, "a todo API", _pick)
    [question] = [e for e in events if isinstance(e, ClarificationRequest)]
    assert question.agent_path == ("Orchestrator", "Planner", "Clarifier")
    assert question.question_kind == "custom" and question.data["name"] == ELICITATION
    assert question.question == "Planner > Clarifier: Which database should the plan assume?"
    [plan] = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert not plan.is_error and plan.content == "Plan: The user chose PostgreSQL."
    assert result.status == "completed" and result.output == "done"
    assert counted("effect", tmp_path) == ["survey db"]  # one turn over there, nothing twice
    assert children_running("acp_agents:") == []


async def test_a_permission_deep_over_there_is_approved_at_the_root(tmp_path: Path) -> None:
    top = served("acp_agents:top", "Top", tmp_path)
    with anyio.fail_after(120):
        events, result = await orchestrate(top, "1", lambda e: Approve())
    [asked] = [e for e in events if isinstance(e, PermissionRequest)]
    assert asked.agent_path == ("Orchestrator", "Top", "Mid", "Leaf")
    assert asked.tool_name == "Top > Mid > Leaf: deploy"
    assert asked.arguments == {"target": "prod1"}
    [resolved] = [e for e in events if isinstance(e, PermissionResolved)]
    assert resolved.approved and resolved.scope == "once"
    [answer] = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert answer.content == "top: mid: leaf: deployed to prod1"
    assert counted("effect", tmp_path) == ["deploy prod1"]
    assert children_running("acp_agents:") == []
