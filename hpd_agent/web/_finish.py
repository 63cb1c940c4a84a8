"""The events that close an AG-UI run from how its root run ended.

Snapshots first (the thread's state and messages), then exactly one terminal event: a
completed run is RUN_FINISHED with its output as ``result``; an interrupted one is
RUN_FINISHED with the interrupt outcome, one ``Interrupt`` per request pending in the store;
a cancelled one has the cancelled outcome; anything else is RUN_ERROR (its text what
``hpd_agent.hosting.outcome_of`` lets a client read).
"""

from __future__ import annotations

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StateSnapshotEvent,
)

from ..store import RequestRecord
from ._requests import interrupt_of

__all__ = ["finish_events"]


def finish_events(
    thread_id: str,
    messages: BaseEvent,
    agui_run_id: str,
    status: str,
    output: str | None,
    error: str | None,
    pending: list[RequestRecord],
) -> list[BaseEvent]:
    """STATE_SNAPSHOT, ``messages`` (the MESSAGES_SNAPSHOT) and the terminal event."""
    state = StateSnapshotEvent(
        snapshot={"hpd_agent": {"status": status, "pending": [r.request_id for r in pending]}}
    )
    out: list[BaseEvent] = [state, messages]
    tid, rid = thread_id, agui_run_id
    if status == "completed":
        outcome = RunFinishedSuccessOutcome()
        out.append(RunFinishedEvent(thread_id=tid, run_id=rid, result=output, outcome=outcome))
    elif status == "interrupted" and pending:
        interrupts: list[Interrupt] = [interrupt_of(record) for record in pending]
        outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        out.append(RunFinishedEvent(thread_id=tid, run_id=rid, outcome=outcome))
    elif status == "cancelled":
        out.append(
            RunFinishedEvent(thread_id=tid, run_id=rid, outcome=RunFinishedCancelledOutcome())
        )
    else:
        message = error or f"the run ended {status}"
        out.append(RunErrorEvent(message=message, code=status))
    return out
