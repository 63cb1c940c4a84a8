"""Driving a run for a server: ``drive`` hands each event to an ``EventSink``, then its end.

What every adapter does with a run it serves: enter it, take its events in order (record,
translate, send), and once it has ended say how (``Outcome``), even when the server is
shutting down. ``RunHost`` drives its runs with it (the sink records the events for
``HostedRun.events``); the web server drives each thread's run with a sink that turns the
events into AG-UI frames. The sink's ``take`` is a plain call: an event costs no coroutine
unless the sink has something to wait for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio

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
) -> None:
    """Drive ``run`` to its end, each event handed to ``sink``, then its outcome.

    The sink is told the end of a run that returned its result as soon as its stream has
    ended, not once the run's task has left too: that cost whoever waits for the end (the
    client's reply) two trips to the event loop.

    Args:
        run: The run (not entered yet).
        sink: Where its events and its end go.
        listening: False: nobody answers while it runs (``Run.stop_listening``): under
            ``on_unhandled="interrupt"`` a question ends it ``"interrupted"``.
        entered: Called once the run has started (e.g. ``task_status.started``).
        closed: Awaited right after ``sink.close``, shielded as it is (e.g. the host
            keeps the turn's messages, then tells whoever waits for the end).
    """
    outcome, raised, told = STOPPED, None, False
    try:
        async with run:
            if entered is not None:
                entered()
            if not listening:
                run.stop_listening()
            async for event in run:
                waiting = sink.take(event)
                if waiting is not None:
                    await waiting
            result = run.result
            error = result.error
            # A run that returned its result (a cancelled one may instead leave raising,
            # e.g. ``RunLeasedError``: told once it has) re-raises only ``error`` as it
            # leaves: its end is told now.
            if result.status != "cancelled" and (error is None or isinstance(error, Exception)):
                told = True
                await _close(sink, outcome_of(result), error, closed)
        outcome = outcome_of(run.result)
    except Exception as e:  # the run failed, or lost its lease: the sink says so
        if told:
            if run.result.error is e:
                return
            raise  # the sink's or ``closed``'s own failure
        raised = e
        own = run.done and run.result.error is e  # its failure, raised as it leaves
        outcome = outcome_of(run.result) if own else Outcome.failed(e, run.run_id)
    finally:
        if not told:
            await _close(sink, outcome, raised, closed)


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
