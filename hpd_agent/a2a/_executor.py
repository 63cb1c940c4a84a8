"""``AgentRunner``: the a2a-sdk ``AgentExecutor`` that drives the served agent's runs.

A message with no task starts a run (its id is the task's), the next turn of the task's
context (``_contexts``: refused while the context's last task still works or waits for
input); a message in a task answers one of the run's pending requests (the one its
metadata ``request_id`` names, else the oldest).
Either way the execution then waits until the run settles (``Run.settled``: every live
branch waits for a human) or ends, and reports it:

- settled: ``TASK_STATE_INPUT_REQUIRED``, the status message asking the oldest pending
  question (or the one whose answer was just refused, saying why), its metadata describing
  it and listing every pending one under ``"requests"`` (see ``_pending``);
- completed: an artifact holding the output, then ``TASK_STATE_COMPLETED``;
- failed / cancelled: ``TASK_STATE_FAILED`` / ``TASK_STATE_CANCELED`` saying why (a
  failure as ``hpd_agent.hosting.public_error`` words it).

Two answers sent at once to one question: the SDK runs their executions one after the
other, so the second may find the task ended by the first (the run completed on its
answer). It is refused (``UnsupportedOperationError``, as the SDK refuses a message to an
ended task): the task keeps the state the first gave it, the second answer is not used.

No ``TASK_STATE_WORKING`` is sent in between: the run's own steps are not A2A events, and
each status costs the client a read (a task goes submitted, input-required..., completed).

The run lives in the server's task group, not in the execution: the execution ending (the
task waits for input) leaves the run waiting for its answer.

Several servers on one store: a message reaching a server that does not drive the task's run
(another server holds its lease: ``HostedRun.elsewhere``) is answered all the same. Its
answer is given through the store (``hpd_agent.hosting.StoreRelay``), then the run is
followed in the store until it moves on: it ended (reported from its record), or asks
something new (``input-required`` with every question pending in the store; a refused
answer's question is asked again at once, with the reason). If the server driving it died
meanwhile, the run is resumed here and reported as above. A run this server loses to another
process on the way is followed the same way. A client never reads who drives a run: its failure
is worded by ``hpd_agent.hosting.public_error``, and an error the server did not expect is
logged and answered as JSON-RPC ``Internal server error``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import TaskUpdater
from a2a.types import Message
from a2a.utils.errors import UnsupportedOperationError

from ..backend import AnswerPolicy
from ..events import RequestEvent
from ..hosting import IDENTITY, LOCAL, Outcome, StoreRelay, UnknownRunError, outcome_of
from ..store import RunRecord
from ._answers import Driven, answer
from ._contexts import conversation_of
from ._pending import describe
from ._runs import ServedRun, ServedRuns
from ._unexpected import unexpected
from ._wire import TERMINAL, state_name

__all__ = ["AgentRunner"]


class AgentRunner(AgentExecutor):
    """Drives the served agent's runs (see the module's docstring).

    Args:
        runs: The server's runs (they exist once the server has started).
    """

    def __init__(self, runs: Callable[[], ServedRuns], policy: AnswerPolicy | None = None) -> None:
        self._runs = runs
        self.policy = policy
        """Who may answer which request (``create_app(policy=...)``)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start a run or answer one of its requests, then report where it stopped."""
        await unexpected(lambda: self._execute(context, event_queue), "take a message")

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The task is being canceled: its run goes no further, wherever it is driven."""
        task_id = context.task_id
        if task_id:
            await unexpected(lambda: self._runs().cancel(task_id), "cancel a task")

    async def _execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None  # the SDK executes messages only
        runs = self._runs()
        task = context.current_task
        if task is None:
            await self._begin(context, message, event_queue)
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
            await _finished(outcome_of(found), updater)
            return
        if not await found.run.settled() and not found.ended.is_set():
            await found.ended.wait()  # a resumed run reaches its questions, or ends
        by = caller_name(context)
        if found.elsewhere:
            await self._relay(found.run_id, updater, message, by)
            return
        async with found.lock:
            focus = await answer(
                Driven(found, runs.store, runs.activity), message, by=by, policy=self.policy
            )
        await self._report(found, updater, focus)

    async def _begin(
        self, context: RequestContext, message: Message, event_queue: EventQueue
    ) -> None:
        """A new task: its run the next turn of the task's context (refused, no task made,
        while the context's last task still works or waits for input)."""
        task = new_task_from_user_message(message)
        owner = resolve_user_scope(context.call_context)
        conversation = conversation_of(owner, task.context_id)
        served = await self._runs().start_turn(
            context.get_user_input(), conversation=conversation, run_id=task.id
        )
        await event_queue.enqueue_event(task)
        await self._report(served, TaskUpdater(event_queue, task.id, task.context_id), None)

    async def _report(self, served: ServedRun, updater: TaskUpdater, focus: str | None) -> None:
        stop = await served.wait_settled()
        if isinstance(stop, Outcome):
            if self._runs().was_cancelled(served.run_id):
                return  # the SDK records the cancellation it was asked for
            if served.elsewhere:  # lost to another process on the way: follow it there
                await self._relay(served.run_id, updater, None, None)
                return
            await _finished(stop, updater)
            return
        await updater.requires_input(_asking(served.notes, stop, focus, updater))

    async def _relay(
        self, run_id: str, updater: TaskUpdater, message: Message | None, by: str | None
    ) -> None:
        """Another process drives the run: give it ``message``'s answer (from ``by``)
        through the store, then report the run once it has moved on."""
        relay = StoreRelay(self._runs(), run_id)
        focus = None
        if message is not None:
            focus = await answer(relay, message, by=by, policy=self.policy)
        found = await relay.follow(math.inf)
        if isinstance(found, ServedRun):  # its driver died: resumed here, driven from here
            found.notes.update(relay.notes)
            await self._report(found, updater, focus)
        elif isinstance(found, RunRecord):
            await _finished(outcome_of(found), updater)
        elif found:
            await updater.requires_input(
                _asking(relay.notes, [r.event for r in found], focus, updater)
            )
        else:  # not reached: followed until it asks or ends
            await updater.start_work(_said(updater, "the run is working: read the task again"))


def _asking(
    notes: dict[str, str], pending: list[RequestEvent], focus: str | None, updater: TaskUpdater
) -> Message:
    entries = [describe(r, notes.pop(r.request_id, None)) for r in pending]
    first = next((e for e in entries if e["request_id"] == focus), entries[0])
    metadata = {k: v for k, v in first.items() if k != "question"}
    metadata["requests"] = entries
    return updater.new_agent_message([new_text_part(first["question"])], metadata=metadata)


def _said(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([new_text_part(text)])


async def _finished(outcome: Outcome, updater: TaskUpdater) -> None:
    """Report a run that ended: here, or in another process of the store (its record)."""
    if outcome.status == "completed":
        await updater.add_artifact([new_text_part(outcome.output or "")], name="output")
        await updater.complete()
    elif outcome.status == "cancelled":
        await updater.cancel(_said(updater, "the run was cancelled"))
    else:
        why = outcome.error or "no output"
        await updater.failed(_said(updater, f"the run {outcome.status}: {why}"))


def caller_name(context: RequestContext) -> str | None:
    """Who sent the message, recorded as who answered: the SDK's user when authenticated
    (an app's own authentication), else the name of the server token the request carried
    (``hpd_agent.hosting.IDENTITY``, put in the call's state by the app's context builder);
    None on a server without tokens."""
    call = context.call_context
    if call.user.is_authenticated:
        return call.user.user_name or None
    named = call.state.get(IDENTITY)
    return named if isinstance(named, str) and named != LOCAL else None
