"""``Agent.run`` hands back the coroutine that runs the run (no frame of its own is kept for
the run's life, docs/performance.md "Ninth pass"): to the caller it is still what awaiting a
coroutine function gives, its errors raised when awaited, never when called."""

from __future__ import annotations

import inspect

import anyio
import pytest

from hpd_agent import Agent, UserError, tool
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


def _agent(answer: str = "done") -> Agent:
    return Agent("Plain", model=ScriptedModel([text(answer)]))


async def test_run_gives_a_coroutine_that_runs_once_awaited() -> None:
    agent = _agent()
    started = agent.run("go")
    assert inspect.iscoroutine(started)  # asyncio.create_task, anyio's start_soon take it
    assert (await started).output == "done"


async def test_a_task_group_runs_agent_run_as_its_task_function() -> None:
    outputs: list[str] = []

    async def one(agent: Agent) -> None:
        outputs.append((await agent.run("go")).output)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, _agent("a"))
        tg.start_soon(one, _agent("b"))
    assert sorted(outputs) == ["a", "b"]


async def test_a_refused_option_raises_when_awaited_not_when_called() -> None:
    started = _agent().run("go", durability="sync")  # durability= needs a store
    with pytest.raises(UserError, match="durability"):
        await started


async def test_a_nested_run_refuses_its_own_handler_when_awaited() -> None:
    inner = _agent("inner")
    seen: list[str] = []

    @tool
    async def delegate() -> str:
        """Runs the inner agent with options a nested run may not take."""
        started = inner.run("q", hooks=[object()])  # type: ignore[list-item]
        seen.append("called")  # calling did not raise
        try:
            await started
        except UserError as e:
            return f"refused: {e}"
        return "ran"

    outer = Agent(
        "Outer",
        model=ScriptedModel([tool_call("delegate"), text("outer")]),
        tools=[delegate],
    )
    result = await outer.run("go")
    assert result.output == "outer" and seen == ["called"]
    tool_message = next(m for m in result.messages if m.kind == "tool")
    assert "refused:" in str(tool_message.content) and "nested run" in str(tool_message.content)
