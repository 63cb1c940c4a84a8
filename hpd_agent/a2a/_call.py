"""``RemoteCall``: one call of a remote agent's tool, from the query to the result.

The query goes out once, in a journaled step that ends as soon as the remote task exists
(its id is what the step records): a resumed run replays the step and re-attaches to the
same task (``GetTask``, then ``SubscribeToTask`` while it works, or polling a remote that
does not stream) instead of sending the query again. The task is then followed until it
waits or ends:

- waiting for input: each question it asks is relayed to the human through
  ``ToolContext.on_behalf_of`` (all at once when the remote lists several), and each answer
  goes back as a user message in the same task and context, in the order they come;
- waiting for authentication with a URL: an ``action`` question on that URL (a URL that is
  not a web page, ``https:`` or ``http:`` to this machine, ends the call instead, and the
  remote task is canceled);
- completed: the tool's result is the artifacts' text, else the last agent message's;
- failed, rejected, canceled: ``RemoteAgentError`` naming the state.

Cancelling the run cancels the remote task (``CancelTask``), and so does a question that
ends unanswered; a run that stops to be resumed later (an interrupt, the process going
down) leaves it waiting, to be re-attached to.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncGenerator
from typing import Any, cast

import anyio
import httpx
from a2a.client import Client, ClientCallContext
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import A2AError
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..text import bounded, error_text
from ..tools import ToolContext
from ._error import RemoteAgentError
from ._questions import refused_url
from ._relay import Outcome, Relay
from ._view import TaskView
from ._wire import (
    INTERRUPTED,
    MAX_REQUEST_ID,
    RemoteQuestion,
    answer_message,
    message_id,
    message_text,
    query_message,
    state_name,
)

__all__ = ["RemoteCall"]

_UNARY = ClientCallContext(timeout=30.0)
"""Unary calls (GetTask, CancelTask) give up after 30 s; streams wait as long as the task
works."""
_CANCEL_WITHIN = 10.0
_FIRST_POLL = 0.02
_MAX_POLL = 1.0
_ENDED = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "was rejected",
    TaskState.TASK_STATE_CANCELED: "was canceled",
}


class RemoteCall:
    """One call of a remote agent's tool (see the module's docstring).

    Args:
        name: The remote agent's name (the first name its questions' paths get).
        ctx: The tool call's context.
        client: An a2a-sdk client for the remote agent.
        streaming: Whether to stream (the agent card allows it).
    """

    def __init__(self, name: str, ctx: ToolContext, client: Client, *, streaming: bool) -> None:
        self.name = name
        self.ctx = ctx
        self.client = client
        self.streaming = streaming
        self.view = TaskView()
        self.events: AsyncGenerator[StreamResponse] | None = None
        self.reattached = False
        """Whether ``events`` is a subscription (re-attaching), not a message's response."""
        self.relay = Relay(name, ctx)
        self.cancelled = False
        """Whether the remote task was asked to cancel (or cannot be: unreachable)."""

    async def run(self, query: str) -> str:
        """Send ``query`` (or re-attach to the task it started) and follow the task to its
        result."""
        try:
            started: dict[str, Any] = await self.ctx.step("a2a.send", self._start, query)
            if "reply" in started:
                return str(started["reply"])
            self.view.note_ids(str(started["task_id"]), str(started["context_id"]))
            return await self._drive()
        except anyio.get_cancelled_exc_class():
            # A run stopped to be resumed (interrupt, shutdown) will re-attach: keep the task.
            if self.ctx.cancelling or not self.ctx.durable:
                await self._cancel_remote()
            raise
        except (A2AError, httpx.HTTPError) as e:
            error = self._unreachable(e)
            await self._cancel_remote()  # it refused a call: it would wait for nothing
            raise error from None
        except Exception:
            # A question unanswered, the user declining to sign in, the run failing:
            # nothing will follow the task now.
            await self._cancel_remote()
            raise
        finally:
            await self._close_events()

    # -- sending ---------------------------------------------------------------------------
    async def _start(self, query: str) -> dict[str, Any]:
        """The journaled step: send the query, read until the task exists; its ids."""
        mid = message_id(self.ctx.run_id, self.ctx.call_path, "query")
        self._send(query_message(query, mid))
        assert self.events is not None
        try:
            async for event in self.events:
                self.view.take(event)
                if self.view.task_id or self.view.reply is not None:
                    break
        except (A2AError, httpx.HTTPError) as e:
            # Journaled as this error (a replay raises it again): not the SDK's own.
            raise self._unreachable(e) from None
        if self.view.reply is not None:
            await self._close_events()
            return {"reply": self.view.reply}
        if not self.view.task_id:
            raise RemoteAgentError(f"the remote agent {self.name!r} answered with no task")
        return {"task_id": self.view.task_id, "context_id": self.view.context_id}

    def _send(self, message: Message) -> None:
        """Start sending ``message``; its response events are read by ``_settle``."""
        config = SendMessageConfiguration(return_immediately=not self.streaming)
        request = SendMessageRequest(message=message, configuration=config)
        self.events = cast(AsyncGenerator[StreamResponse], self.client.send_message(request))
        self.reattached = False

    async def _answer(self, question: RemoteQuestion, answer: Any) -> None:
        """Send the answer to ``question`` in the task and context (an authentication: go
        on, once the human has signed in)."""
        self.relay.answered(question)
        if question.auth:
            if answer is not True:
                raise self._error("the user did not sign in where the remote agent asked")
            self.view.take_task(await self._get_task())
            if self.view.state != TaskState.TASK_STATE_AUTH_REQUIRED:
                return  # signed in out of band: the task went on by itself
            answer = "done"
        mid = message_id(self.ctx.run_id, self.ctx.call_path, question.key)
        view = self.view
        self._send(
            answer_message(answer, task_id=view.task_id, context_id=view.context_id,
                           request_id=question.request_id, mid=mid)
        )  # fmt: skip
        view.expect_change()

    # -- following -------------------------------------------------------------------------
    async def _drive(self) -> str:
        """Follow the task to its end, relaying its questions; the result text."""
        result = await self._one_at_a_time()
        if result is not None:
            return result
        send, receive = anyio.create_memory_object_stream[Outcome](math.inf)
        result, error = "", None
        with send, receive:
            async with anyio.create_task_group() as tg:
                try:
                    result = await self._follow(tg, send, receive)
                except anyio.get_cancelled_exc_class():
                    raise  # the questions end as the run's cancel or interrupt says
                except Exception as e:
                    error = e  # raised below, outside the task group (no exception group)
                self.relay.withdraw_all()
                tg.cancel_scope.cancel()
        if error is not None:
            raise error
        return result

    async def _one_at_a_time(self) -> str | None:
        """Follow the task while it asks one question at a time, each asked in this task
        (no task group nor stream to set up: the common case); None once a status asks
        several at once (``_follow`` asks them side by side)."""
        while True:
            await self._settle()
            if self.view.terminal:
                return self._ended()
            questions = self.relay.open_questions(self.view)
            if len(questions) != 1:
                return None
            self._refuse_unanswerable(questions)
            await self._close_events()
            (question,) = questions
            await self._answer(question, await self.relay.ask(question))

    async def _follow(
        self,
        tg: TaskGroup,
        send: MemoryObjectSendStream[Outcome],
        receive: MemoryObjectReceiveStream[Outcome],
    ) -> str:
        while True:
            await self._settle()
            if self.view.terminal:
                return self._ended()
            questions = self.relay.open_questions(self.view)
            self._refuse_unanswerable(questions)
            self.relay.relay(tg, questions, send)
            await self._close_events()  # the questions go out meanwhile
            question, answer = await receive.receive()
            if not self.relay.take(question):
                continue  # withdrawn meanwhile: the remote no longer waits for it
            if isinstance(answer, BaseException):
                raise answer
            await self._answer(question, answer)

    def _refuse_unanswerable(self, questions: list[RemoteQuestion]) -> None:
        """Raise when a question cannot be asked or its answer not carried back: the call
        ends with the reason (once), instead of asking the human again and again."""
        for q in questions:
            if q.request_id is not None and len(q.request_id) > MAX_REQUEST_ID:
                raise self._error(
                    f"the remote agent asked a question with a request_id of "
                    f"{len(q.request_id):,} characters; answers carry it back whole, up to "
                    f"{MAX_REQUEST_ID:,}: the question cannot be answered"
                )
            if not q.auth:
                continue
            if "url" not in q.details:
                raise self._error("the remote agent needs authentication and gave no URL")
            why = refused_url(q)
            if why is not None:
                raise self._error(
                    f"the remote agent asked to sign in at a URL this client does not open: {why}"
                )

    async def _settle(self) -> None:
        """Read the task's events until it waits for something new or ends."""
        delay = _FIRST_POLL
        while not self._settled():
            if self.events is not None:
                seen = await self._read_events()
                if seen or self._settled():
                    delay = _FIRST_POLL
                    continue
            else:
                self.view.take_task(await self._get_task())
                if self._settled():
                    return
                if self.streaming:
                    request = SubscribeToTaskRequest(id=self.view.task_id)
                    self.events = cast(
                        AsyncGenerator[StreamResponse], self.client.subscribe(request)
                    )
                    self.reattached = True
                    continue
            # Nothing new (a remote that does not stream, or a stream that ended early).
            await anyio.sleep(delay)
            delay = min(delay * 2, _MAX_POLL)

    async def _read_events(self) -> int:
        """Read the open stream until the task settles (the stream is left open) or the
        stream ends (it is closed); the number of events read."""
        assert self.events is not None
        seen = 0
        try:
            async for event in self.events:
                seen += 1
                self.view.take(event)
                if self._settled():
                    # Left open: closed while what it settled on is acted on (a question
                    # asked meanwhile), or when the call ends.
                    return seen
        except A2AError:
            if not self.reattached:
                raise
            # A subscription refused (the task ended between GetTask and it): look again.
        await self._close_events()
        return seen

    def _settled(self) -> bool:
        view = self.view
        if view.reply is not None or view.terminal:
            return True
        return view.state in INTERRUPTED and bool(self.relay.open_questions(view))

    # -- the end ---------------------------------------------------------------------------
    def _ended(self) -> str:
        view = self.view
        if view.state == TaskState.TASK_STATE_COMPLETED or view.reply is not None:
            return view.reply if view.reply is not None else view.result_text()
        how = _ENDED.get(view.state, f"ended ({state_name(view.state)})")
        status = view.status
        said = message_text(status.message) if status.HasField("message") else ""
        raise self._error(f"the remote task {how}" + (f": {said}" if said else ""))

    def _error(self, message: str) -> RemoteAgentError:
        task_id = self.view.task_id or None
        return RemoteAgentError(
            bounded(f"{message} (remote agent {self.name!r}, task {task_id})"),
            state=state_name(self.view.state),
            task_id=task_id,
        )

    def _unreachable(self, error: BaseException) -> RemoteAgentError:
        if isinstance(error, httpx.TransportError):
            self.cancelled = True  # it cannot be reached: no use asking it to cancel
        return RemoteAgentError(
            bounded(
                f"the remote agent {self.name!r} could not be reached or refused the call: "
                f"{error_text(error)}"
            ),
            task_id=self.view.task_id or None,
        )

    async def _get_task(self) -> Any:
        return await self.client.get_task(GetTaskRequest(id=self.view.task_id), context=_UNARY)

    async def _cancel_remote(self) -> None:
        """Cancel the remote task (shielded: this is what a cancellation does); a task that
        has ended already, or a remote gone, is left as it is."""
        task_id = self.view.task_id
        if not task_id or self.view.terminal or self.cancelled:
            return
        self.cancelled = True
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WITHIN):
            await self._close_events()
            with contextlib.suppress(A2AError, httpx.HTTPError):
                await self.client.cancel_task(CancelTaskRequest(id=task_id), context=_UNARY)

    async def _close_events(self) -> None:
        events, self.events = self.events, None
        if events is not None:
            with anyio.CancelScope(shield=True):
                await events.aclose()
