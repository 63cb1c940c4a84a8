"""One run a server hosts (``HostedRun``): its events for any number of readers, its
requests answered or ended, the run cancelled, how it ended.

The ``RunHost`` driving it hands it each event once (it is the run's ``EventSink``): the
events are kept in order, and every reader of ``events()`` (one that comes late too) reads
all of them from the start, then the live ones as they come, until the run has ended.

Ending a request reads as one family, on a run driven here and on one answered through the
store alike (``StoreRelay``): ``answer_request`` (the protocol's reply read as the answer;
None, or why it was refused) and ``cancel_request`` (it ends unanswered, the run goes on);
``why_refused`` is the rule both follow.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel

from ..backend import AnswerPolicy
from ..events import Event, RequestEvent
from ..exceptions import AnswerRefusedError, InvalidAnswerError, RequestError, RunLeasedError
from ..run import Run
from ._drive import STOPPED
from ._outcome import Outcome

__all__ = ["FreeLock", "HostedRun", "why_refused"]

_YIELD_EVERY = 64
"""Events a reader of ``events()`` is handed back to back before other tasks run."""


async def why_refused(request_id: str, give: Callable[[], Awaitable[object]]) -> str | None:
    """Give ``request_id`` its answer with ``give`` (which reads the protocol's reply as
    the answer and hands it to the run, or to the store): None when it was taken, else why
    not (the reply could not be read, or the answer was refused). A request that ended
    meanwhile (answered, expired, cancelled) takes nothing: None too; one an answer policy
    refused (``AnswerRefusedError``) is still pending, and the refusal says why.
    """
    try:
        await give()
    except (ValueError, TypeError) as e:
        return str(e)
    except AnswerRefusedError as e:  # who answered may not: say so, the question stays
        return str(e)
    except InvalidAnswerError as e:
        return str(e).removeprefix(f"invalid answer for request {request_id}: ")
    except RequestError:
        pass
    return None


class FreeLock:
    """A lock (``async with``) taken without a trip to the event loop when it is free: an
    ``anyio.Lock`` checkpoints even then."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = anyio.Lock()

    async def __aenter__(self) -> None:
        try:
            self._lock.acquire_nowait()
        except anyio.WouldBlock:
            await self._lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


class HostedRun:
    """One run a server hosts, driven in the server's task group.

    Attributes:
        run: The run.
        conversation: The conversation it is a turn of (``RunHost.start``), if any.
        lock: Held by the request driving it (one at a time): ``async with hosted.lock``.
        ended: Set once the run has ended (``outcome`` is known).
        notes: Why the last answer to a request was refused, by request id (said with the
            question when it is asked again).
        reason: Why it was cancelled on purpose (``cancel``), for the client.
        raised: What leaving the run's block raised, once it has ended: its failure, or the
            ``RunLeasedError`` of a run that lost its lease (its result then says cancelled).
        channel: The channel ``answer_request`` records answers on unless told (``"api"``
            unless the adapter names its own, e.g. ``"acp"``).
        answered_by: Who ``answer_request`` records answers as given by unless told.
    """

    def __init__(
        self,
        run: Run,
        conversation: str | None = None,
        *,
        channel: str = "api",
        answered_by: str | None = None,
    ) -> None:
        self.channel = channel
        self.answered_by = answered_by
        self.run = run
        self.conversation = conversation
        self.ended = anyio.Event()
        self.notes: dict[str, str] = {}
        self.reason: str | None = None
        self.raised: Exception | None = None
        self._outcome: Outcome | None = None
        self._log: list[Event] = []
        self._grew: anyio.Event | None = None

    @functools.cached_property
    def lock(self) -> FreeLock:
        """Held by the request driving the run (one at a time); made when first used."""
        return FreeLock()

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.run.run_id

    # -- the event tap ----------------------------------------------------------------------
    def take(self, event: Event) -> Awaitable[None] | None:
        """Keep one event of the run (the driver hands each over once, in order). A
        subclass that sends events on may return an awaitable the driver waits for."""
        self._log.append(event)
        grew = self._grew
        if grew is not None:
            self._grew = None
            grew.set()
        return None

    async def close(self, outcome: Outcome, raised: Exception | None) -> None:
        """The run has ended: how (``outcome``), and what leaving its block raised."""
        self._outcome = outcome
        self.raised = raised

    def finish(self) -> None:
        """Called by the driver last: ``ending``, ``ended`` set, readers told (once)."""
        if self.ended.is_set():
            return
        self.ending()
        self.ended.set()
        grew = self._grew
        if grew is not None:
            self._grew = None
            grew.set()

    async def events(self) -> AsyncIterator[Event]:
        """Every event of the run in order, from its first (however late the call), then
        the live ones as they come, until the run has ended. Any number may read at once."""
        index = 0
        log = self._log
        while True:
            while index < len(log):
                event = log[index]
                index += 1
                if index % _YIELD_EVERY == 0:
                    await anyio.lowlevel.checkpoint()  # a long backlog lets others run
                yield event
            if self.ended.is_set():
                return
            grew = self._grew
            if grew is None:
                grew = self._grew = anyio.Event()
            await grew.wait()

    @property
    def outcome(self) -> Outcome:
        """How the run ended (``STOPPED`` until it has: a server shutting down)."""
        return self._outcome or STOPPED

    # -- requests ---------------------------------------------------------------------------
    async def answer_request(
        self,
        request_id: str,
        read: Callable[[], Any],
        *,
        by: str | None = None,
        channel: str | None = None,
        policy: AnswerPolicy | None = None,
    ) -> str | None:
        """Answer ``request_id`` with what ``read`` gives (the protocol's reply read as the
        request's answer), as given by ``by`` (else ``answered_by``) on ``channel`` (else
        the run's ``channel``) under ``policy``: None when the run took it, else why not
        (``read``, the policy or the run refused it). A request that ended meanwhile
        (expired, cancelled) takes nothing and the run goes on without it: None too (see
        ``why_refused``).
        """
        who = self.answered_by if by is None else by
        where = self.channel if channel is None else channel

        async def give() -> object:
            return await self.run.respond(request_id, read(), by=who, channel=where, policy=policy)

        return await why_refused(request_id, give)

    async def cancel_request(self, request_id: str) -> None:
        """End ``request_id`` unanswered (its asker is told nobody answered); the run goes
        on. One that ended meanwhile is left as it is."""
        with contextlib.suppress(RequestError):
            self.run.cancel_request(request_id)

    # -- the run ----------------------------------------------------------------------------
    @property
    def elsewhere(self) -> bool:
        """Whether another process drives the run: it ended here because its resume was
        refused (the run's lease is live elsewhere; nothing was written: told at once) or
        because this process lost the lease on the way (``RunLeasedError``: told once
        ``ended`` is set). The run goes on there, or was cancelled there
        (``hpd_agent.store.cancel_run``)."""
        return self.run.done and (
            isinstance(self.run.result.error, RunLeasedError)
            or isinstance(self.raised, RunLeasedError)
        )

    async def wait_settled(self) -> list[RequestEvent] | Outcome:
        """Wait until the run waits for answers alone (``Run.settled``: its pending
        requests) or has ended (its ``Outcome``)."""
        pending = await self.run.settled()
        if pending:
            return pending
        if not self.ended.is_set():  # most often it is: no trip through the event loop
            await self.ended.wait()
        return self.outcome

    def cancel_nowait(self, reason: str | None = None) -> None:
        """Cancel the run on purpose (its stored requests end cancelled), without waiting;
        the first ``reason`` given is kept (``reason``), for the client."""
        if self.reason is None:
            self.reason = reason
        self.run.cancel()

    async def cancel(self, reason: str | None = None) -> Outcome:
        """``cancel_nowait``, then wait for the run to end; how it ended."""
        self.cancel_nowait(reason)
        await self.ended.wait()
        return self.outcome

    def ending(self) -> None:
        """Called as the run ends, before ``ended`` is set (override to let go of what
        waits on it)."""
