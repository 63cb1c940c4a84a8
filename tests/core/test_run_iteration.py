"""Iterating a ``Run``: buffered bursts come out whole and in order, and the loop stays a
cancellation point that lets other tasks run (``Run.__anext__`` skips the scheduler for
events already buffered)."""

from __future__ import annotations

import sys
from types import FrameType

import anyio
import anyio.lowlevel

from hpd_agent import Agent, Run, ask_user, tool
from hpd_agent.events import (
    ClarificationRequest,
    ClarificationResolved,
    Event,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from hpd_agent.testing import ScriptedModel, text, tool_call

_BODY = "".join(f"{i:04d}" for i in range(1000))  # 1000 pieces of 4 characters


def _talker() -> Agent:
    return Agent("Talker", model=ScriptedModel([text(_BODY)], chunk_size=4))


async def test_a_burst_of_buffered_events_arrives_whole_and_in_order() -> None:
    events: list[Event] = []
    with anyio.fail_after(5):
        async with _talker().stream("talk") as run:
            async for event in run:
                events.append(event)
    assert isinstance(events[0], RunStarted)
    assert isinstance(events[-1], RunFinished)
    pieces = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(pieces) == 1000
    assert "".join(pieces) == _BODY
    assert run.result.output == _BODY


async def test_iteration_is_a_cancellation_point_even_when_events_are_buffered() -> None:
    seen = 0
    with anyio.fail_after(5):
        async with _talker().stream("talk") as run:
            with anyio.CancelScope() as scope:
                async for _ in run:
                    seen += 1
                    if seen == 3:
                        scope.cancel()
            assert scope.cancelled_caught
    assert seen == 3


async def test_other_tasks_run_while_a_long_burst_is_consumed() -> None:
    ticks = 0
    ticks_during_burst: list[int] = []

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            async with _talker().stream("talk") as run:
                async for event in run:
                    if isinstance(event, TextDelta):
                        ticks_during_burst.append(ticks)
            tg.cancel_scope.cancel()
    assert len(ticks_during_burst) == 1000
    # the ticker advanced between the first and the last piece of the burst
    assert ticks_during_burst[-1] > ticks_during_burst[0]


async def test_a_streamed_run_reports_every_tool_call_and_text_piece() -> None:
    """Plain run() skips building these events (nobody sees them); a stream must not."""

    @tool
    async def echo(word: str) -> str:
        """Echo a word."""
        return word.upper()

    model = ScriptedModel(
        [[tool_call("echo", _id="a", word="hi"), tool_call("echo", _id="b", word="yo")], text("ok")]
    )
    agent = Agent("Echo", model=model, tools=[echo])
    with anyio.fail_after(5):
        async with agent.stream("go") as run:
            events = [event async for event in run]
    started = [(e.tool_call_id, e.arguments) for e in events if isinstance(e, ToolCallStarted)]
    finished = [(e.tool_call_id, e.result) for e in events if isinstance(e, ToolCallFinished)]
    assert started == [("a", {"word": "hi"}), ("b", {"word": "yo"})]
    assert finished == [("a", "HI"), ("b", "YO")]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ok"]


async def test_a_reader_with_nothing_buffered_waits_at_once_and_wakes_once() -> None:
    """No event buffered: ``__anext__`` waits for the next one without a trip through the
    loop first, and is resumed once, with the event (counted by its frame's resumptions)."""
    code = Run.__anext__.__code__
    steps = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal steps
        if event == "call" and frame.f_code is code:
            steps += 1

    async def answer_later(run: Run, request_id: str) -> None:
        for _ in range(3):
            await anyio.lowlevel.checkpoint()  # the reader waits meanwhile
        await run.respond(request_id, "Lisbon")

    agent = Agent("Asker", model=ScriptedModel([tool_call("ask_user", question="Where?"),
                                                text("done")]), tools=[ask_user()])  # fmt: skip
    with anyio.fail_after(5):
        async with agent.stream("go") as run:
            request = None
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    request = event
                    break
            assert request is not None and run.pending  # nothing more until it is answered
            resolved: Event | None = None
            async with anyio.create_task_group() as tg:
                tg.start_soon(answer_later, run, request.request_id)
                sys.setprofile(profile)
                try:
                    resolved = await run.__anext__()
                finally:
                    sys.setprofile(None)
            rest = [event async for event in run]
    assert isinstance(resolved, ClarificationResolved) and resolved.answer == "Lisbon"
    assert steps == 2  # called, then resumed with the event
    assert isinstance(rest[-1], RunFinished) and run.result.output == "done"


async def test_two_readers_share_the_events_each_once() -> None:
    """Readers iterating one run at once each take the events as they come, none twice,
    and both stop at its end."""
    taken: list[list[Event]] = [[], []]

    async def read(run: Run, mine: list[Event]) -> None:
        async for event in run:
            mine.append(event)
            await anyio.lowlevel.checkpoint()  # the other reader's turn

    with anyio.fail_after(5):
        async with _talker().stream("talk") as run, anyio.create_task_group() as tg:
            tg.start_soon(read, run, taken[0])
            tg.start_soon(read, run, taken[1])
    every = sorted(taken[0] + taken[1], key=id)
    # The run and its agent start, 1000 pieces, the agent and the run end: 1004 events.
    assert len(every) == len({id(e) for e in every}) == 1004
    pieces = [e.text for e in taken[0] + taken[1] if isinstance(e, TextDelta)]
    assert sorted(pieces) == sorted(f"{i:04d}" for i in range(1000))
