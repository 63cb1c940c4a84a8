"""Driving a run for a server: ``drive`` hands each event to an ``EventSink``, then its end.

What every adapter does with a run it serves: enter it, take its events in order (record,
translate, send), and once it has ended say how (``Outcome``), even when the server is
shutting down. ``RunHost`` drives its runs with it (the sink records the events for
``HostedRun.events``); the web server drives each thread's run with a sink that turns the
events into AG-UI frames. The sink's ``take`` is a plain call: an event costs no coroutine
unless the sink has something to wait for.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from ..events import Event
from ..run import Run
from ._outcome import Outcome, outcome_of

__all__ = ["STOPPED", "EventSink", "drive"]

STOPPED = Outcome("failed")
"""The outcome a sink is told when the driving itself was cancelled (the server shutting
down): the run did not end on its own, and a stored one stays resumable."""


class EventSink(Protocol):
    """Where ``drive`` hands a run's events and its end."""

    def take(self, event: Event) -> Awaitable[None] | None:
        """One event of the run, in order. Return an awaitable when something must be
        waited for before the next event (a write); None otherwise."""
        ...

    async def close(self, outcome: Outcome, raised: Exception | None) -> None:
        """The run has ended (``outcome``; ``raised``: what leaving its block raised, e.g.
        the ``RunLeasedError`` of a run another process drives). Shielded from
        cancellation: what it writes is written even while the server shuts down."""
        ...


async def drive(
    run: Run,
    sink: EventSink,
    *,
    listening: bool = True,
    entered: Callable[[], object] | None = None,
    closed: Callable[[], Awaitable[None]] | None = None,
    task_group: TaskGroup | None = None,
) -> None:
    """Drive ``run`` to its end in this task, each event handed to ``sink``, then its end.

    The run is driven in the calling task (``Run.deliver``): each event reaches the sink as
    the run emits it, with no task of the run's own nor a stream between, and the sink is
    told the end as soon as the run has ended. A ``take`` that returns an awaitable is
    waited for in a task of ``task_group``'s (the events after it wait their turn, in
    order; the run goes on meanwhile), the last of them before the sink is closed.

    Args:
        run: The run (not entered yet).
        sink: Where its events and its end go.
        listening: False: nobody answers while it runs (``Run.stop_listening``): under
            ``on_unhandled="interrupt"`` a question ends it ``"interrupted"``.
        entered: Called as the run starts (e.g. ``task_status.started``).
        closed: Awaited right after ``sink.close``, shielded as it is (e.g. the host
            keeps the turn's messages, then tells whoever waits for the end).
        task_group: Where a ``take``'s awaitable is waited for (default: a task group of
            this call's own).
    """
    outcome, raised = STOPPED, None
    try:
        if task_group is not None:
            outcome, raised = await _deliver(run, sink, listening, entered, task_group)
        else:
            async with anyio.create_task_group() as own:
                outcome, raised = await _deliver(run, sink, listening, entered, own)
    finally:
        await _close(sink, outcome, raised, closed)


async def _deliver(
    run: Run,
    sink: EventSink,
    listening: bool,
    entered: Callable[[], object] | None,
    task_group: TaskGroup,
) -> tuple[Outcome, Exception | None]:
    """The run driven into ``sink`` (its takes waited for): how it ended, what it raised."""
    feed = _Feed(sink, run, task_group)
    try:
        if entered is not None:
            entered()
        if not listening:
            run.stop_listening()
        failed: Exception | None = None
        try:
            await run.deliver(feed.take)
        except Exception as e:  # the run failed, or lost its lease: once its events are out
            failed = e
        await feed.flushed()
        if failed is not None:
            raise failed
        return outcome_of(run.result), None
    except Exception as e:  # ... or the sink failed: the sink is told so
        own = run.done and run.result.error is e  # the run's own failure
        return (outcome_of(run.result) if own else Outcome.failed(e, run.run_id)), e


class _Feed:
    """Hands a run's events to a sink in order, waiting for what a ``take`` returns in a
    task of its own while later events queue (the run does not wait for the sink)."""

    __slots__ = ("backlog", "failure", "idle", "run", "sink", "task_group")

    def __init__(self, sink: EventSink, run: Run, task_group: TaskGroup) -> None:
        self.sink = sink
        self.run = run
        self.task_group = task_group
        self.backlog: deque[Event] | None = None
        """Events waiting for the write in progress; None when none is."""
        self.idle: anyio.Event | None = None
        self.failure: Exception | None = None

    def take(self, event: Event) -> None:
        backlog = self.backlog
        if backlog is not None:
            backlog.append(event)
            return
        waiting = self.sink.take(event)  # raising: the run stops (``Run.deliver``)
        if waiting is not None:
            self.backlog = deque()
            self.task_group.start_soon(self._flush, waiting)

    async def _flush(self, waiting: Awaitable[None]) -> None:
        backlog = self.backlog
        assert backlog is not None
        try:
            while True:
                await waiting
                next_wait = None
                while next_wait is None and backlog:
                    next_wait = self.sink.take(backlog.popleft())
                if next_wait is None:
                    break
                waiting = next_wait
            self.backlog = None
        except Exception as e:  # the sink failed: the run stops, later events go nowhere
            self.failure = e
            self.run.abandon()
        finally:
            idle = self.idle
            if idle is not None:
                idle.set()

    async def flushed(self) -> None:
        """Wait until every event taken is written; raise what writing one raised."""
        if self.backlog is not None and self.failure is None:
            idle = self.idle = anyio.Event()
            await idle.wait()
        if self.failure is not None:
            raise self.failure


async def _close(
    sink: EventSink,
    outcome: Outcome,
    raised: Exception | None,
    closed: Callable[[], Awaitable[None]] | None,
) -> None:
    with anyio.CancelScope(shield=True):
        await sink.close(outcome, raised)
        if closed is not None:
            await closed()
