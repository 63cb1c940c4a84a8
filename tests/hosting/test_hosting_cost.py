"""What hosting a run costs the event loop: a hosted run is driven in one task; starting it,
finding a live one again and taking its free lock take no trip through the loop; the end of
a run that returned its result is told as soon as its stream ends. A sink's write holds the
later events back (in order), not the run."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Sequence
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel
import pytest

from hpd_agent import Agent, Event, Run, RunFinished, ask_user
from hpd_agent.events import ClarificationRequest
from hpd_agent.hosting import HostedRun, Outcome, RunHost, drive
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text, tool_call

pytestmark = pytest.mark.anyio


def _reply(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    if isinstance(messages[-1], ToolResultMessage):
        return text(f"heard {messages[-1].content}")
    if messages[-1].content == "ask":
        return tool_call("ask_user", question="Which database?")
    return text("hello")


def _agent() -> Agent:
    return Agent("Echo", model=FunctionModel(_reply), tools=[ask_user()])


class _Turns:
    """Counts the event loop's turns: a task that checkpoints in a loop takes one step in
    each turn (nothing else runs here: the count is exact)."""

    def __init__(self) -> None:
        self.count = 0

    async def tick(self) -> None:
        while True:
            await anyio.lowlevel.checkpoint()
            self.count += 1


@asynccontextmanager
async def _host() -> AsyncGenerator[tuple[RunHost, _Turns]]:
    turns = _Turns()
    async with anyio.create_task_group() as tg:
        tg.start_soon(turns.tick)
        await anyio.lowlevel.checkpoint()  # the ticker runs
        yield RunHost(_agent(), None, tg, HostedRun), turns
        tg.cancel_scope.cancel()


async def test_a_hosted_run_starts_without_a_trip_through_the_event_loop() -> None:
    async with _host() as (host, turns):
        before = turns.count
        hosted = await host.start("hi")
        assert turns.count == before  # the run is driven from the next turn on
        outcome = await hosted.wait_settled()
    assert isinstance(outcome, Outcome) and outcome.output == "hello"


async def test_a_live_run_is_found_and_locked_without_a_trip_through_the_event_loop() -> None:
    async with _host() as (host, turns):
        hosted = await host.start("ask")
        await hosted.wait_settled()
        before = turns.count
        assert await host.reopen(hosted.run_id) is hosted
        async with hosted.lock:
            assert turns.count == before
        order: list[str] = []
        release = anyio.Event()

        async def hold(name: str) -> None:
            async with hosted.lock:
                order.append(name)
                if name == "first":
                    await release.wait()

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold, "first")
            while not order:
                await anyio.lowlevel.checkpoint()
            tg.start_soon(hold, "second")
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            assert order == ["first"]  # one holder at a time
            release.set()
        assert order == ["first", "second"]
        hosted.cancel_nowait()


async def test_a_run_that_ended_is_reported_without_a_trip_through_the_event_loop() -> None:
    """The report of an answered run (``wait_settled``) is woken by the run's end, by then
    told (``ended`` set): it returns the outcome at once, no further turn of the loop."""
    async with _host() as (host, turns):
        hosted = await host.start("ask")
        pending = await hosted.wait_settled()
        assert isinstance(pending, list)
        await hosted.run.respond(pending[0].request_id, "Postgres")
        outcome = await hosted.wait_settled()
        assert isinstance(outcome, Outcome) and outcome.output == "heard Postgres"
        before = turns.count
        assert await hosted.wait_settled() is outcome
        assert turns.count == before


class _Sink:
    """Notes the loop's turn at the run's last event and at its end."""

    def __init__(self, turns: _Turns) -> None:
        self.turns = turns
        self.last_event: int | None = None
        self.closed: int | None = None

    def take(self, event: Event) -> Awaitable[None] | None:
        if isinstance(event, RunFinished):
            self.last_event = self.turns.count
        return None

    async def close(self, outcome: Outcome, raised: Exception | None) -> None:
        assert outcome.status == "completed" and raised is None
        self.closed = self.turns.count


async def test_the_end_is_told_as_soon_as_the_runs_stream_ends() -> None:
    turns = _Turns()
    sink = _Sink(turns)
    told: list[int] = []

    async def closed() -> None:
        told.append(turns.count)

    async with anyio.create_task_group() as tg:
        tg.start_soon(turns.tick)
        await drive(_agent().stream("hi"), sink, closed=closed)
        tg.cancel_scope.cancel()
    assert sink.last_event is not None and sink.closed is not None
    # The run's task leaving its group takes two more turns: the end is not held for them.
    assert sink.closed - sink.last_event <= 1
    assert told == [sink.closed]


class _TaskOf(HostedRun):
    """Notes the task each event is taken in."""

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self.tasks: set[int] = set()

    def take(self, event: Event) -> Awaitable[None] | None:
        self.tasks.add(anyio.get_current_task().id)
        return super().take(event)


async def test_a_hosted_run_is_driven_in_one_task() -> None:
    """No task of the run's own beside the host's driver, no stream between them."""
    stepped: set[int] = set()

    def step(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        stepped.add(anyio.get_current_task().id)
        return text("hello")

    agent = Agent("Echo", model=FunctionModel(step))
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            hosted = await RunHost(agent, None, tg, _TaskOf).start("hi")
            await hosted.ended.wait()
            assert hosted.outcome.output == "hello"
            assert len(hosted.tasks) == 1 and hosted.tasks == stepped


class _Slow:
    """A sink whose first take waits (a write) until released; notes what it is told."""

    def __init__(self, fail: bool = False) -> None:
        self.release = anyio.Event()
        self.taken: list[Event] = []
        self.closed: tuple[Outcome, Exception | None] | None = None
        self.fail = fail

    def take(self, event: Event) -> Awaitable[None] | None:
        self.taken.append(event)
        return self._write() if len(self.taken) == 1 else None

    async def _write(self) -> None:
        await self.release.wait()
        if self.fail:
            raise OSError("the pipe broke")

    async def close(self, outcome: Outcome, raised: Exception | None) -> None:
        self.closed = (outcome, raised)


async def test_events_after_a_write_wait_their_turn_and_are_all_taken_before_the_end() -> None:
    sink = _Slow()
    run = _agent().stream("ask")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive, run, sink)
            await run.settled()  # the run went on while the first write waits
            assert [type(e).__name__ for e in sink.taken] == ["RunStarted"]
            (request,) = run.pending
            await run.respond(request.request_id, "Postgres")
            await run.wait()
            assert len(sink.taken) == 1 and sink.closed is None
            sink.release.set()
    assert sink.closed is not None and sink.closed[0].output == "heard Postgres"
    assert isinstance(sink.taken[-1], RunFinished)
    iterated: list[Event] = []
    async with _agent().stream("ask") as again:
        async for event in again:
            iterated.append(event)
            if isinstance(event, ClarificationRequest):
                await again.respond(event.request_id, "Postgres")
    assert [type(e) for e in sink.taken] == [type(e) for e in iterated]


async def test_a_write_that_fails_stops_the_run_and_the_sink_is_told() -> None:
    sink = _Slow(fail=True)
    run = _agent().stream("ask")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive, run, sink)
            await run.settled()
            sink.release.set()
            await run.wait()
    assert run.result.status == "cancelled"
    assert sink.closed is not None
    outcome, raised = sink.closed
    assert outcome.status == "failed" and isinstance(raised, OSError)
