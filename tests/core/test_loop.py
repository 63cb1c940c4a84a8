"""The agent loop: turns, the concurrent tool batch, errors as results, limits, timeouts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from trio.testing import MockClock

from hpd_agent import (
    Agent,
    ClarificationRequest,
    MaxTurnsExceededError,
    ToolCallFinished,
    ToolCallStarted,
    ask_user,
    tool,
)
from hpd_agent.messages import AssistantMessage, ToolResultMessage
from hpd_agent.testing import FunctionModel, ScriptedModel, text, tool_call


def results_of(model: ScriptedModel, request_index: int) -> list[ToolResultMessage]:
    return [m for m in model.requests[request_index] if isinstance(m, ToolResultMessage)]


async def test_parallel_calls_run_concurrently() -> None:
    # Each tool waits for the other to start: only a concurrent batch can finish.
    started = {"a": anyio.Event(), "b": anyio.Event()}

    @tool
    async def meet(me: str, other: str) -> str:
        """Rendezvous."""
        started[me].set()
        with anyio.fail_after(5):
            await started[other].wait()
        return f"{me} met {other}"

    model = ScriptedModel(
        [[tool_call("meet", me="a", other="b"), tool_call("meet", me="b", other="a")], text("ok")]
    )
    await Agent("A", model=model, tools=[meet]).run("go")
    assert [r.content for r in results_of(model, 1)] == ["a met b", "b met a"]


async def test_results_keyed_by_call_id_in_model_order() -> None:
    order: list[str] = []
    gate = anyio.Event()

    @tool
    async def slow() -> str:
        """Finishes last."""
        await gate.wait()
        order.append("slow")
        return "slow result"

    @tool
    async def fast() -> str:
        """Finishes first."""
        order.append("fast")
        gate.set()
        return "fast result"

    model = ScriptedModel([[tool_call("slow", _id="s1"), tool_call("fast", _id="f1")], text("ok")])
    await Agent("A", model=model, tools=[slow, fast]).run("go")
    assert order == ["fast", "slow"]
    assert [(r.tool_call_id, r.content) for r in results_of(model, 1)] == [
        ("s1", "slow result"),
        ("f1", "fast result"),
    ]


async def test_one_tool_failing_does_not_cancel_siblings() -> None:
    gate = anyio.Event()

    @tool
    async def boom() -> str:
        """Fails."""
        gate.set()
        raise RuntimeError("disk on fire")

    @tool
    async def steady() -> str:
        """Waits for the failure, then succeeds."""
        await gate.wait()
        await anyio.lowlevel.checkpoint()
        return "still here"

    model = ScriptedModel([[tool_call("boom"), tool_call("steady")], text("ok")])
    result = await Agent("A", model=model, tools=[boom, steady]).run("go")
    assert result.output == "ok"
    boom_result, steady_result = results_of(model, 1)
    assert boom_result.is_error and boom_result.content == "Error: RuntimeError: disk on fire"
    assert not steady_result.is_error and steady_result.content == "still here"


async def test_unknown_tool_and_bad_arguments_become_results() -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    model = ScriptedModel(
        [
            [
                tool_call("nope"),
                tool_call("add", _raw='{"a": 1, "b": '),
                tool_call("add", a="x", b=2),
                tool_call("add", a=1, b=2),
            ],
            text("ok"),
        ]
    )
    result = await Agent("A", model=model, tools=[add]).run("go")
    assert result.output == "ok"
    unknown, malformed, invalid, good = results_of(model, 1)
    assert unknown.is_error and unknown.content == "Unknown tool 'nope'. Available tools: add."
    assert malformed.is_error and "Invalid arguments for tool 'add'" in malformed.content
    assert invalid.is_error and "a: Input should be a valid integer" in invalid.content
    assert not good.is_error and good.content == "3"


async def test_max_turns_is_a_clear_error() -> None:
    model = ScriptedModel([tool_call("ask_user", question="?")] * 3)
    agent = Agent("Looper", model=model, tools=[ask_user()], max_turns=3)
    with pytest.raises(MaxTurnsExceededError, match="max_turns=3"):
        await agent.run("go")
    model.assert_complete()


async def test_missing_and_duplicate_call_ids_are_made_unique() -> None:
    @tool
    async def echo(x: int) -> int:
        """Echo."""
        return x

    model = ScriptedModel(
        [[tool_call("echo", _id="dup", x=1), tool_call("echo", _id="dup", x=2)], text("ok")]
    )
    await Agent("A", model=model, tools=[echo]).run("go")
    assistant = model.requests[1][-3]
    assert isinstance(assistant, AssistantMessage)
    ids = [c.id for c in assistant.tool_calls]
    assert len(set(ids)) == 2
    assert [(r.tool_call_id, r.content) for r in results_of(model, 1)] == list(
        zip(ids, ["1", "2"], strict=True)
    )


async def test_tool_timeout_becomes_error_result() -> None:
    @tool(timeout=0.05)
    async def hang() -> str:
        """Never returns."""
        await anyio.sleep_forever()
        return "unreachable"

    model = ScriptedModel([tool_call("hang"), text("ok")])
    await Agent("A", model=model, tools=[hang]).run("go")
    (r,) = results_of(model, 1)
    assert r.is_error and r.content == "Error: tool 'hang' timed out after 0.05 seconds."


# Virtual time that jumps as soon as every task is blocked: clock-based semantics are tested
# deterministically, with no real waiting.
@pytest.mark.parametrize(
    "anyio_backend",
    [pytest.param(("trio", {"clock": MockClock(autojump_threshold=0)}), id="trio-mockclock")],
)
async def test_time_waiting_for_the_human_does_not_count_against_tool_timeouts(
    anyio_backend: object,
) -> None:
    # The sub-agent's tool budget is 0.2 s; the human answers only after 10 s have passed on
    # the (virtual) clock. The question must still get through and the call succeed.
    sub = Agent(
        "Sub",
        model=ScriptedModel([tool_call("ask_user", question="Go?"), text("sub finished")]),
        tools=[ask_user()],
    )
    model = ScriptedModel([tool_call("Sub", query="q"), text("ok")])
    root = Agent("Root", model=model, tools=[sub.as_tool(timeout=0.2)])
    async with root.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                before = anyio.current_time()
                await anyio.sleep(10)  # virtual time: the clock jumps, nothing really waits
                assert anyio.current_time() - before >= 10
                await run.respond(event.request_id, "yes")
    (r,) = results_of(model, 1)
    assert not r.is_error and r.content == "sub finished"


async def test_tool_events_wrap_each_call() -> None:
    @tool
    async def echo(x: int) -> int:
        """Echo."""
        return x

    agent = Agent(
        "A", model=ScriptedModel([tool_call("echo", _id="c9", x=7), text("ok")]), tools=[echo]
    )
    kinds: list[tuple[str, object]] = []
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ToolCallStarted):
                kinds.append(("started", event.arguments))
            elif isinstance(event, ToolCallFinished):
                kinds.append(("finished", event.result))
    assert kinds == [("started", {"x": 7}), ("finished", "7")]


# -- hostile tool arguments and huge errors (a real SQLite store must take every write) ------
_NESTED = '{"value": ' + "[" * 100_000 + "]" * 100_000 + "}"
_HOSTILE_ARGUMENTS = {
    "deeply nested": (_NESTED, "recursion limit"),
    "huge": ('{"value": "' + "a" * 1_100_000 + '"}', "more than the 1,000,000 allowed"),
    "escaped lone surrogate": ('{"value": "\\ud800"}', "lone UTF-16 surrogate"),
    "raw lone surrogate": ('{"value": "\ud800"}', "lone UTF-16 surrogate"),
}


@pytest.mark.parametrize("validated", [True, False], ids=["signature", "raw-schema"])
@pytest.mark.parametrize("case", list(_HOSTILE_ARGUMENTS))
async def test_hostile_arguments_give_that_call_an_error_result(
    case: str, validated: bool, tmp_path: Path
) -> None:
    from hpd_agent import Tool
    from hpd_agent.store import SQLiteStore

    calls: list[object] = []

    def take(value: Any = None) -> str:
        calls.append(value)
        return "took it"

    hostile = Tool(take, parameters=None if validated else {"type": "object"})
    raw, why = _HOSTILE_ARGUMENTS[case]
    model = ScriptedModel(
        [[tool_call("take", _id="bad", _raw=raw), tool_call("take", _id="ok")], text("done")]
    )
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        result = await Agent("A", model=model, tools=[hostile]).run("go", store=store)
        assert result.status == "completed" and result.output == "done"
        bad, ok = results_of(model, 1)
        assert bad.is_error and why in bad.content and len(bad.content) < 5_000
        assert not ok.is_error and ok.content == "took it"
        assert calls == [None]  # the hostile call never reached the function
        journal = await store.journal(result.run_id)
        recorded = [e.value for k, e in journal.items() if k.endswith(":bad")]
        assert recorded and why in str(recorded[0])
    finally:
        await store.aclose()


async def test_a_5mb_exception_message_is_bounded_everywhere(tmp_path: Path) -> None:
    from hpd_agent import AgentFinished
    from hpd_agent.store import SQLiteStore

    @tool
    def boom() -> str:
        """Fails loudly."""
        raise ValueError("x" * 5_000_000)

    root_model = ScriptedModel([tool_call("boom"), tool_call("Sub", query="q"), text("done")])

    async def failing(*_: object) -> str:
        raise RuntimeError("y" * 5_000_000)

    sub = Agent("Sub", model=FunctionModel(failing), tools=[boom])
    root = Agent("Root", model=root_model, tools=[boom, sub.as_tool()])
    store = SQLiteStore(tmp_path / "runs.db")
    finished: list[AgentFinished] = []
    try:
        async with root.stream("go", store=store) as run:
            async for event in run:
                if isinstance(event, AgentFinished) and event.error:
                    finished.append(event)
        boom_result, sub_result = results_of(root_model, 1)[0], results_of(root_model, 2)[0]
        note = "... [truncated 4,996,"
        assert boom_result.is_error and note in boom_result.content
        assert len(boom_result.content) < 5_000
        assert sub_result.is_error and note in sub_result.content
        (sub_finished,) = finished
        assert sub_finished.error is not None and len(sub_finished.error) < 5_000
        assert sub_finished.error.endswith("characters]")
        journal = await store.journal(run.run_id)
        assert all(len(str(e.value)) < 10_000 for e in journal.values())
    finally:
        await store.aclose()
