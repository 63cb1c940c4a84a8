"""Requests to the human: what a kind of request contributes, where requests are kept, and
the table of a run's open requests.

- ``RequestSpec``: a kind of request (a question kind, a permission): its event, its answer
  check, its resolution event.
- ``RequestBackend``: where requests live beyond the coroutine that waits. The default,
  ``LocalRequests``, keeps nothing (the run's memory is enough); a store supplies a durable
  one (``hpd_agent.store``): requests are written before their event goes out, answers from
  other processes wake the waiter, and a replayed run finds its earlier requests there.
- ``RequestTable``: a run's requests by id; resolving one is atomic and happens once.
"""

from __future__ import annotations

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal, Protocol

import anyio

from .._values.kinds import BuiltinKind, kind_named
from ..backend import Author, Final, RequestBackend, Settlement
from ..events import (
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionResolved,
    RequestEvent,
    RequestExpiring,
    RequestStatus,
)
from ..exceptions import (
    InvalidAnswerError,
    QuestionNotAnswered,
    RequestAlreadyAnsweredError,
    RequestCancelledError,
    RequestExpiredError,
    UnknownRequestError,
)
from ..hooks import HookSet
from .grants import PROCESS_GRANTS, GrantBook
from .quiescence import Quiescence

__all__ = [
    "DECLINED_TEXT",
    "Asker",
    "LocalRequests",
    "PendingRequest",
    "RequestBackend",
    "RequestSpec",
    "RequestTable",
    "Settlement",
    "authored",
    "replay_outcome",
]


DECLINED_TEXT = "The user declined to answer."
"""What ``QuestionNotAnswered`` says when the human declined (``Decline()``)."""


class Asker(Protocol):
    """Who asks: the tool call a request comes from (``ToolContext`` is one)."""

    @property
    def run_id(self) -> str: ...
    @property
    def agent_path(self) -> tuple[str, ...]: ...
    @property
    def depth(self) -> int: ...
    @property
    def tool_name(self) -> str: ...
    @property
    def tool_call_id(self) -> str: ...
    @property
    def invocation_id(self) -> str: ...


class RequestSpec(ABC):
    """What a kind of request contributes: its event, answer validation, resolution event."""

    @abstractmethod
    def build(self, *, request_id: str, asker: Asker) -> RequestEvent:
        """The request event to emit."""

    @abstractmethod
    def validate(self, answer: Any) -> Any:
        """Return the answer in canonical form, or raise ``ValueError`` saying why it is wrong."""

    @abstractmethod
    def resolved(self, request: RequestEvent, status: RequestStatus, answer: Any) -> Event:
        """The event announcing how the request ended."""

    def after_answer(self, table: RequestTable, request: RequestEvent, answer: Any) -> None:  # noqa: B027
        """Runs right after an answer is accepted (e.g. approval for the whole run)."""

    def revive(self, stored: Any) -> Any:
        """A kept answer as the asking tool expects it (a stored object back to
        ``Approve``), or as it was kept when it no longer validates."""
        try:
            return self.validate(stored)
        except (ValueError, TypeError):
            return stored


class LocalRequests:
    """The default backend: requests live in the run's memory only."""

    durable = False

    def alias_of(self, request_id: str) -> str | None:
        return None

    async def record_alias(self, request_id: str, first_id: str) -> None:
        return None

    async def open(
        self, event: RequestEvent, timeout: float | None
    ) -> tuple[Settlement | None, float | None]:
        return None, timeout

    async def wait(self, request_id: str) -> Settlement:  # pragma: no cover - never durable
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def resolve(
        self, request_id: str, status: Final, answer: Any, *, author: Author | None = None
    ) -> None:
        return None

    async def settlement(self, request_id: str) -> tuple[RequestEvent, Settlement | None] | None:
        return None


class PendingRequest:
    """One open request and its waiter."""

    __slots__ = (
        "answer",
        "answering",
        "author",
        "done",
        "event",
        "on_done",
        "spec",
        "status",
        "stored",
        "waiters",
        "warn_before",
    )

    def __init__(self, event: RequestEvent, spec: RequestSpec) -> None:
        self.event = event
        self.spec = spec
        self.status: RequestStatus | Literal["pending"] = "pending"
        self.answer: Any = None
        self.author: Author | None = None
        """Who answered or declined it, once it has been (None otherwise)."""
        self.done = anyio.Event()
        self.stored = False
        """True when the backend already holds this outcome (no need to write it)."""
        self.answering = 0
        """Answers being written to the backend now: until the backend decides, the request
        cannot be cancelled here (``Coordinator.cancel_request`` refuses)."""
        self.on_done: Callable[[], object] | None = None
        """Called when the request ends here (stops a wait on the backend, in the same task)."""
        self.waiters = 0
        """Calls waiting on it now, counted in the run's ``Quiescence.waiting`` until it ends."""
        self.warn_before: float | None = None
        """Seconds before its deadline its expiry warning is due; None: no warning (none
        asked for, or it went out already)."""

    def end(self) -> None:
        """Wake whoever waits for this request (it has just ended)."""
        self.done.set()
        if self.on_done is not None:
            self.on_done()

    @property
    def request_id(self) -> str:
        """The request's id."""
        return self.event.request_id


def question_key(event: RequestEvent) -> tuple[Any, ...] | None:
    """What makes two questions "the same" for deduplication (permissions never are).

    Everything the human would see and everything the answer is checked against: the
    asking agent, kind, text, context, options and data (schema and payload included), and
    the answer schema of a kind not built in (a built-in kind's follows from the rest; a
    question relayed from elsewhere brings its own). Two questions that differ in any of
    these get two requests and two answers.
    """
    if isinstance(event, ClarificationRequest):
        data = None if event.data is None else json.dumps(event.data, sort_keys=True)
        schema = event.answer_schema
        if schema is not None and not isinstance(kind_named(event.question_kind), BuiltinKind):
            data = (data, json.dumps(schema, sort_keys=True))
        return (
            event.agent_path,
            event.question_kind,
            event.question,
            event.context,
            event.options,
            data,
        )
    return None


_NONE: Mapping[Any, Any] = MappingProxyType({})
"""A request table's requests and open questions until it tracks one (one for every table:
most runs in flight never ask anything)."""


class RequestTable:
    """A run's requests by id. Resolving one is atomic: it happens once, then never again.

    Args:
        emit: Puts an event on the run's stream.
        hooks: Observers told when a request opens and ends.
        quiescence: The run's count of waiting calls (``Run.settled``); a table of its own
            when omitted.
    """

    # Slots, and its dicts and set made when first used: every run in flight holds one
    # table (an empty set is 216 bytes, a run approves for the run rarely).
    __slots__ = (
        "_approvals",
        "_emit",
        "_hooks",
        "_open_questions",
        "_requests",
        "grants",
        "quiescence",
    )

    def __init__(
        self, emit: Callable[[Event], None], hooks: HookSet, quiescence: Quiescence | None = None
    ) -> None:
        self._emit = emit
        self._hooks = hooks
        self.quiescence = quiescence if quiescence is not None else Quiescence()
        self._requests: Mapping[str, PendingRequest] = _NONE
        self._open_questions: Mapping[tuple[Any, ...], PendingRequest] = _NONE
        self._approvals: set[tuple[tuple[str, ...], str]] | None = None
        self.grants: GrantBook | None = PROCESS_GRANTS
        """Where the run keeps and finds remembered grants (``Approve(scope="always")``):
        this process's for a run kept nowhere, its session's (a store's) otherwise; None
        when its session keeps none ("always" then approves the one call)."""

    @property
    def run_approvals(self) -> set[tuple[tuple[str, ...], str]]:
        """(agent path, tool name) pairs the human approved for the rest of the run."""
        approvals = self._approvals
        if approvals is None:
            approvals = self._approvals = set()
        return approvals

    def get(self, request_id: str) -> PendingRequest | None:
        """The request with this id, open or not."""
        return self._requests.get(request_id)

    def pending(self) -> list[RequestEvent]:
        """Requests still waiting for an answer, oldest first."""
        return [p.event for p in self._requests.values() if p.status == "pending"]

    def open_requests(self) -> list[PendingRequest]:
        """The open requests themselves, oldest first."""
        return [p for p in self._requests.values() if p.status == "pending"]

    def track(self, event: RequestEvent, spec: RequestSpec) -> PendingRequest:
        """Register a waiter for ``event`` (before the event goes out)."""
        pending = PendingRequest(event, spec)
        requests = self._requests
        if not isinstance(requests, dict):
            requests = self._requests = {}
        requests[event.request_id] = pending
        key = question_key(event)
        if key is not None:
            questions = self._open_questions
            if not isinstance(questions, dict):
                questions = self._open_questions = {}
            questions[key] = pending
        return pending

    def announce(self, pending: PendingRequest, *, again: bool = False) -> None:
        """Put a tracked request's event on the stream and tell the observers (``again``: an
        earlier life of the run opened it; they get it marked ``replayed``).

        An observer's exception withdraws the request (it ends as cancelled, announced like
        any end) and is raised, for the asker to get instead of an answer.
        """
        self._emit(pending.event)
        if self._hooks.observers:
            event = dataclasses.replace(pending.event, replayed=True) if again else pending.event
            try:
                self._hooks.opened(event)
            except Exception:
                self.finish(pending, "cancelled", None)
                raise

    def expiring(self, pending: PendingRequest) -> None:
        """Say that ``pending`` expires soon: a ``RequestExpiring`` on the stream, and every
        hook's ``request_expiring``."""
        event = pending.event
        assert event.expires_at is not None
        self._emit(
            RequestExpiring(
                run_id=event.run_id,
                agent_path=event.agent_path,
                depth=event.depth,
                invocation_id=event.invocation_id,
                request_id=event.request_id,
                expires_at=event.expires_at,
            )
        )
        if self._hooks.expiring_observers:
            self._hooks.expiring(event)

    def find_duplicate(self, event: RequestEvent) -> PendingRequest | None:
        """The open request asking the same question from the same agent, if any."""
        key = question_key(event)
        if key is None:
            return None
        pending = self._open_questions.get(key)
        if pending is None or pending.status != "pending":
            return None
        return pending

    def begin_wait(self, pending: PendingRequest) -> None:
        """A call starts waiting on ``pending`` (counted until it ends or ``end_wait``)."""
        pending.waiters += 1
        self.quiescence.wait_begins()

    def end_wait(self, pending: PendingRequest) -> None:
        """A call stopped waiting on ``pending``; nothing if the request's end counted it."""
        if pending.waiters:
            pending.waiters -= 1
            self.quiescence.wait_ends()

    def _ended(self, pending: PendingRequest) -> None:
        # Its waiters stop counting now: their tasks may run later, the request is over.
        if pending.waiters:
            self.quiescence.wait_ends(pending.waiters)
            pending.waiters = 0
        pending.end()

    def finish(
        self,
        pending: PendingRequest,
        status: RequestStatus,
        answer: Any,
        author: Author | None = None,
    ) -> bool:
        """End a request once: wake its waiter and announce it (with its ``author``, for an
        answer or a decline). False if it had ended."""
        if pending.status != "pending":
            return False
        pending.status = status
        pending.answer = answer
        pending.author = author
        self._ended(pending)
        self._emit(authored(pending.spec.resolved(pending.event, status, answer), author))
        if self._hooks.observers:
            self._hooks.resolved(pending.event, status, answer, author)
        return True

    def settle_quietly(
        self,
        pending: PendingRequest,
        status: RequestStatus,
        answer: Any,
        author: Author | None = None,
    ) -> None:
        """End a request whose outcome was already announced (or never will be); ``author``:
        who gave that outcome, as kept (an "always" answer's grant names them)."""
        if pending.status == "pending":
            pending.status = status
            pending.answer = answer
            pending.author = author
            pending.stored = True
            self._ended(pending)

    def accept(self, pending: PendingRequest, answer: Any, author: Author | None = None) -> None:
        """Resolve ``pending`` with an already validated answer, then run its after-answer."""
        if self.finish(pending, "answered", answer, author):
            pending.spec.after_answer(self, pending.event, answer)

    def author_of(self, request_id: str) -> Author | None:
        """Who answered the request ``request_id`` (None if unknown or nobody)."""
        pending = self._requests.get(request_id)
        return None if pending is None else pending.author

    def check_open(self, request_id: str) -> PendingRequest:
        """The open request with this id, or the error saying why it cannot be answered."""
        pending = self._requests.get(request_id)
        if pending is None:
            raise UnknownRequestError(f"no request with id {request_id!r}", request_id=request_id)
        status = pending.status
        if status == "pending":
            return pending
        if status == "answered":
            raise RequestAlreadyAnsweredError(
                f"request {request_id} was already answered", request_id=request_id
            )
        if status == "declined":
            raise RequestAlreadyAnsweredError(
                f"request {request_id} was declined: it takes no other answer",
                request_id=request_id,
            )
        if status == "expired":
            raise RequestExpiredError(
                f"request {request_id} expired before this answer came", request_id=request_id
            )
        why = "was cancelled"
        if status == "unavailable":
            why = "was resolved without an answer: nobody was listening"
        raise RequestCancelledError(f"request {request_id} {why}", request_id=request_id)

    @staticmethod
    def validate(pending: PendingRequest, answer: Any) -> Any:
        """The answer in canonical form, or ``InvalidAnswerError`` (nothing changes)."""
        try:
            return pending.spec.validate(answer)
        except (ValueError, TypeError) as e:
            rid = pending.request_id
            raise InvalidAnswerError(
                f"invalid answer for request {rid}: {e}", request_id=rid
            ) from None

    def resolve_matching(
        self,
        predicate: Callable[[RequestEvent], bool],
        answer: Any,
        author: Author | None = None,
    ) -> list[str]:
        """Answer every open request the predicate selects (used by run-wide approvals:
        ``author``, who approved for the run, answered them all)."""
        done: list[str] = []
        for pending in self.open_requests():
            if predicate(pending.event):
                self.finish(pending, "answered", pending.spec.validate(answer), author)
                done.append(pending.request_id)
        return done

    def unavailable_all(self) -> None:
        """Nobody will answer: end every open request as unavailable."""
        for pending in self.open_requests():
            self.finish(pending, "unavailable", None)


def authored(event: Event, author: Author | None) -> Event:
    """A resolved event just built (seen by nobody yet) given its answer's author."""
    if author is not None and isinstance(event, (ClarificationResolved, PermissionResolved)):
        # Set in place as the frozen dataclass's own __init__ does: a copy would cost more
        # than the rest of an answer's bookkeeping.
        put = object.__setattr__
        put(event, "answered_by", author.by)
        put(event, "channel", author.channel)
    return event


def replay_outcome(
    emit: Callable[[Event], None],
    table: RequestTable,
    spec: RequestSpec,
    event: RequestEvent,
    settled: Settlement,
) -> Any:
    """A request that ended in an earlier life (or meanwhile, elsewhere): its events emitted
    again (``replayed``, with who answered it) and its outcome given again: the answer, or
    the ``QuestionNotAnswered`` it ended with."""
    emit(dataclasses.replace(event, replayed=True))
    author = settled.author
    if settled.status == "answered":
        value = spec.revive(settled.answer)
        resolved = authored(spec.resolved(event, "answered", value), author)
        emit(dataclasses.replace(resolved, replayed=True))
        spec.after_answer(table, event, value)
        return value
    resolved = authored(spec.resolved(event, settled.status, None), author)
    emit(dataclasses.replace(resolved, replayed=True))
    if settled.status == "declined":
        message = DECLINED_TEXT
    elif settled.status == "expired":
        waited = "in time" if settled.waited is None else f"within {settled.waited:g} seconds"
        message = f"The user did not answer {waited}; the question expired."
    else:
        message = "The request was cancelled before the user answered."
    raise QuestionNotAnswered(message, status=settled.status, request_id=event.request_id)
