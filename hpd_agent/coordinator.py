"""The coordinator: one per root run, shared by every agent of its tree.

It owns the run's single ordered event stream (every agent at every depth emits here), and
the registry of pending requests: a request registers its waiter *before* its event goes
out, and ``respond`` wakes exactly the waiter whose id it names. ``respond`` is atomic: it
either accepts the answer and resolves the request, or raises and changes nothing.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal

import anyio

from .events import ClarificationRequest, Event, RequestEvent, RequestStatus
from .exceptions import (
    InvalidAnswerError,
    NoUserAvailableError,
    QuestionNotAnswered,
    RequestAlreadyAnsweredError,
    RequestCancelledError,
    RequestExpiredError,
    UnknownRequestError,
)
from .messages import Message, Usage

if TYPE_CHECKING:
    from ._context import ToolContext
    from .store._journal import Journal

__all__ = ["Coordinator", "OnUnhandled", "RequestSpec"]

OnUnhandled = Literal["decline", "error", "interrupt"]
"""What a request does when no handler and no stream consumer can answer it:
``"decline"`` resolves it at once as unavailable (the asking tool tells the model nobody is
there); ``"error"`` fails the run with ``NoUserAvailableError``; ``"interrupt"`` (needs a
store) ends the run with status ``"interrupted"``, leaving the request pending in the store
for ``Agent.resume(run_id, answers=...)``. With a store and any other policy a request waits
for an answer through the store, since any process holding the store can answer it."""


class RequestSpec(ABC):
    """What a kind of request contributes: its event, answer validation, resolution event."""

    @abstractmethod
    def build(self, *, request_id: str, ctx: ToolContext) -> RequestEvent:
        """The request event to emit."""

    @abstractmethod
    def validate(self, answer: Any) -> Any:
        """Return the answer in canonical form, or raise ``ValueError`` saying why it is wrong."""

    @abstractmethod
    def resolved(self, request: RequestEvent, status: RequestStatus, answer: Any) -> Event:
        """The event announcing how the request ended."""

    def after_answer(self, coordinator: Coordinator, request: RequestEvent, answer: Any) -> None:  # noqa: B027
        """Hook run right after an answer is accepted (e.g. approval for the whole run)."""


class _Pending:
    __slots__ = ("answer", "done", "event", "spec", "status", "stored")

    def __init__(self, event: RequestEvent, spec: RequestSpec) -> None:
        self.event = event
        self.spec = spec
        self.status: RequestStatus | Literal["pending"] = "pending"
        self.answer: Any = None
        self.done = anyio.Event()
        self.stored = False
        """True when the outcome came from (or was already written to) the store."""


def _question_key(event: RequestEvent) -> tuple[Any, ...] | None:
    """What makes two questions "the same" for deduplication (permissions never are)."""
    if isinstance(event, ClarificationRequest):
        return (event.agent_path, event.question_kind, event.question, event.options)
    return None


class Coordinator:
    """One per root run: the ordered event stream and the pending-request registry.

    Args:
        run_id: Id of the root run.
        sink: Where events go (the run's stream); None drops them (nobody is watching).
        listening: Whether someone can answer requests (a handler or a stream consumer).
        on_unhandled: Policy for requests nobody can answer; see ``OnUnhandled``.
    """

    def __init__(
        self,
        run_id: str,
        *,
        sink: Callable[[Event], None] | None = None,
        listening: bool = False,
        on_unhandled: OnUnhandled = "decline",
    ) -> None:
        self.run_id = run_id
        self._sink = sink
        self.listening = listening
        self.on_unhandled: OnUnhandled = on_unhandled
        self._requests: dict[str, _Pending] = {}
        self.run_approvals: set[tuple[tuple[str, ...], str]] = set()
        """(agent path, tool name) pairs the human approved for the rest of the run."""
        self.conversations: dict[str, list[Message]] = {}
        """Sub-agent conversations kept per parent run (``as_tool(conversation="per_run")``)."""
        self.conversation_locks: dict[str, anyio.Lock] = {}
        self.journal: Journal | None = None
        """The run's journal when it runs with a store (see ``hpd_agent.store``)."""
        self.interrupted = False
        """Set when ``on_unhandled="interrupt"`` ended the run to wait for a later resume."""
        self.interrupt_scope: anyio.CancelScope | None = None
        self.cancelling = False
        """Set when the run is cancelled on purpose (``Run.cancel``, leaving its block early).
        Only then do stored requests end as cancelled; any other cancellation (the process
        shutting down, an outer cancel scope) leaves them pending for a resume, like a crash."""
        self._open_questions: dict[tuple[Any, ...], _Pending] = {}
        self._requests_n = 0
        self._input_tokens = 0
        self._output_tokens = 0

    # -- events ------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        """Put an event on the run's stream (dropped when nobody is watching)."""
        sink = self._sink
        if sink is not None:
            sink(event)

    @property
    def observed(self) -> bool:
        """Whether ``emit`` delivers events anywhere; when False, the hot path may skip
        building the events it would only drop (tool calls, text pieces)."""
        return self._sink is not None

    def add_usage(self, usage: Usage) -> None:
        """Count one model request's usage toward the whole run."""
        self._requests_n += usage.requests
        self._input_tokens += usage.input_tokens
        self._output_tokens += usage.output_tokens

    @property
    def usage(self) -> Usage:
        """Usage of every model request in the tree so far."""
        return Usage(
            requests=self._requests_n,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
        )

    # -- requests ----------------------------------------------------------------------
    def pending(self) -> list[RequestEvent]:
        """Requests still waiting for an answer, oldest first."""
        return [p.event for p in self._requests.values() if p.status == "pending"]

    async def request(self, ctx: ToolContext, spec: RequestSpec, *, timeout: float | None) -> Any:
        """Emit a request from the tool call ``ctx`` and wait for its answer.

        Returns the validated answer. Raises ``QuestionNotAnswered`` when the request expires,
        is cancelled or nobody can answer (``NoUserAvailableError`` under policy "error").
        Enclosing tool deadlines are paused while waiting. A question identical to one still
        pending from the same agent is not asked again: it waits for that one's answer.
        """
        request_id = ctx.next_request_id()
        journal = self.journal
        if journal is not None:
            return await journal.request(self, ctx, spec, request_id, timeout)
        event = spec.build(request_id=request_id, ctx=ctx)
        duplicate = self.find_duplicate(event)
        if duplicate is not None:
            return await self.join(duplicate, ctx, timeout)
        pending = self.register(event, spec)
        if not self.listening:
            self._finish(pending, "unavailable", None)
        else:
            await self.wait(pending, ctx, timeout)
            if pending.status == "pending":
                self._finish(pending, "expired", None)
        return self.outcome(pending, timeout)

    def register(self, event: RequestEvent, spec: RequestSpec) -> _Pending:
        """Register a waiter for ``event``, then emit it (a consumer may answer at once)."""
        pending = self.track(event, spec)
        self.emit(event)
        return pending

    def track(self, event: RequestEvent, spec: RequestSpec) -> _Pending:
        """Register a waiter for ``event`` without emitting it yet."""
        pending = _Pending(event, spec)
        self._requests[event.request_id] = pending
        key = _question_key(event)
        if key is not None:
            self._open_questions[key] = pending
        return pending

    def find_duplicate(self, event: RequestEvent) -> _Pending | None:
        """The pending request asking the same question from the same agent, if any."""
        key = _question_key(event)
        if key is None:
            return None
        pending = self._open_questions.get(key)
        if pending is None or pending.status != "pending":
            return None
        return pending

    async def join(self, pending: _Pending, ctx: ToolContext, timeout: float | None) -> Any:
        """Wait for another asker's identical request; its answer is this asker's too."""
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            await self._paused_wait(pending, ctx)
        if pending.status == "pending":
            rid = pending.event.request_id
            raise QuestionNotAnswered(
                f"The user did not answer within {timeout:g} seconds.",
                status="expired",
                request_id=rid,
            )
        return self.outcome(pending, timeout)

    async def _paused_wait(self, pending: _Pending, ctx: ToolContext) -> None:
        deadlines = ctx.deadlines
        for d in deadlines:
            d.pause()
        try:
            await pending.done.wait()
        finally:
            for d in deadlines:
                d.resume()

    async def wait(
        self,
        pending: _Pending,
        ctx: ToolContext,
        timeout: float | None,
        *,
        external: Callable[[_Pending], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        """Wait until ``pending`` is resolved or ``timeout`` passes (then it is still pending).

        ``external`` (a store's wake-up) runs alongside and may resolve it. If the waiting
        task is cancelled, the request ends as cancelled, unless the run is being interrupted
        to be resumed later.
        """
        try:
            with anyio.move_on_after(math.inf if timeout is None else timeout):
                if external is None:
                    await self._paused_wait(pending, ctx)
                else:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(external, pending)
                        await self._paused_wait(pending, ctx)
                        tg.cancel_scope.cancel()
        except BaseException:
            # The waiting tool is being cancelled (run cancelled, sibling failure, ...).
            if pending.status == "pending" and not self.interrupted:
                self._finish(pending, "cancelled", None)
            raise

    def interrupt(self) -> None:
        """End the run now, leaving its requests pending in the store (policy "interrupt")."""
        self.interrupted = True
        if self.interrupt_scope is not None:
            self.interrupt_scope.cancel()

    def outcome(self, pending: _Pending, timeout: float | None) -> Any:
        """The answer of a resolved request, or the ``QuestionNotAnswered`` it ends with."""
        status = pending.status
        if status == "answered":
            return pending.answer
        rid = pending.event.request_id
        if status == "unavailable":
            if self.on_unhandled == "error":
                raise NoUserAvailableError(
                    f"request {rid} arose with no handler and no stream consumer to answer it"
                )
            raise QuestionNotAnswered(
                "No user is available to answer right now.", status="unavailable", request_id=rid
            )
        if status == "expired":
            within = "in time" if timeout is None else f"within {timeout:g} seconds"
            raise QuestionNotAnswered(
                f"The user did not answer {within}.",
                status="expired",
                request_id=rid,
            )
        raise QuestionNotAnswered(
            "The request was cancelled before the user answered.",
            status="cancelled",
            request_id=rid,
        )

    def _finish(self, pending: _Pending, status: RequestStatus, answer: Any) -> None:
        if pending.status != "pending":
            return
        pending.status = status
        pending.answer = answer
        pending.done.set()
        self.emit(pending.spec.resolved(pending.event, status, answer))

    def _check_open(self, request_id: str) -> _Pending:
        pending = self._requests.get(request_id)
        if pending is None:
            raise UnknownRequestError(
                f"no request with id {request_id!r} in run {self.run_id}", request_id=request_id
            )
        status = pending.status
        if status == "answered":
            raise RequestAlreadyAnsweredError(
                f"request {request_id} was already answered", request_id=request_id
            )
        if status == "expired":
            raise RequestExpiredError(
                f"request {request_id} expired before this answer came", request_id=request_id
            )
        if status == "cancelled":
            raise RequestCancelledError(
                f"request {request_id} was cancelled", request_id=request_id
            )
        if status == "unavailable":
            raise RequestCancelledError(
                f"request {request_id} was resolved without an answer: nobody was listening",
                request_id=request_id,
            )
        return pending

    def respond(self, request_id: str, answer: Any) -> Any:
        """Answer a pending request; returns the answer as validated.

        Atomic: on any error nothing changes and the request stays as it was.

        Raises:
            UnknownRequestError, RequestAlreadyAnsweredError, RequestExpiredError,
            RequestCancelledError, InvalidAnswerError.
        """
        pending = self._check_open(request_id)
        try:
            value = pending.spec.validate(answer)
        except (ValueError, TypeError) as e:
            raise InvalidAnswerError(
                f"invalid answer for request {request_id}: {e}", request_id=request_id
            ) from None
        self._finish(pending, "answered", value)
        pending.spec.after_answer(self, pending.event, value)
        return value

    async def respond_async(self, request_id: str, answer: Any) -> Any:
        """``respond``, writing through the store first when the run has one.

        With a store, the store's conditional update decides between racing answers (from
        this process or any other); the loser gets the store's distinct error.
        """
        journal = self.journal
        if journal is None:
            return self.respond(request_id, answer)
        pending = self._check_open(request_id)
        try:
            value = pending.spec.validate(answer)
        except (ValueError, TypeError) as e:
            raise InvalidAnswerError(
                f"invalid answer for request {request_id}: {e}", request_id=request_id
            ) from None
        await journal.write_answer(request_id, value)
        if pending.status == "pending":
            pending.stored = True
            self._finish(pending, "answered", value)
            pending.spec.after_answer(self, pending.event, value)
        return value

    def cancel_request(self, request_id: str) -> None:
        """End a pending request without an answer; its asker sees "cancelled"."""
        self._finish(self._check_open(request_id), "cancelled", None)

    def stop_listening(self) -> None:
        """Nobody will answer from now on: resolve every pending request as unavailable."""
        self.listening = False
        if self.journal is not None:
            # Anyone holding the store can still answer; only "interrupt" gives up here.
            if self.on_unhandled == "interrupt" and self.pending():
                self.interrupt()
            return
        for pending in list(self._requests.values()):
            if pending.status == "pending":
                self._finish(pending, "unavailable", None)

    def resolve_matching(self, predicate: Callable[[RequestEvent], bool], answer: Any) -> list[str]:
        """Answer every pending request the predicate selects (used by run-wide approvals)."""
        done: list[str] = []
        for rid, pending in list(self._requests.items()):
            if pending.status == "pending" and predicate(pending.event):
                self._finish(pending, "answered", pending.spec.validate(answer))
                done.append(rid)
        return done
