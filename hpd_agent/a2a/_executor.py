"""``AgentRunner``: the a2a-sdk ``AgentExecutor`` that drives the served agent's runs.

A message with no task starts a run (its id is the task's); a message in a task answers one
of the run's pending requests (the one its metadata ``request_id`` names, else the oldest).
Either way the execution then waits until the run settles (``Run.settled``: every live
branch waits for a human) or ends, and reports it:

- settled: ``TASK_STATE_INPUT_REQUIRED``, the status message asking the oldest pending
  question (or the one whose answer was just refused, saying why), its metadata describing
  it and listing every pending one under ``"requests"`` (see ``_pending``);
- completed: an artifact holding the output, then ``TASK_STATE_COMPLETED``;
- failed / cancelled: ``TASK_STATE_FAILED`` / ``TASK_STATE_CANCELED`` saying why.

Two answers sent at once to one question: the SDK runs their executions one after the
other, so the second may find the task ended by the first (the run completed on its
answer). It is refused (``UnsupportedOperationError``, as the SDK refuses a message to an
ended task): the task keeps the state the first gave it, the second answer is not used.

No ``TASK_STATE_WORKING`` is sent in between: the run's own steps are not A2A events, and
each status costs the client a read (a task goes submitted, input-required..., completed).

The run lives in the server's task group, not in the execution: the execution ending (the
task waits for input) leaves the run waiting for its answer.
"""

from __future__ import annotations

from collections.abc import Callable

from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message
from a2a.utils.errors import UnsupportedOperationError

from ..events import RequestEvent
from ..hosting import UnknownRunError
from ..run import RunResult, finished_event
from ..store import RunRecord
from ._pending import answer_of, describe, message_metadata, shown
from ._runs import ServedRun, ServedRuns
from ._wire import TERMINAL, state_name

__all__ = ["AgentRunner"]


class AgentRunner(AgentExecutor):
    """Drives the served agent's runs (see the module's docstring).

    Args:
        runs: The server's runs (they exist once the server has started).
    """

    def __init__(self, runs: Callable[[], ServedRuns]) -> None:
        self._runs = runs

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start a run or answer one of its requests, then report where it stopped."""
        message = context.message
        assert message is not None  # the SDK executes messages only
        runs = self._runs()
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            served = await runs.start(context.get_user_input(), task.id)
            await self._report(served, updater, None)
            return
        if task.status.state in TERMINAL:
            # Sent at once with the answer that ended it: the SDK ran this one after.
            raise UnsupportedOperationError(
                f"task {task.id} already ended ({state_name(task.status.state)}): another "
                "message answered it first, this one was not used"
            )
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        try:
            found = await runs.reopen(task.id)
        except UnknownRunError:
            await updater.failed(
                _said(updater, "this server no longer has the run of this task "
                      "(it ended, or the server restarted without a store)")
            )  # fmt: skip
            return
        if isinstance(found, RunRecord):
            await _recorded(found, updater)
            return
        focus = await _answer(found, message)
        await self._report(found, updater, focus)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The task is being canceled: its run goes no further."""
        if context.task_id:
            await self._runs().cancel(context.task_id)

    async def _report(self, served: ServedRun, updater: TaskUpdater, focus: str | None) -> None:
        stop = await served.stop()
        if isinstance(stop, RunResult):
            if self._runs().was_cancelled(served.run_id):
                return  # the SDK records the cancellation it was asked for
            await _finished(stop, self._runs().agent.name, updater)
            return
        await updater.requires_input(_asking(served, stop, focus, updater))


async def _answer(served: ServedRun, message: Message) -> str | None:
    """Give the run the message's answer; the request asked again (refused), if any."""
    async with served.lock:
        pending = await served.run.settled()  # a resumed run first reaches its questions
        if not pending:
            return None  # it ended meanwhile: the report says how
        named = message_metadata(message).get("request_id")
        request = pending[0]
        if isinstance(named, str) and named:
            match = [r for r in pending if r.request_id == named]
            if not match:
                if named not in served.answered:
                    served.notes[request.request_id] = (
                        f"no question with request_id {shown(named)} is pending in this task"
                    )
                return None  # an answer sent twice counts once
            request = match[0]
        note = await _respond(served, request, message)
        if note is not None:
            served.notes[request.request_id] = note
            return request.request_id
        served.answered.add(request.request_id)
    return None


async def _respond(served: ServedRun, request: RequestEvent, message: Message) -> str | None:
    """None when the run took the answer, else why not."""
    return await served.answer(request.request_id, lambda: answer_of(request, message))


def _asking(
    served: ServedRun, pending: list[RequestEvent], focus: str | None, updater: TaskUpdater
) -> Message:
    entries = [describe(r, served.notes.pop(r.request_id, None)) for r in pending]
    first = next((e for e in entries if e["request_id"] == focus), entries[0])
    metadata = {k: v for k, v in first.items() if k != "question"}
    metadata["requests"] = entries
    return updater.new_agent_message([new_text_part(first["question"])], metadata=metadata)


def _said(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([new_text_part(text)])


async def _finished(result: RunResult, agent_name: str, updater: TaskUpdater) -> None:
    finished = finished_event(result, agent_name)
    if result.status == "completed":
        await updater.add_artifact([new_text_part(finished.output or "")], name="output")
        await updater.complete()
    elif result.status == "cancelled":
        await updater.cancel(_said(updater, "the run was cancelled"))
    else:
        await updater.failed(
            _said(updater, f"the run {result.status}: {finished.error or 'no output'}")
        )


async def _recorded(record: RunRecord, updater: TaskUpdater) -> None:
    """Report a stored run that ended before this message came."""
    if record.status == "completed":
        await updater.add_artifact([new_text_part(record.output or "")], name="output")
        await updater.complete()
    else:
        await updater.failed(
            _said(updater, f"the run {record.status}: {record.error or 'no output'}")
        )
