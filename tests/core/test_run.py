"""The Run handle: iteration, results, cancellation of the whole tree, nobody listening."""

from __future__ import annotations

import anyio
import pytest

from hpd_agent import (
    Agent,
    AgentFinished,
    ClarificationRequest,
    ClarificationResolved,
    Event,
    MaxTurnsExceededError,
    RunFinished,
    RunNotFinishedError,
    ask_user,
    tool,
)
from hpd_agent.testing import ScriptedModel, text, tool_call


def deep_asker() -> Agent:
    leaf = Agent(
        "Leaf",
        model=ScriptedModel([tool_call("ask_user", question="Deep?"), text("leaf")]),
        tools=[ask_user()],
    )
    mid = Agent(
        "Mid",
        model=ScriptedModel([tool_call("Leaf", query="q"), text("mid")]),
        tools=[leaf.as_tool()],
    )
    return Agent(
        "Root",
        model=ScriptedModel([tool_call("Mid", query="q"), text("root")]),
        tools=[mid.as_tool()],
    )


async def test_cancel_ends_the_whole_tree_and_pending_requests() -> None:
    events: list[Event] = []
    async with deep_asker().stream("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ClarificationRequest):
                run.cancel()
    assert run.result.status == "cancelled"
    assert run.done
    resolved = [e for e in events if isinstance(e, ClarificationResolved)]
    assert [(e.status, e.agent_path) for e in resolved] == [("cancelled", ("Root", "Mid", "Leaf"))]
    cancelled = [e.agent_path for e in events if isinstance(e, AgentFinished)]
    assert cancelled == [("Root", "Mid", "Leaf"), ("Root", "Mid"), ("Root",)]
    assert all(e.status == "cancelled" for e in events if isinstance(e, AgentFinished))
    last = events[-1]
    assert isinstance(last, RunFinished) and last.status == "cancelled"


async def test_leaving_the_block_early_cancels_and_no_task_outlives_the_run() -> None:
    cleaned_up = anyio.Event()

    @tool
    async def forever() -> str:
        """Never ends by itself."""
        try:
            await anyio.sleep_forever()
        finally:
            cleaned_up.set()
        return "unreachable"

    agent = Agent("A", model=ScriptedModel([tool_call("forever")]), tools=[forever])
    async with agent.stream("go") as run:
        async for event in run:
            if event.kind == "tool_call_started":
                break
    # The tool's task was cancelled and finished before the block was left.
    assert cleaned_up.is_set()
    assert run.result.status == "cancelled"


async def test_result_before_the_end_is_a_user_error() -> None:
    agent = Agent(
        "A",
        model=ScriptedModel([tool_call("ask_user", question="?"), text("x")]),
        tools=[ask_user()],
    )
    async with agent.stream("go") as run:
        with pytest.raises(RunNotFinishedError):
            _ = run.result
        async for event in run:
            if isinstance(event, ClarificationRequest):
                await run.respond(event.request_id, "a")
    assert run.result.output == "x"


async def test_wait_without_iterating_never_hangs() -> None:
    model = ScriptedModel([tool_call("ask_user", question="Anyone?"), text("went on alone")])
    agent = Agent("A", model=model, tools=[ask_user()])
    async with agent.stream("go") as run:
        result = await run.wait()
    assert result.output == "went on alone"
    assert "No user is available" in model.requests[1][-1].content  # type: ignore[union-attr]


async def test_failed_run_reports_and_raises_at_block_exit() -> None:
    agent = Agent(
        "A",
        model=ScriptedModel([tool_call("ask_user", question="?")]),
        tools=[ask_user()],
        max_turns=1,
    )
    events: list[Event] = []
    with pytest.raises(MaxTurnsExceededError):
        async with agent.stream("go") as run:
            async for event in run:
                events.append(event)
                if isinstance(event, ClarificationRequest):
                    await run.respond(event.request_id, "a")
    last = events[-1]
    assert isinstance(last, RunFinished) and last.status == "failed"
    assert last.error is not None and "MaxTurnsExceededError" in last.error
    assert run.result.status == "failed"


async def test_usage_adds_up_over_the_tree() -> None:
    sub = Agent("Sub", model=ScriptedModel([text("s", input_tokens=10, output_tokens=2)]))
    root = Agent(
        "Root",
        model=ScriptedModel(
            [tool_call("Sub", query="q"), text("r", input_tokens=5, output_tokens=1)]
        ),
        tools=[sub.as_tool()],
    )
    result = await root.run("go")
    assert (result.usage.requests, result.usage.input_tokens, result.usage.output_tokens) == (
        3,
        15,
        3,
    )


async def test_body_exception_cancels_the_run_and_propagates() -> None:
    agent = Agent(
        "A",
        model=ScriptedModel([tool_call("ask_user", question="?"), text("x")]),
        tools=[ask_user()],
    )
    with pytest.raises(KeyError):
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    raise KeyError("app bug")
    assert run.result.status == "cancelled"
