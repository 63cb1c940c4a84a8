"""``Agent.run_sync``: a run from plain synchronous code; refused where it cannot work."""

from __future__ import annotations

import pytest

from hpd_agent import Agent, MaxTurnsExceededError, ToolContext, UserError, ask_user, tool
from hpd_agent.messages import ToolResultMessage
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call


def test_run_sync_runs_to_the_final_answer() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: First.
            b: Second.
        """
        return a + b

    model = ScriptedModel([tool_call("add", a=2, b=3), text("5")])
    agent = Agent("Calc", model=model, tools=[add])
    result = agent.run_sync("2 + 3?")
    assert result.status == "completed"
    assert result.output == "5"
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [m.content for m in results] == ["5"]
    model.assert_complete()


def test_run_sync_takes_the_arguments_of_run() -> None:
    model = ScriptedModel([text("first"), tool_call("ask_user", question="Name?"), text("ok")])
    agent = Agent("Helper", model=model, tools=[ask_user()])
    first = agent.run_sync("hello", run_id="run_sync_1")
    assert first.run_id == "run_sync_1"
    human = ScriptedHuman({"name": "Ada"})
    second = agent.run_sync("again", history=first.messages, handler=human)
    assert second.output == "ok"
    assert [getattr(r, "question", None) for r in human.asked] == ["Name?"]
    # The second run continued the first conversation.
    assert [m.content for m in model.requests[1] if m.kind == "user"] == ["hello", "again"]


def test_run_sync_raises_what_the_run_raises() -> None:
    agent = Agent(
        "Loop", model=ScriptedModel([tool_call("nothing"), tool_call("nothing")]), max_turns=1
    )
    with pytest.raises(MaxTurnsExceededError):
        agent.run_sync("go")


@pytest.mark.anyio
async def test_run_sync_is_refused_inside_a_running_event_loop(anyio_backend: str) -> None:
    agent = Agent("Quiet", model=ScriptedModel([text("never")]))
    with pytest.raises(UserError) as caught:
        agent.run_sync("go")
    message = str(caught.value)
    assert f"running {anyio_backend} event loop" in message
    assert "await agent.run(...)" in message
    # Nothing ran: the script is untouched and still usable with await.
    assert (await agent.run("go")).output == "never"


@pytest.mark.anyio
async def test_run_sync_is_refused_inside_a_tool_call() -> None:
    inner = Agent("Inner", model=ScriptedModel([text("inner answer")]))

    @tool
    async def delegate_async(ctx: ToolContext) -> str:
        """Ask the inner agent."""
        return inner.run_sync("hi").output

    @tool
    def delegate_sync(ctx: ToolContext) -> str:
        """Ask the inner agent from a worker thread."""
        return inner.run_sync("hi").output

    outer = Agent(
        "Outer",
        model=ScriptedModel(
            [[tool_call("delegate_async"), tool_call("delegate_sync")], text("done")]
        ),
        tools=[delegate_async, delegate_sync],
    )
    result = await outer.run("go")
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 2
    for r in results:
        assert r.is_error
        assert "run_sync() of agent 'Inner' inside a tool call" in r.content
        assert "await agent.run(...)" in r.content
    assert inner.model.remaining == 1  # type: ignore[attr-defined]
