"""The coordinator: one per root run, shared by every agent of its tree.

It owns the run's single ordered event stream (every agent at every depth emits here), and
the registry of pending requests: a request registers its waiter *before* its event goes
out, and ``respond`` wakes exactly the waiter whose id it names. ``respond`` is atomic: it
either accepts the answer and resolves the request, or raises and changes nothing.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import anyio

from .events import Event, RequestEvent, RequestStatus
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

__all__ = ["Coordinator", "OnUnhandled", "RequestSpec"]

OnUnhandled = Literal["decline", "error"]
"""What a request does when no handler and no stream consumer can answer it:
``"decline"`` resolves it at once as unavailable (the asking tool tells the model nobody is
there); ``"error"`` fails the run with ``NoUserAvailableError``."""


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
    __slots__ = ("answer", "done", "event", "spec", "status")

    def __init__(self, event: RequestEvent, spec: RequestSpec) -> None:
        self.event = event
        self.spec = spec
        self.status: RequestStatus | Literal["pending"] = "pending"
        self.answer: Any = None
        self.done = anyio.Event()


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
        Enclosing tool deadlines are paused while waiting.
        """
        request_id = ctx.next_request_id()
        event = spec.build(request_id=request_id, ctx=ctx)
        pending = _Pending(event, spec)
        # Register before emitting: a consumer may answer as soon as it sees the event.
        self._requests[request_id] = pending
        self.emit(event)
        if not self.listening:
            self._finish(pending, "unavailable", None)
        else:
            deadlines = ctx.deadlines
            for d in deadlines:
                d.pause()
            try:
                with anyio.move_on_after(math.inf if timeout is None else timeout):
                    await pending.done.wait()
            except BaseException:
                # The waiting tool is being cancelled (run cancelled, sibling failure, ...).
                if pending.status == "pending":
                    self._finish(pending, "cancelled", None)
                raise
            finally:
                for d in deadlines:
                    d.resume()
            if pending.status == "pending":
                self._finish(pending, "expired", None)
        return self._outcome(pending, timeout)

    def _outcome(self, pending: _Pending, timeout: float | None) -> Any:
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
            raise QuestionNotAnswered(
                f"The user did not answer within {timeout:g} seconds.",
                status="expired",
                request_id=rid,
            )
        raise QuestionNotAnswered(
            "The request was cancelled before the user answered.",
            status="cancelled",
            request_id=rid,
        )

    def _finish(self, pending: _Pending, status: RequestStatus, answer: Any) -> None:
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

    def cancel_request(self, request_id: str) -> None:
        """End a pending request without an answer; its asker sees "cancelled"."""
        self._finish(self._check_open(request_id), "cancelled", None)

    def stop_listening(self) -> None:
        """Nobody will answer from now on: resolve every pending request as unavailable."""
        self.listening = False
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
