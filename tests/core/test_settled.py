"""``Run.settled()``: the run waits for the human alone, and these are its questions.

A bridge that sends a batch of questions (MCP's ``InputRequiredResult``, A2A's
``input-required``) waits for this moment: every live call of the tree waits on a request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from hpd_agent import Agent, ToolContext, tool
from hpd_agent.events import ClarificationRequest, Event, ToolCallStarted
from hpd_agent.messages import ToolResultMessage
from hpd_agent.run import Run
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import FunctionModel, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


def _tree(gate: anyio.Event, asked: list[str]) -> Agent:
    """Root calls Fast (asks at once) and Slow (works until ``gate``, then asks) in
    parallel; Fast asks a follow-up after its first answer."""

    @tool
    async def quick(ctx: ToolContext) -> str:
        """Ask twice."""
        first = await ctx.ask("fast one?")
        asked.append(first)
        second = await ctx.ask(f"fast two after {first}?")
        asked.append(second)
        return f"{first}+{second}"

    @tool
    async def slow(ctx: ToolContext) -> str:
        """Work, then ask."""
        await gate.wait()
        answer = await ctx.ask("slow one?")
        asked.append(answer)
        return answer

    fast = Agent(
        "Fast", model=ScriptedModel([tool_call("quick"), text("fast done")]), tools=[quick]
    )
    slow_agent = Agent(
        "Slow", model=ScriptedModel([tool_call("slow"), text("slow done")]), tools=[slow]
    )

    def plan(messages: Any, params: Any) -> Any:
        if not any(isinstance(m, ToolResultMessage) for m in messages):
            return [tool_call("Fast", query="f"), tool_call("Slow", query="s")]
        return text("all done")

    return Agent("Root", model=FunctionModel(plan), tools=[fast.as_tool(), slow_agent.as_tool()])


async def _drain(run: Run, seen: list[Event]) -> None:
    async for event in run:
        seen.append(event)


def _questions(pending: list[Any]) -> list[str]:
    return [p.question for p in pending]


async def _settle_in_task(run: Run, out: list[list[Any]], done: anyio.Event) -> None:
    out.append(await run.settled())
    done.set()


async def test_parallel_questions_come_together_and_answers_count_at_once() -> None:
    gate = anyio.Event()
    asked: list[str] = []
    seen: list[Event] = []
    async with _tree(gate, asked).stream("go") as run, anyio.create_task_group() as tg:
        tg.start_soon(_drain, run, seen)
        got: list[list[Any]] = []
        done = anyio.Event()
        tg.start_soon(_settle_in_task, run, got, done)
        # Fast waits on its question; Slow's tool is still working: not settled.
        await wait_all_tasks_blocked()
        assert any(isinstance(e, ClarificationRequest) for e in seen)
        assert any(isinstance(e, ToolCallStarted) and e.tool_name == "slow" for e in seen)
        assert not done.is_set()
        gate.set()
        await done.wait()
        assert sorted(_questions(got[0])) == ["fast one?", "slow one?"]
        first = next(p for p in got[0] if p.question == "fast one?")
        await run.respond(first.request_id, "A")
        # The answer counts at once: Fast's tool is live again, so the next batch is the
        # slow question still open plus Fast's follow-up, never the slow one alone.
        batch = await run.settled()
        assert sorted(_questions(batch)) == ["fast two after A?", "slow one?"]
        for p in batch:
            await run.respond(p.request_id, "B" if p.question == "slow one?" else "C")
        assert await run.settled() == []  # the run ends without asking again
    assert run.result.output == "all done"
    assert sorted(asked) == ["A", "B", "C"]


async def test_a_run_that_never_asks_is_never_settled() -> None:
    agent = Agent("Plain", model=ScriptedModel([text("hi")]))
    async with agent.stream("go") as run, anyio.create_task_group() as tg:
        seen: list[Event] = []
        tg.start_soon(_drain, run, seen)
        assert await run.settled() == []
    assert run.result.status == "completed"


async def test_a_clarifier_asking_before_the_work_settles_the_run() -> None:
    from hpd_agent.presets import Clarifier

    clarifier = Clarifier(
        ScriptedModel(
            [
                text('{"needs_clarification": true, "clarification_question": "Which colour?"}'),
                text('{"needs_clarification": false, "clarification_question": ""}'),
            ]
        )
    )
    inner = Agent("Inner", model=ScriptedModel([text("painted")]), clarifier=clarifier)
    root = Agent(
        "Root",
        model=ScriptedModel([tool_call("Inner", query="paint"), text("ok")]),
        tools=[inner.as_tool()],
    )
    async with root.stream("go") as run, anyio.create_task_group() as tg:
        seen: list[Event] = []
        tg.start_soon(_drain, run, seen)
        batch = await run.settled()
        assert [p.agent_path for p in batch] == [("Root", "Inner", "Clarifier")]
        await run.respond(batch[0].request_id, "blue")
        assert await run.settled() == []
    assert run.result.output == "ok"


async def test_settled_with_a_store(tmp_path: Path) -> None:
    gate = anyio.Event()
    asked: list[str] = []
    store = SQLiteStore(tmp_path / "s.db")
    try:
        run = _tree(gate, asked).stream("go", store=store)
        async with run, anyio.create_task_group() as tg:
            seen: list[Event] = []
            tg.start_soon(_drain, run, seen)
            gate.set()
            batch = await run.settled()
            assert sorted(_questions(batch)) == ["fast one?", "slow one?"]
            for p in batch:
                await run.respond(p.request_id, "x")
            batch = await run.settled()
            assert _questions(batch) == ["fast two after x?"]
            await run.respond(batch[0].request_id, "y")
            assert await run.settled() == []
        assert run.result.output == "all done"
    finally:
        await store.aclose()
