"""Runs a server hosts: each in the server's task group, found again by id (``RunHost``).

A server that carries an agent's questions across a protocol (MCP, A2A, ACP) answers a
request while the run waits: the run outlives the request that started it, and the next
request (maybe on another connection, maybe after a restart) finds it by its run id. With a
store, a run this process does not hold (the server was restarted) is resumed from the
store: the journal replays it to where it waited, nothing runs twice. A run another process
of the store drives is followed in the store (``RunHost.moved_on``, and ``StoreRelay`` gives
it answers there) and cancelled through it (``RunHost.cancel``). A run may be a turn of a
conversation: the conversation's earlier completed turns are its history (``Histories``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from functools import partial
from typing import Any, Generic

import anyio
import anyio.abc
from typing_extensions import TypeVar

from ..agent import Agent
from ..exceptions import ConversationBusyError, UnknownRunError
from ..run import Run
from ..store import RequestRecord, RunRecord, Store, cancel_run
from ._drive import EventSink, drive
from ._histories import Histories, MemoryHistories, ThreadHistories
from ._hosted import FreeLock, HostedRun

__all__ = ["H", "RunHost", "UnknownRunError"]

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
        histories: Where each conversation's history is kept (default: in the store's
            thread tables when it declares them, ``ThreadHistories``; else in memory).
    """

    def __init__(
        self,
        agent: Agent,
        store: Store | None,
        task_group: anyio.abc.TaskGroup,
        hosted: Callable[[Run], H],
        *,
        histories: Histories | None = None,
    ) -> None:
        self.agent = agent
        self.store = store
        self.histories: Histories = _histories(store) if histories is None else histories
        self._tg = task_group
        self._hosted = hosted
        self._live: dict[str, H] = {}
        self._turns: dict[str, H] = {}
        self._reopening = FreeLock()

    async def start(
        self, query: str, *, conversation: str | None = None, run_id: str | None = None
    ) -> H:
        """A new run of the agent on ``query``, driven in the server's task group.

        Args:
            query: The prompt.
            conversation: The conversation the run is the next turn of: the messages of
                its completed turns are the run's history, and the run's are once it
                completes (a failed or cancelled turn leaves the history as it was).
            run_id: The run's id (default: a new one).

        Raises:
            ConversationBusyError: The conversation's last turn is still running.
        """
        return self._spawn(self._kept(await self._new(query, conversation, run_id), conversation))

    async def run_here(
        self,
        query: str,
        *,
        conversation: str | None = None,
        run_id: str | None = None,
        started: Callable[[H], object] | None = None,
    ) -> H:
        """``start``, but the run is driven in the calling task: return once it has ended.

        For a request that waits for the run's end anyway (an ACP prompt): no task to
        hand it to, no wait for its end, so its answer goes out that much sooner.
        Meanwhile the run is found by id like any other (``live``, ``reopen``,
        ``cancel``); the caller being cancelled stops it as a server shutting down does
        (``STOPPED``: a stored run stays resumable).

        Args:
            query: The prompt.
            conversation: As for ``start``.
            run_id: As for ``start``.
            started: Called with the run as it starts, before it runs (e.g. kept so that
                another request can cancel it).

        Raises:
            ConversationBusyError: The conversation's last turn is still running.
        """
        hosted = self._kept(await self._new(query, conversation, run_id), conversation)
        if started is not None:
            try:
                started(hosted)
            except BaseException:
                self._forget(hosted)  # never entered: nothing of it ran
                raise
        await self._drive(hosted, self.sink(hosted, resumed=False))
        return hosted

    async def _new(self, query: str, conversation: str | None, run_id: str | None) -> Run:
        history = None
        if conversation is not None:
            self._idle(conversation)
            history = await self.histories.history(conversation)
            self._idle(conversation)  # another start may have taken it while this one read
        # no wait from here until the caller keeps the run as the conversation's turn
        return self.agent.stream(query, history=history, run_id=run_id, store=self.store)

    def _idle(self, conversation: str) -> None:
        if conversation in self._turns:
            raise ConversationBusyError(
                "this conversation's turn is still running: wait for it or cancel it"
            )

    def turn(self, conversation: str) -> H | None:
        """The conversation's turn running now, if any."""
        return self._turns.get(conversation)

    def live(self, run_id: str) -> H | None:
        """The run ``run_id`` if this process drives it."""
        return self._live.get(run_id)

    async def reopen(self, run_id: str, *, conversation: str | None = None) -> H | RunRecord:
        """The run ``run_id``: live here, or resumed from the store (a turn of
        ``conversation`` when given: its messages are kept once it completes); the store's
        record of it if it has ended.

        Raises:
            UnknownRunError: Not a run of this agent that this process or its store has.
        """
        live = self._live.get(run_id)
        if live is not None:  # no lock to take (a trip to the event loop) for a live run
            return live
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
            resumed = self.agent.resume_stream(run_id, store=store)
            return self._spawn(self._kept(resumed, conversation), resumed=True)

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
        await hosted.cancel()
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

    def sink(self, hosted: H, *, resumed: bool) -> EventSink:
        """What ``hosted``'s run is driven with (``drive``): ``hosted`` itself. A server
        may wrap it, e.g. in its ``Activity`` log's ``watch`` (``resumed``: the run was
        resumed from the store, not started)."""
        return hosted

    def _kept(self, run: Run, conversation: str | None) -> H:
        """``run`` hosted: found by its id (and as its conversation's turn) from now on."""
        hosted = self._hosted(run)
        hosted.conversation = conversation
        self._live[hosted.run_id] = hosted
        if conversation is not None:
            self._turns[conversation] = hosted
        return hosted

    def _spawn(self, hosted: H, *, resumed: bool = False) -> H:
        try:
            # Not ``start``: waiting for the run to be entered cost the caller a trip to the
            # event loop and a future; the driving task always starts (a cancelled one too,
            # up to its first wait), so the run always ends and ``ended`` is always set.
            self._tg.start_soon(self._drive, hosted, self.sink(hosted, resumed=resumed))
        except BaseException:
            self._forget(hosted)
            raise
        return hosted

    def _forget(self, hosted: H) -> None:
        if self._live.get(hosted.run_id) is hosted:  # not a later life of the same run
            del self._live[hosted.run_id]
        conversation = hosted.conversation
        if conversation is not None and self._turns.get(conversation) is hosted:
            del self._turns[conversation]

    async def _drive(self, hosted: H, sink: EventSink) -> None:
        # Each event is kept once, for every reader of ``hosted.events()``; draining keeps
        # the run listening. A failed run's outcome holds its error (the server reports
        # it); one that lost its lease has it in ``hosted.raised``.
        try:
            await drive(hosted.run, sink, closed=partial(self._ended, hosted), task_group=self._tg)
        finally:
            self._forget(hosted)  # (done already, unless closing the sink failed)
            hosted.finish()

    async def _ended(self, hosted: H) -> None:
        """The run has ended and its sink been told: a completed turn's messages kept,
        then the run forgotten and its waiters told."""
        result = hosted.outcome.result
        conversation = hosted.conversation
        if conversation is not None and result is not None and result.status == "completed":
            await self.histories.keep(conversation, result.messages)
        self._forget(hosted)
        hosted.finish()


def _histories(store: Store | None) -> Histories:
    """Conversations kept in the store's thread tables when it declares them, else here."""
    tables: Any = None if store is None else getattr(store.capabilities(), "threads", None)
    return MemoryHistories() if tables is None else ThreadHistories(tables)
