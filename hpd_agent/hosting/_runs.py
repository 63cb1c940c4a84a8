"""Runs a server hosts: each in the server's task group, found again by id (``RunHost``).

A server that carries an agent's questions across a protocol (MCP, A2A) answers a request
while the run waits: the run outlives the request that started it, and the next request
(maybe on another connection, maybe after a restart) finds it by its run id. With a store,
a run this process does not hold (the server was restarted) is resumed from the store: the
journal replays it to where it waited, nothing runs twice. A run another process of the
store drives is followed in the store (``RunHost.moved_on``, and ``StoreRelay`` gives it
answers there) and cancelled through it (``RunHost.cancel``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Generic

import anyio
import anyio.abc
from typing_extensions import TypeVar

from ..agent import Agent
from ..events import RequestEvent
from ..exceptions import InvalidAnswerError, RequestError, RunLeasedError, UnknownRunError
from ..run import Run, RunResult
from ..store import RequestRecord, RunRecord, Store, cancel_run

__all__ = ["HostedRun", "RunHost", "UnknownRunError", "given"]


async def given(request_id: str, give: Callable[[], Awaitable[object]]) -> str | None:
    """Give ``request_id`` its answer with ``give`` (which reads the protocol's reply as
    the answer and hands it to the run, or to the store): None when it was taken, else why
    not (the reply could not be read, or the answer was refused). A request that ended
    meanwhile (answered, expired, cancelled) takes nothing: None too.
    """
    try:
        await give()
    except (ValueError, TypeError) as e:
        return str(e)
    except InvalidAnswerError as e:
        return str(e).removeprefix(f"invalid answer for request {request_id}: ")
    except RequestError:
        pass
    return None


class HostedRun:
    """One run a server hosts, driven in the server's task group.

    Attributes:
        run: The run.
        lock: Held by the request driving it (one at a time).
        ended: Set once the run has ended.
        notes: Why the last answer to a request was refused, by request id (said with the
            question when it is asked again).
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.lock = anyio.Lock()
        self.ended = anyio.Event()
        self.notes: dict[str, str] = {}
        self.raised: Exception | None = None
        """What leaving the run's block raised, once it has ended: its failure, or the
        ``RunLeasedError`` of a run that lost its lease (its result then says cancelled)."""

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.run.run_id

    async def answer(self, request_id: str, read: Callable[[], Any]) -> str | None:
        """Answer ``request_id`` with what ``read`` gives (the protocol's reply read as the
        request's answer): None when the run took it, else why not (``read`` or the run
        refused it). A request that ended meanwhile (expired, cancelled) takes nothing and
        the run goes on without it: None too (see ``given``).
        """
        return await given(request_id, lambda: self.run.respond(request_id, read()))

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

    async def stop(self) -> list[RequestEvent] | RunResult:
        """Wait until the run waits for answers (its pending requests) or has ended."""
        pending = await self.run.settled()
        if pending:
            return pending
        await self.ended.wait()
        return self.run.result

    def ending(self) -> None:
        """Called as the run ends, before ``ended`` is set (override to let go of what
        waits on it)."""


H = TypeVar("H", bound=HostedRun, default=HostedRun)

_ENDED = ("completed", "failed", "cancelled")
_FOLLOW_PAUSE = (0.05, 1.0)
"""Seconds between looks at the store while following a run driven elsewhere: the first,
then doubling up to the second."""


class RunHost(Generic[H]):
    """The runs a server hosts, by run id.

    Args:
        agent: The served agent.
        store: Where runs are journaled, or None (they live in this process only).
        task_group: The server's: runs live in it, not in the request that started them.
        hosted: Makes the ``HostedRun`` (or subclass) kept for each run.
    """

    def __init__(
        self,
        agent: Agent,
        store: Store | None,
        task_group: anyio.abc.TaskGroup,
        hosted: Callable[[Run], H],
    ) -> None:
        self.agent = agent
        self.store = store
        self._tg = task_group
        self._hosted = hosted
        self._live: dict[str, H] = {}
        self._reopening = anyio.Lock()

    async def start(self, query: str, run_id: str | None = None) -> H:
        """A new run of the agent on ``query`` (with ``run_id`` when given)."""
        return await self._serve(self.agent.stream(query, run_id=run_id, store=self.store))

    def live(self, run_id: str) -> H | None:
        """The run ``run_id`` if this process drives it."""
        return self._live.get(run_id)

    async def reopen(self, run_id: str) -> H | RunRecord:
        """The run ``run_id``: live here, or resumed from the store; the store's record of
        it if it has ended.

        Raises:
            UnknownRunError: Not a run of this agent that this process or its store has.
        """
        async with self._reopening:  # two requests for one stored run resume it once
            live = self._live.get(run_id)
            if live is not None:
                return live
            store = self.store
            record = None if store is None else await store.get_run(run_id)
            if store is None or record is None or record.agent_name != self.agent.name:
                raise UnknownRunError(f"no run {run_id!r} of agent {self.agent.name!r} here")
            if record.status in ("completed", "failed", "cancelled"):
                return record
            return await self._serve(self.agent.resume_stream(run_id, store=store))

    async def cancel(self, run_id: str) -> None:
        """Cancel the run ``run_id`` wherever it is driven; return once it has ended.

        Live here: cancelled. Stored and driven by no process (this server restarted, or
        the process driving it died): resumed here, replayed to where it waited, then
        cancelled, so its stored requests end too. Driven by another process: cancelled
        through the store (``hpd_agent.store.cancel_run``: that process is fenced out and
        stops, at once where it waits for a human). A run neither this process nor its
        store has, or one that ended, is left alone.
        """
        hosted = self.live(run_id)
        if hosted is None and self.store is not None:
            try:
                found = await self.reopen(run_id)
            except UnknownRunError:
                return
            if isinstance(found, RunRecord):
                return
            await found.run.settled()  # replayed to where it waited (or refused at once)
            hosted = found
        if hosted is None:
            return
        hosted.run.cancel()
        await hosted.ended.wait()
        if hosted.elsewhere and self.store is not None:
            await cancel_run(self.store, run_id)

    async def moved_on(
        self, run_id: str, known: Collection[str], wait: float
    ) -> H | RunRecord | list[RequestRecord]:
        """Follow the stored run ``run_id``, which another process drives
        (``HostedRun.elsewhere``), until it moves on.

        The store tells nothing more than what it holds, so "moved on" is: the run ended,
        or it asks a request not in ``known``. If the run's lease lapses meanwhile (the
        process driving it died), the run is resumed here.

        Args:
            run_id: The run.
            known: The requests the caller knew pending (asked, or answered just now).
            wait: Seconds to follow it at most; then whatever is pending is returned.

        Returns:
            The run's record once it has ended; its pending requests (maybe none) once it
            has moved on or ``wait`` is over; the run, live here, if it was resumed here.

        Raises:
            UnknownRunError: The store has no such run of this agent.
        """
        store = self.store
        if store is None:
            raise UnknownRunError(f"no run {run_id!r} of agent {self.agent.name!r} here")
        deadline = time.monotonic() + wait
        pause = _FOLLOW_PAUSE[0]
        while True:
            record = await store.get_run(run_id)
            if record is None or record.agent_name != self.agent.name:
                raise UnknownRunError(f"no run {run_id!r} of agent {self.agent.name!r} here")
            if record.status in _ENDED:
                return record
            pending = await store.list_requests(run_id=run_id)
            left = deadline - time.monotonic()
            if left <= 0 or any(r.request_id not in known for r in pending):
                return pending
            if await self._lapsed(store, run_id):
                found = await self.reopen(run_id)
                if isinstance(found, HostedRun):
                    await found.run.settled()  # a resume refused again ends at once
                if not isinstance(found, HostedRun) or not found.elsewhere:
                    return found
            await anyio.sleep(min(pause, left))
            pause = min(pause * 2, _FOLLOW_PAUSE[1])

    @staticmethod
    async def _lapsed(store: Store, run_id: str) -> bool:
        lease = await store.get_lease(run_id)
        return lease is None or lease.expires_at <= time.time()

    async def _serve(self, run: Run) -> H:
        hosted = self._hosted(run)
        self._live[hosted.run_id] = hosted
        try:
            await self._tg.start(self._drive, hosted)
        except BaseException:
            self._live.pop(hosted.run_id, None)
            raise
        return hosted

    async def _drive(
        self,
        hosted: H,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            async with hosted.run as run:
                task_status.started()
                async for _ in run:
                    pass  # the events go nowhere: draining keeps the run listening
        except Exception as e:
            # A failed run: its result holds the error, the server reports it. One that
            # lost its lease raises it here (``elsewhere``).
            hosted.raised = e
        finally:
            self._live.pop(hosted.run_id, None)
            hosted.ending()
            hosted.ended.set()
