"""Our client against our server: ``RemoteAgent(url).as_tool()`` in process A calling the
agent ``create_app`` serves in process B (here a thread), the headline of docs/a2a.md: B's
nested question reaches A's stream tagged with the whole path, A answers it by request id,
B goes on in the same turn; two pending questions answered in reverse order; cancelling
A's run cancels B's task and run."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a_ours import our_server
from a2a_served_agents import counted, lead, planner

from hpd_agent import Agent, ClarificationRequest, RunFinished
from hpd_agent.a2a import RemoteAgent
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_A2A_TEST_DIR", str(tmp_path))
    return tmp_path


async def _orchestrator(url: str, query: str) -> tuple[Agent, ScriptedModel]:
    remote = RemoteAgent(url)
    await remote.read_card()
    remote_tool = remote.as_tool()
    model = ScriptedModel([tool_call(remote_tool.name, query=query), text("relayed")])
    return Agent("Orchestrator", model=model, tools=[remote_tool]), model


async def test_a_remote_nested_question_reaches_the_root_and_its_answer_goes_on() -> None:
    with our_server(planner) as url:
        orchestrator, model = await _orchestrator(url, "a shop")
        asked: list[ClarificationRequest] = []
        async with orchestrator.stream("plan a shop") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    asked.append(event)
                    await run.respond(event.request_id, "PostgreSQL")
        result = run.result
    assert result.status == "completed" and result.output == "relayed"
    (question,) = asked
    assert question.agent_path == ("Orchestrator", "Planner", "Clarifier")
    assert question.question == "Which database should the plan assume?"
    assert question.options == ("SQLite", "PostgreSQL")
    tool_results = [m.content for m in result.messages if m.kind == "tool"]
    assert tool_results == ["Plan: The user chose PostgreSQL."]
    model.assert_complete()
    # B's Clarifier went on in the same turn: each model call and side effect once.
    assert counted("effect") == ["survey db"]
    assert counted("model") == ["Planner", "Clarifier", "Clarifier", "Clarifier", "Planner"]


async def test_two_remote_questions_answered_in_reverse_order() -> None:
    with our_server(lead) as url:
        orchestrator, _ = await _orchestrator(url, "go")
        asked: dict[str, ClarificationRequest] = {}
        async with orchestrator.stream("go") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    asked[event.question] = event
                    if len(asked) == 2:  # both pending at once: answer the later first
                        await run.respond(asked["Which size?"].request_id, "big")
                        await run.respond(asked["Which colour?"].request_id, "red")
        result = run.result
    assert result.status == "completed"
    assert asked["Which colour?"].agent_path == ("Orchestrator", "Lead", "Fast")
    assert asked["Which size?"].agent_path == ("Orchestrator", "Lead", "Slow")
    tool_results = [m.content for m in result.messages if m.kind == "tool"]
    assert tool_results == ["fast got red / slow got big"]
    assert sorted(counted("model")) == ["Fast", "Fast", "Lead", "Lead", "Slow", "Slow"]


async def test_cancelling_the_caller_cancels_the_remote_task_and_run(tmp_path: Path) -> None:
    db = str(tmp_path / "b.db")
    with our_server(planner, store=db) as url:
        orchestrator, _ = await _orchestrator(url, "a shop")
        async with orchestrator.stream("plan a shop") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    run.cancel()
                elif isinstance(event, RunFinished):
                    break
        assert run.result.status == "cancelled"
    store = SQLiteStore(db)
    try:
        runs = await store.list_runs()
    finally:
        await store.aclose()
    assert [r.status for r in runs if r.agent_name == "Planner"] == ["cancelled"]
    assert counted("effect") == ["survey db"]
