"""Waiting for requests to be resolved by other processes, with one watcher per store.

However many requests wait in one process, one of the waiting tasks (the *leader*) watches
the database for all of them: it asks the store's ``watch`` function which waited ids were
resolved lately, and wakes their waiters. When the leader stops waiting it wakes another
waiter, which takes over. So 10,000 pending requests cost one query per poll (SQLite) or
one listening connection (PostgreSQL), not 10,000.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from ._base import RequestRecord, refusal

__all__ = ["Waiters", "Wakeup"]


class Wakeup:
    """An event a waiter sleeps on; ``readable`` also watches a file descriptor meanwhile,
    in the same task (``set`` cancels the wait on the descriptor)."""

    __slots__ = ("_event", "_scope")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._scope: anyio.CancelScope | None = None

    def set(self) -> None:
        """Wake the waiter."""
        self._event.set()
        if self._scope is not None:
            self._scope.cancel()

    def is_set(self) -> bool:
        """Whether ``set`` was called."""
        return self._event.is_set()

    async def wait(self) -> None:
        """Wait until ``set`` is called."""
        await self._event.wait()

    async def readable(self, fd: int, timeout: float) -> bool:
        """Wait until ``fd`` is readable or this is set (True), or ``timeout`` passes (False).

        On the event loop itself (no thread, no second task): a watcher waiting on a socket
        costs nothing while it waits and wakes within microseconds of a datagram or a
        notification.
        """
        if self._event.is_set():
            return True
        with anyio.move_on_after(timeout) as timer:
            with anyio.CancelScope() as scope:
                self._scope = scope
                try:
                    await anyio.wait_readable(fd)
                finally:
                    self._scope = None
        return not timer.cancelled_caught


Watch = Callable[[list[str], Wakeup], Awaitable[list[str]]]
"""``watch(waited_ids, leader_wakeup)``: wait a while (returning early if ``leader_wakeup``
is set), then return ids of requests that are no longer pending (ids nobody waits for are
ignored)."""


class Waiters:
    """The waiting tasks of one store object, and the leader that watches for them.

    Args:
        fetch: Reads one request from the store.
        watch: See ``Watch``.
    """

    def __init__(
        self, fetch: Callable[[str], Awaitable[RequestRecord | None]], watch: Watch
    ) -> None:
        self._fetch = fetch
        self._watch = watch
        self._events: dict[str, Wakeup] = {}
        self._idle: dict[str, Wakeup] = {}
        """The events not set yet, oldest first: whom a leaving leader wakes, in O(1)."""
        self._count: dict[str, int] = {}
        self._leader: str | None = None
        self._settled: dict[str, RequestRecord] = {}

    def wake(self, request_id: str, record: RequestRecord | None = None) -> None:
        """The request was resolved (``record``: as committed through this very store
        object, which spares the waiter a read): wake its waiters now."""
        event = self._events.get(request_id)
        if event is not None:
            if record is not None:
                self._settled[request_id] = record
            self._idle.pop(request_id, None)
            event.set()

    async def wait(self, request_id: str) -> RequestRecord:
        """Wait until the request leaves ``pending``; returns its record."""
        self._count[request_id] = self._count.get(request_id, 0) + 1
        try:
            while True:
                event = self._events.get(request_id)
                if event is None or event.is_set():
                    event = self._events[request_id] = self._idle[request_id] = Wakeup()
                # Registered before this look: an answer landing after it is seen by the
                # watcher (or woken directly), never lost in between.
                record = self._settled.pop(request_id, None) or await self._fetch(request_id)
                if record is None:
                    raise refusal(None, request_id)
                if record.status != "pending":
                    return record
                if self._leader is None:
                    await self._lead(event, request_id)
                else:
                    await event.wait()
        finally:
            left = self._count[request_id] - 1
            if left:
                self._count[request_id] = left
            else:
                del self._count[request_id]
                self._events.pop(request_id, None)
                self._idle.pop(request_id, None)
                self._settled.pop(request_id, None)
            if self._leader is None:
                # This waiter may have been woken to take over just as its own request was
                # resolved: pass the watch on, or the others would wait unwatched.
                self._hand_over(request_id)

    async def _lead(self, event: Wakeup, request_id: str) -> None:
        self._leader = request_id
        try:
            while not event.is_set():
                for rid in await self._watch(list(self._count), event):
                    self.wake(rid)
        finally:
            self._leader = None
            self._hand_over(request_id)

    def _hand_over(self, leaving: str) -> None:
        """Wake one other waiter; finding its request still pending, it starts watching."""
        for rid in self._idle:
            if rid != leaving:
                self._idle.pop(rid).set()
                return
