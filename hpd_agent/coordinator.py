"""The coordinator: one per root run, shared by every agent of its tree.

It owns the run's single ordered event stream (every agent at every depth emits here), the
table of open requests, and a request's whole round trip: the asker names its request id up
front; the request is kept by the run's ``RequestBackend`` and registered *before* its event
goes out; ``respond`` wakes exactly the waiter whose id it names, atomically (it either
accepts the answer or raises and changes nothing); ``respond``, ``cancel_request`` and
``cancel_all`` end a request from outside its asker, each checking before it changes anything.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager, nullcontext
from typing import Any, Literal, get_args

import anyio
import anyio.lowlevel

from ._core.conversations import ConversationKeeper, Conversations
from ._core.deadline import deadlines_paused, paused_wait
from ._core.expiry import arm, check_warning, reopen, request_event, warn_when_due
from ._core.journaling import RunJournal
from ._core.outlet import Outlet
from ._core.quiescence import Quiescence
from ._core.requests import (
    DECLINED_TEXT,
    Asker,
    LocalRequests,
    PendingRequest,
    RequestBackend,
    RequestSpec,
    RequestTable,
    Settlement,
    replay_outcome,
)
from ._core.services import RunServices
from ._values.keywords import takes_keyword
from ._values.records import RequestRecord
from .backend import API, AnswerPolicy, Author, check_policy
from .events import Event, RequestEvent
from .exceptions import (
    NoUserAvailableError,
    QuestionNotAnswered,
    RequestAlreadyAnsweredError,
    RequestCancelledError,
    RequestError,
    UserError,
)
from .hooks import HookSet
from .messages import Usage
from .questions import Decline

__all__ = [
    "ConversationKeeper",
    "Conversations",
    "Coordinator",
    "OnUnhandled",
    "RequestSpec",
    "check_on_unhandled",
]

OnUnhandled = Literal["decline", "error", "interrupt"]
"""What a request does when no handler and no stream consumer can answer it:
``"decline"`` resolves it at once as unavailable (the asking tool tells the model nobody is
there); ``"error"`` fails the run with ``NoUserAvailableError``; ``"interrupt"`` (needs a
store) ends the run with status ``"interrupted"``, leaving the request pending in the store
for ``Agent.resume(run_id, answers=...)``. With a store and any other policy a request waits
for an answer through the store, since any process holding the store can answer it."""


def check_on_unhandled(value: object) -> OnUnhandled:
    """``value`` if it is an ``OnUnhandled`` policy, else ``UserError`` listing the choices."""
    choices: tuple[str, ...] = get_args(OnUnhandled)
    if value not in choices:
        raise UserError(
            f"on_unhandled must be one of {', '.join(map(repr, choices))}, got {value!r}"
        )
    return value  # type: ignore[return-value]


_NO_HOOKS = HookSet()
LOCAL_REQUESTS = LocalRequests()
"""The in-memory backend; stateless, so one serves every run."""


class Coordinator:
    """One per root run: the ordered event stream, the open requests, run-wide state.

    Args:
        run_id: Id of the root run.
        sink: Where events go (the run's stream); None drops them (nobody is watching).
        listening: Whether someone can answer requests (a handler or a stream consumer).
        on_unhandled: Policy for requests nobody can answer; see ``OnUnhandled``.
        hooks: The run's hooks (wrappers and observers).
        backend: Where requests are kept (``LocalRequests`` when omitted).
    """

    __slots__ = ("_input_tokens", "_output_tokens", "_requests_n", "backend", "cancelling", "conversations", "hooks", "journal", "keeps_authors", "listening", "on_unhandled", "outlet", "quiescence", "requests", "run_id", "services")  # fmt: skip  # one per run in flight: no __dict__

    def __init__(
        self,
        run_id: str,
        *,
        sink: Callable[[Event], None] | None = None,
        listening: bool = False,
        on_unhandled: OnUnhandled = "decline",
        hooks: HookSet | None = None,
        backend: RequestBackend | None = None,
    ) -> None:
        self.run_id = run_id
        self.outlet = Outlet(sink)  # its ``sink`` may be swapped (``Run.deliver``)
        self.listening = listening
        self.on_unhandled: OnUnhandled = on_unhandled
        self.hooks = hooks if hooks is not None else _NO_HOOKS
        self.backend: RequestBackend = backend if backend is not None else LOCAL_REQUESTS
        self.keeps_authors = False
        """Whether the backend's ``resolve`` takes an answer's ``author`` (an old one does not)."""
        self.quiescence = Quiescence()
        self.requests = RequestTable(self.outlet.emit, self.hooks, self.quiescence)
        self.conversations = Conversations()
        self.cancelling = False
        """Set when the run is cancelled on purpose (``Run.cancel``, leaving its block early).
        Only then do kept requests end as cancelled; any other cancellation (the process
        shutting down, an outer cancel scope) leaves them pending for a resume, like a crash."""
        self.services: RunServices | None = None
        """What the run keeps open for its toolsets (set by the root run when its tree has one)."""
        self._requests_n = self._input_tokens = self._output_tokens = 0
        self.journal: RunJournal | None = None  # a durable run's: called before any hook

    def configure(
        self, hooks: HookSet, backend: RequestBackend, journal: RunJournal | None = None
    ) -> None:
        """Install the run's hooks, request backend and journal (before anything runs)."""
        self.hooks = hooks
        self.journal = journal
        self.backend = backend
        self.keeps_authors = takes_keyword(backend.resolve, "author")
        self.requests = RequestTable(self.outlet.emit, hooks, self.quiescence)

    # -- events ------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        """Put an event on the run's stream (dropped when nobody is watching)."""
        sink = self.outlet.sink
        if sink is not None:
            sink(event)

    @property
    def observed(self) -> bool:
        """Whether ``emit`` delivers events anywhere (if not, the hot path builds none)."""
        return self.outlet.sink is not None

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

    # -- interrupt and quiescence ------------------------------------------------------
    @property
    def parks(self) -> bool:
        """Whether an unanswered request parks (ends the run for a later resume)."""
        return not self.listening and self.on_unhandled == "interrupt"

    @contextmanager
    def parked(self) -> Generator[None]:
        """Count a wait on a request as parked, when nobody here can answer it."""
        parks = self.parks
        if parks:
            self.quiescence.park(+1)
        try:
            yield
        finally:
            if parks:
                self.quiescence.park(-1)

    # -- requests ----------------------------------------------------------------------
    def pending(self) -> list[RequestEvent]:
        """Requests still waiting for an answer, oldest first."""
        return self.requests.pending()

    @property
    def run_approvals(self) -> set[tuple[tuple[str, ...], str]]:
        """(agent path, tool name) pairs the human approved for the rest of the run."""
        return self.requests.run_approvals

    async def request(
        self,
        asker: Asker,
        spec: RequestSpec,
        *,
        request_id: str,
        timeout: float | None,
        warn_before: float | None = None,
    ) -> Any:
        """Raise a request from ``asker`` under ``request_id`` and wait for its answer.

        Returns the validated answer. Raises ``QuestionNotAnswered`` when the user declines
        it, it expires, is cancelled or nobody can answer (``NoUserAvailableError`` under
        policy "error"); ``UserError`` for a bad ``warn_before`` (``_core/expiry.py``).
        Time waiting pauses the asker's enclosing deadlines. A question identical to one
        still open from the same agent is not asked again: it shares that one's answer.
        An exception from a hook's ``request_opened`` is raised here, the request then
        ended as cancelled.
        """
        if warn_before is not None:
            check_warning(warn_before, timeout)
        if self.backend.durable:
            return await _kept_request(self, asker, spec, request_id, timeout, warn_before)
        # In memory: the request lives here only (the hot path of a question).
        event = request_event(spec, request_id, asker, timeout)
        table = self.requests
        duplicate = table.find_duplicate(event)
        if duplicate is not None:
            return await self.join(duplicate, asker, timeout)
        pending = table.track(event, spec)
        arm(pending, warn_before)
        table.announce(pending)
        if not self.listening:
            table.finish(pending, "unavailable", None)
        else:
            await _wait(self, pending, asker, timeout)
            if pending.status == "pending":
                table.finish(pending, "expired", None)
        return self.outcome(pending, timeout)

    async def join(self, pending: PendingRequest, asker: Asker, timeout: float | None) -> Any:
        """Wait for another asker's identical request; its answer is this asker's too."""
        table = self.requests
        table.begin_wait(pending)
        try:
            with self.parked(), anyio.move_on_after(math.inf if timeout is None else timeout):
                await paused_wait(pending.done, asker)
        finally:
            table.end_wait(pending)
        if pending.status == "pending":
            rid = pending.request_id
            raise QuestionNotAnswered(
                f"The user did not answer within {timeout:g} seconds.",
                status="expired",
                request_id=rid,
            )
        return self.outcome(pending, timeout)

    def outcome(self, pending: PendingRequest, timeout: float | None) -> Any:
        """The answer of a resolved request, or the ``QuestionNotAnswered`` it ends with."""
        status = pending.status
        if status == "answered":
            return pending.answer
        rid = pending.request_id
        if status == "unavailable":
            if self.on_unhandled == "error":
                raise NoUserAvailableError(
                    f"request {rid} arose with no handler and no stream consumer to answer it"
                )
            raise QuestionNotAnswered(
                "No user is available to answer right now.", status="unavailable", request_id=rid
            )
        if status == "declined":
            raise QuestionNotAnswered(DECLINED_TEXT, status="declined", request_id=rid)
        if status == "expired":
            within = "in time" if timeout is None else f"within {timeout:g} seconds"
            raise QuestionNotAnswered(
                f"The user did not answer {within}.", status="expired", request_id=rid
            )
        raise QuestionNotAnswered(
            "The request was cancelled before the user answered.",
            status="cancelled",
            request_id=rid,
        )

    # -- answering ----------------------------------------------------------------------
    async def respond(
        self,
        request_id: str,
        answer: Any,
        *,
        author: Author = API,
        policy: AnswerPolicy | None = None,
    ) -> Any:
        """Answer an open request; returns the answer as validated.

        ``Decline()`` as the answer ends the request as declined instead (any kind of
        request; the asker gets ``QuestionNotAnswered(status="declined")``); it is returned
        as given. ``author`` (who answers, on which channel) goes with the answer to the
        backend and onto the resolved event; a ``policy`` is asked first whether that
        author may answer (``AnswerRefusedError`` if not).

        Atomic: on any error nothing changes. With a durable backend the answer is written
        there first, and its conditional update decides between racing answers (from this
        process or any other); the loser gets the distinct error.

        Raises:
            UnknownRequestError, RequestAlreadyAnsweredError, RequestExpiredError,
            RequestCancelledError, AnswerRefusedError, InvalidAnswerError.
        """
        if not self.backend.durable:
            return self.respond_nowait(request_id, answer, author=author, policy=policy)
        pending = self._open_for_answer(request_id, author, policy)
        value = self._checked(pending, answer)
        status = "declined" if isinstance(value, Decline) else "answered"
        kept = None if status == "declined" else value
        pending.answering += 1
        try:
            await self.keep_outcome(request_id, status, kept, author)  # the store decides a race
        finally:
            pending.answering -= 1
        pending.stored = True
        self._settle(pending, value, author)
        return value

    async def keep_outcome(
        self, request_id: str, status: Any, answer: Any, author: Author | None
    ) -> None:
        """Write how a request ended to the backend (with its author, if it keeps one)."""
        if author is not None and self.keeps_authors:
            await self.backend.resolve(request_id, status, answer, author=author)
        else:
            await self.backend.resolve(request_id, status, answer)

    def _checked(self, pending: PendingRequest, answer: Any) -> Any:
        """The answer as validated, or ``Decline()`` as given (it fits every request)."""
        if isinstance(answer, Decline):
            return answer
        return self.requests.validate(pending, answer)

    def _settle(self, pending: PendingRequest, value: Any, author: Author) -> None:
        """End ``pending`` here with a checked answer (or decline), unless it has ended."""
        if pending.status != "pending":
            return
        if isinstance(value, Decline):
            self.requests.finish(pending, "declined", None, author)
        else:
            self.requests.accept(pending, value, author)

    def _open_for_answer(
        self, request_id: str, author: Author, policy: AnswerPolicy | None
    ) -> PendingRequest:
        pending = self.requests.check_open(request_id)
        if self.cancelling:
            raise RequestCancelledError(
                f"request {request_id} was cancelled: its run is being cancelled",
                request_id=request_id,
            )
        if policy is not None:
            check_policy(policy, author.by, RequestRecord.from_event(pending.event))
        return pending

    def cancel_all(self) -> None:
        """The run is being cancelled on purpose: from now on no answer is accepted.

        In memory every open request ends cancelled at once, so an answer given after the
        cancel is refused, never half-accepted. With a durable backend each waiter writes
        "cancelled" to the store as it unwinds; an answer the store took first wins there,
        and the run's events say so.
        """
        self.cancelling = True
        if not self.backend.durable:
            for pending in self.requests.open_requests():
                self.requests.finish(pending, "cancelled", None)

    def respond_nowait(
        self,
        request_id: str,
        answer: Any,
        *,
        author: Author = API,
        policy: AnswerPolicy | None = None,
    ) -> Any:
        """``respond`` without awaiting, for a run whose requests live in memory only (e.g.
        from an event sink, the instant the request is emitted).

        Raises:
            UserError: The run keeps its requests in a store: use ``respond``.
        """
        if self.backend.durable:
            raise UserError("this run keeps its requests in a store: await respond() instead")
        pending = self._open_for_answer(request_id, author, policy)
        value = self._checked(pending, answer)
        self._settle(pending, value, author)
        return value

    def cancel_request(self, request_id: str) -> None:
        """End an open request without an answer; its asker sees "cancelled".

        Raises:
            RequestAlreadyAnsweredError: An answer is being written to the store: it came
                first, so it decides (``respond`` returns it, the stream and the store say
                "answered"); or the request has its answer already.
            UnknownRequestError, RequestExpiredError, RequestCancelledError: As ``respond``.
        """
        pending = self.requests.check_open(request_id)
        if pending.answering:
            raise RequestAlreadyAnsweredError(
                f"request {request_id} is being answered: its answer came first",
                request_id=request_id,
            )
        self.requests.finish(pending, "cancelled", None)

    # -- listening ----------------------------------------------------------------------
    def stop_listening(self) -> None:
        """Nobody will answer from now on: resolve every open request as unavailable."""
        self.listening = False
        if self.backend.durable:
            # Anyone holding the store can still answer; only "interrupt" gives up here.
            if self.on_unhandled == "interrupt" and self.pending():
                self.quiescence.interrupt()
            return
        self.requests.unavailable_all()


async def _kept_request(
    coordinator: Coordinator,
    asker: Asker,
    spec: RequestSpec,
    request_id: str,
    timeout: float | None,
    warn_before: float | None,
) -> Any:
    """``Coordinator.request`` with a durable backend: the request is kept there before its
    event goes out, an earlier life's outcome is replayed (a pending one keeps its deadline
    and warning), and the outcome reached here is written back (the backend's wins a race)."""
    backend = coordinator.backend
    first = backend.alias_of(request_id)
    if first is not None:
        return await _follow(coordinator, asker, spec, first, timeout)
    event = request_event(spec, request_id, asker, timeout)
    table = coordinator.requests
    duplicate = table.find_duplicate(event)
    if duplicate is not None:
        await backend.record_alias(request_id, duplicate.request_id)
        return await coordinator.join(duplicate, asker, timeout)
    # Tracked before the backend write (which yields), so an identical question asked
    # meanwhile by a sibling joins this one instead of racing it.
    pending = table.track(event, spec)
    try:
        settled, remaining = await backend.open(event, timeout)
    except BaseException:
        table.settle_quietly(pending, "cancelled", None)
        raise
    if settled is not None:
        table.settle_quietly(pending, settled.status, None, settled.author)
        value = replay_outcome(coordinator.emit, coordinator.requests, spec, event, settled)
        pending.answer = value
        return value
    again = reopen(backend, pending, warn_before)
    try:
        table.announce(pending, again=again)
    except Exception:
        # An observer raised: the request is withdrawn here (cancelled), and in the store.
        with anyio.CancelScope(shield=True):
            await _mirror(coordinator, pending, "cancelled", None)
        raise
    with coordinator.parked():
        try:
            await _wait(coordinator, pending, asker, remaining)
        except BaseException:
            if coordinator.cancelling and not pending.stored:
                with anyio.CancelScope(shield=True):
                    await _mirror(coordinator, pending, "cancelled", None)
            raise
    if not pending.stored:
        status = pending.status
        if status == "pending":
            await _mirror(coordinator, pending, "expired", None)
        else:
            answer = pending.answer
            await _mirror(
                coordinator, pending, "cancelled" if status == "unavailable" else status, answer
            )
    return coordinator.outcome(pending, timeout)


async def _wait(
    coordinator: Coordinator, pending: PendingRequest, asker: Asker, timeout: float | None
) -> None:
    """Wait until ``pending`` is resolved or ``timeout`` passes (then it is still pending).

    With a durable backend, an answer from outside (another process) also resolves it.
    If the waiting task is cancelled, the request ends as cancelled, unless the run is
    being interrupted to be resumed later. The wait counts toward ``Run.settled``.
    """
    coordinator.requests.begin_wait(pending)
    try:
        with nullcontext() if timeout is None else anyio.move_on_after(timeout):  # no scope
            if pending.warn_before is not None and timeout is not None:
                await warn_when_due(coordinator, pending, asker, _waiting, timeout)
            await _waiting(coordinator, pending, asker)
    except BaseException:
        # Interrupted: it stays pending for a resume. Cancelled on purpose with a store:
        # the store decides between this cancel and a racing answer (see _kept_request).
        keep = coordinator.quiescence.interrupted or (
            coordinator.cancelling and coordinator.backend.durable
        )
        if pending.status == "pending" and not keep:
            coordinator.requests.finish(pending, "cancelled", None)
        raise
    finally:
        coordinator.requests.end_wait(pending)


def _waiting(coordinator: Coordinator, pending: PendingRequest, asker: Asker) -> Awaitable[None]:
    """Wait until ``pending`` ends: here, or (durable) from the backend too."""
    if not coordinator.backend.durable:
        return paused_wait(pending.done, asker)
    return _backend_or_here(coordinator, pending, asker)


async def _backend_or_here(coordinator: Coordinator, pending: PendingRequest, asker: Asker) -> None:
    """Wait for the backend's outcome (an answer from anywhere) in this very task, stopped
    at once when the request ends here instead (no second task to start and cancel)."""
    # One turn of the event loop first: an answer given the moment the request is seen (a
    # UI answering from the stream, a scripted human) ends it here, with no look at the
    # backend and no watch to set up and tear down.
    await anyio.lowlevel.checkpoint()
    if pending.status != "pending":
        return
    settled: Settlement | None = None
    with deadlines_paused(asker), anyio.CancelScope() as here:

        def ended_here() -> None:
            # An outcome the backend holds wakes the backend's wait by itself; only one
            # reached here alone (a local cancel) must stop it.
            if not pending.stored:
                here.cancel()

        pending.on_done = ended_here
        try:
            settled = await coordinator.backend.wait(pending.request_id)
        finally:
            pending.on_done = None
    if settled is not None:
        _apply(coordinator, pending, settled)


def _apply(coordinator: Coordinator, pending: PendingRequest, settled: Settlement) -> None:
    """Resolve ``pending`` as the backend says it was resolved."""
    if pending.status != "pending":
        return
    pending.stored = True
    if settled.status == "answered":
        coordinator.requests.accept(pending, pending.spec.revive(settled.answer), settled.author)
    else:
        coordinator.requests.finish(pending, settled.status, None, settled.author)


async def _mirror(
    coordinator: Coordinator, pending: PendingRequest, status: Any, answer: Any
) -> None:
    """Write an outcome reached here to the backend; the backend's wins a race."""
    rid = pending.request_id
    author = pending.author
    try:
        await coordinator.keep_outcome(
            rid, status, answer if status == "answered" else None, author
        )
    except RequestError:
        found = await coordinator.backend.settlement(rid)
        if found is not None and found[1] is not None:
            _apply(coordinator, pending, found[1])
        return
    pending.stored = True
    if pending.status == "pending":
        coordinator.requests.finish(pending, status, answer, author)


async def _follow(
    coordinator: Coordinator, asker: Asker, spec: RequestSpec, first: str, timeout: float | None
) -> Any:
    """A replayed asker that had joined an identical question: share its outcome again."""
    live = coordinator.requests.get(first)
    if live is not None and live.status == "pending":
        return await coordinator.join(live, asker, timeout)
    found = await coordinator.backend.settlement(first)
    if found is None:
        raise QuestionNotAnswered(
            "The request was lost before the user answered.", status="cancelled", request_id=first
        )
    event, settled = found
    if settled is None:
        # The first asker has not reached its request yet in this life; wait for the
        # backend, counted as parked so an interrupt is not held up by this wait.
        quiescence = coordinator.quiescence
        quiescence.wait_begins()
        try:
            with coordinator.parked():
                settled = await coordinator.backend.wait(first)
        finally:
            quiescence.wait_ends()
    return replay_outcome(coordinator.emit, coordinator.requests, spec, event, settled)
