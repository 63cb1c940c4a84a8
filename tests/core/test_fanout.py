"""The fan-out of a parallel batch: concurrency, order, isolation, failure and cancellation.

``map_concurrently`` starts calls inline and spawns a task only for calls that wait; these
tests pin down that nothing a caller can observe differs from one task per call.
"""

from __future__ import annotations

from contextvars import ContextVar

import anyio
import pytest

from hpd_agent import Agent, ask_user, tool
from hpd_agent._values.fanout import map_concurrently
from hpd_agent.events import ClarificationRequest, ToolCallStarted
from hpd_agent.messages import ToolResultMessage
from hpd_agent.testing import ScriptedModel, text, tool_call

_var: ContextVar[str] = ContextVar("test_fanout_var", default="unset")


async def test_results_keep_the_order_of_the_items_whether_calls_wait_or_not() -> None:
    async def call(i: int) -> int:
        if i % 3 == 0:
            await anyio.sleep(0.001 * (5 - i % 5))
        elif i % 3 == 1:
            await anyio.lowlevel.checkpoint()
        return i * 10

    assert await map_concurrently(call, list(range(12))) == [i * 10 for i in range(12)]


async def test_a_waiting_call_does_not_hold_up_the_calls_after_it() -> None:
    go = anyio.Event()
    log: list[str] = []

    async def call(i: int) -> str:
        if i == 0:
            await go.wait()  # set by the last call: would deadlock if run one after another
        if i == 2:
            go.set()
        log.append(f"end {i}")
        return str(i)

    with anyio.fail_after(5):
        assert await map_concurrently(call, [0, 1, 2]) == ["0", "1", "2"]
    assert log == ["end 1", "end 2", "end 0"]


async def test_every_waiting_call_is_in_flight_at_once() -> None:
    n = 50
    arrived = 0
    everyone = anyio.Event()

    async def call(i: int) -> int:
        nonlocal arrived
        arrived += 1
        if arrived == n:
            everyone.set()
        await everyone.wait()
        return i

    with anyio.fail_after(5):
        assert await map_concurrently(call, list(range(n))) == list(range(n))


async def test_calls_start_in_the_order_of_the_items() -> None:
    started: list[int] = []

    async def call(i: int) -> None:
        started.append(i)
        await anyio.lowlevel.checkpoint()

    await map_concurrently(call, list(range(20)))
    assert started == list(range(20))


async def test_calls_see_the_callers_contextvars_and_never_a_siblings() -> None:
    seen: list[str] = []

    async def call(i: int) -> None:
        seen.append(_var.get())
        _var.set(f"set by {i}")
        if i == 1:
            await anyio.lowlevel.checkpoint()
            assert _var.get() == "set by 1"  # still its own value after resuming

    token = _var.set("caller")
    try:
        await map_concurrently(call, [0, 1, 2])
        assert seen == ["caller", "caller", "caller"]  # the caller's value, no sibling's
        assert _var.get() == "caller"
    finally:
        _var.reset(token)


async def test_a_cancel_scope_opened_before_the_first_wait_works_after_it() -> None:
    async def call(i: int) -> str:
        with anyio.move_on_after(0.01) as scope:
            await anyio.sleep(10)
        with anyio.fail_after(5):
            await anyio.lowlevel.checkpoint()
        return f"{i}:{scope.cancelled_caught}"

    with anyio.fail_after(5):
        assert await map_concurrently(call, [0, 1]) == ["0:True", "1:True"]


async def test_a_failing_call_cancels_its_waiting_siblings_and_surfaces_its_error() -> None:
    cancelled: list[int] = []
    waiting = 0
    both_waiting = anyio.Event()

    async def call(i: int) -> None:
        nonlocal waiting
        if i < 2:
            try:
                waiting += 1
                if waiting == 2:
                    both_waiting.set()
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.append(i)
                raise
        await both_waiting.wait()
        raise ValueError("boom")

    with anyio.fail_after(5), pytest.raises(BaseExceptionGroup) as info:
        await map_concurrently(call, [0, 1, 2])
    assert info.group_contains(ValueError, match="boom")
    assert sorted(cancelled) == [0, 1]


async def test_an_error_before_any_wait_still_cancels_the_siblings_already_waiting() -> None:
    cancelled: list[int] = []

    async def call(i: int) -> None:
        if i == 0:
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.append(i)
                raise
        raise KeyError("no such thing")

    with anyio.fail_after(5), pytest.raises(BaseExceptionGroup) as info:
        await map_concurrently(call, [0, 1])
    assert info.group_contains(KeyError)
    assert cancelled == [0]


async def test_cancelling_the_caller_cancels_every_waiting_call() -> None:
    finished: list[int] = []
    waiting = 0
    all_waiting = anyio.Event()

    async def call(i: int) -> None:
        nonlocal waiting
        try:
            waiting += 1
            if waiting == 3:
                all_waiting.set()
            await anyio.sleep_forever()
        finally:
            finished.append(i)

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await map_concurrently(call, [0, 1, 2])

        tg.start_soon(run)
        with anyio.fail_after(5):
            await all_waiting.wait()
        tg.cancel_scope.cancel()
    assert sorted(finished) == [0, 1, 2]


# -- through the agent loop ------------------------------------------------------------------
async def test_parallel_tool_calls_of_one_turn_run_concurrently() -> None:
    """One call waits for a signal that only a later call of the same turn gives."""
    signal = anyio.Event()

    @tool
    async def wait_for_signal() -> str:
        """Waits."""
        await signal.wait()
        return "got it"

    @tool
    async def give_signal() -> str:
        """Signals."""
        signal.set()
        return "sent"

    model = ScriptedModel(
        [[tool_call("wait_for_signal", _id="a"), tool_call("give_signal", _id="b")], text("done")]
    )
    agent = Agent("A", model=model, tools=[wait_for_signal, give_signal])
    with anyio.fail_after(5):
        result = await agent.run("go")
    assert result.output == "done"
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(m.tool_call_id, m.content) for m in results] == [("a", "got it"), ("b", "sent")]


async def test_parallel_sub_agents_ask_at_once_and_are_answered_in_any_order() -> None:
    # One scripted model serves both sub-agents, in the order their requests arrive.
    shared = ScriptedModel(
        [
            tool_call("ask_user", question="first?"),
            tool_call("ask_user", question="second?"),
            text("one"),
            text("two"),
        ]
    )
    asker = Agent("Asker", model=shared, tools=[ask_user()])
    root = Agent(
        "Root",
        model=ScriptedModel(
            [
                [
                    tool_call("Asker", _id="x", query="q1"),
                    tool_call("Asker", _id="y", query="q2"),
                ],
                text("all done"),
            ]
        ),
        tools=[asker.as_tool()],
    )
    questions: list[ClarificationRequest] = []
    started: list[str] = []
    with anyio.fail_after(5):
        async with root.stream("go") as run:
            async for event in run:
                if isinstance(event, ToolCallStarted) and event.depth == 0:
                    started.append(event.tool_call_id)
                if isinstance(event, ClarificationRequest):
                    questions.append(event)
                    if len(questions) == 2:
                        # both wait at once; answer the second first
                        await run.respond(questions[1].request_id, "B")
                        await run.respond(questions[0].request_id, "A")
    assert started == ["x", "y"]
    assert [q.question for q in questions] == ["first?", "second?"]
    assert run.result.output == "all done"
    results = [m for m in run.result.messages if isinstance(m, ToolResultMessage)]
    assert [m.tool_call_id for m in results] == ["x", "y"]


async def test_a_call_cancelled_from_outside_never_leaves_a_hole_in_the_results() -> None:
    # The host worker finishes its own call and, in doing so, cancels an enclosing scope
    # (what an interrupt does once the run is quiescent), then does shielded work (a journal
    # write) while the sibling in the spawned worker ends by that cancellation. anyio's task
    # group then exits without raising; the batch must still not return a result list with
    # the cancelled sibling's slot empty.
    outer = anyio.CancelScope()
    returned: list[object] = []
    sibling_waiting = anyio.Event()
    sibling_gone = anyio.Event()

    async def call(i: int) -> str:
        if i == 0:
            await sibling_waiting.wait()
            outer.cancel()
            with anyio.CancelScope(shield=True):
                await sibling_gone.wait()
            return "host"
        try:
            sibling_waiting.set()
            await anyio.sleep_forever()
        finally:
            sibling_gone.set()
        return "never"

    with outer:
        returned.append(await map_concurrently(call, [0, 1]))
    assert outer.cancelled_caught
    assert returned == []
