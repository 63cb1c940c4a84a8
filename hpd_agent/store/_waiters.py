"""Waiting for requests to be resolved by other processes, with one watcher per store.

However many requests wait in one process, one of the waiting tasks (the *leader*) watches
the database for all of them: it asks the store's ``watch`` function which waited ids were
resolved lately, and wakes their waiters. When the leader stops waiting it wakes another
waiter, which takes over. So 10,000 pending requests cost one query per poll (SQLite) or
one listening connection (PostgreSQL), not 10,000.

One store object may serve runs on several event loops at once (threads each running their
own loop). So the waiters' tables are guarded by a thread lock, and a ``Wakeup`` is woken on
the loop that made it: set from another thread (a leader or an answer on another loop), it
hands the wake-up to its own loop instead of touching that loop's event from the wrong
thread (which trio refuses half-way, leaving its waiter asleep for good, and asyncio does
without waking the loop).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.from_thread
import anyio.lowlevel

from ._base import RequestRecord, refusal

__all__ = ["Waiters", "Wakeup"]


class Wakeup:
    """An event a waiter sleeps on; ``readable`` also watches a file descriptor meanwhile,
    in the same task (``set`` cancels the wait on the descriptor).

    Made on the waiter's event loop; ``set`` may be called from any thread (module doc).
    """

    __slots__ = ("_event", "_flag", "_scope", "_thread", "_token")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._flag = False
        self._scope: anyio.CancelScope | None = None
        self._thread = threading.get_ident()
        self._token = anyio.lowlevel.current_token()

    def set(self) -> None:
        """Wake the waiter (from any thread)."""
        if self._flag:
            return
        self._flag = True
        if threading.get_ident() == self._thread:
            self._set_here()
        else:
            # From a thread of its own: waiting here for the other loop could deadlock two
            # loops waking each other's waiters at once.
            threading.Thread(target=self._set_there, name="hpd-agent wakeup", daemon=True).start()

    def _set_here(self) -> None:
        """On the waiter's own loop: set the event and end a wait on a descriptor."""
        self._event.set()
        if self._scope is not None:
            self._scope.cancel()

    def _set_there(self) -> None:
        with contextlib.suppress(Exception):  # the loop has ended: nobody waits any more
            anyio.from_thread.run_sync(self._set_here, token=self._token)

    def is_set(self) -> bool:
        """Whether ``set`` was called (the waiter may not have been woken yet)."""
        return self._flag

    async def wait(self) -> None:
        """Wait until ``set`` is called."""
        await self._event.wait()

    async def readable(self, fd: int, timeout: float) -> bool:
        """Wait until ``fd`` is readable or this is set (True), or ``timeout`` passes (False).

        On the event loop itself (no thread, no second task): a watcher waiting on a socket
        costs nothing while it waits and wakes within microseconds of a datagram or a
        notification.
        """
        if self._flag:
            return True
        # A ``set`` from another thread after this look runs ``_set_here`` on this loop,
        # so after the scope is in place: it cancels it.
        with anyio.move_on_after(timeout) as timer:
            with anyio.CancelScope() as scope:
                self._scope = scope
                try:
                    await anyio.wait_readable(fd)
                finally:
                    self._scope = None
        return not timer.cancelled_caught


_Key = tuple[str, int]
"""A waiter's request id and thread."""

Watch = Callable[[list[str], Wakeup], Awaitable[list[str]]]
"""``watch(waited_ids, leader_wakeup)``: wait a while (returning early if ``leader_wakeup``
is set), then return ids of requests that are no longer pending (ids nobody waits for are
ignored)."""


class Waiters:
    """The waiting tasks of one store object, and the leader that watches for them.

    A waiter is known by its request id and its thread (its event loop): waiters of one
    request on two loops each sleep on a ``Wakeup`` of their own loop.

    Args:
        fetch: Reads one request from the store.
        watch: See ``Watch``.
    """

    def __init__(
        self, fetch: Callable[[str], Awaitable[RequestRecord | None]], watch: Watch
    ) -> None:
        self._fetch = fetch
        self._watch = watch
        self._lock = threading.Lock()
        self._events: dict[str, dict[int, Wakeup]] = {}
        """Per request id, per thread: the event its waiters on that thread sleep on."""
        self._idle: dict[_Key, Wakeup] = {}
        """The events not set yet, oldest first: whom a leaving leader wakes, in O(1)."""
        self._count: dict[_Key, int] = {}
        self._leader: _Key | None = None
        self._settled: dict[str, RequestRecord] = {}

    def wake(self, request_id: str, record: RequestRecord | None = None) -> None:
        """The request was resolved (``record``: as committed through this very store
        object, which spares the waiter a read): wake its waiters now, on every loop."""
        with self._lock:
            events = self._events.get(request_id)
            if not events:
                return
            if record is not None:
                self._settled[request_id] = record
            woken = list(events.values())
            for thread in events:
                self._idle.pop((request_id, thread), None)
        for event in woken:
            event.set()

    async def wait(self, request_id: str) -> RequestRecord:
        """Wait until the request leaves ``pending``; returns its record."""
        thread = threading.get_ident()
        key = (request_id, thread)
        with self._lock:
            self._count[key] = self._count.get(key, 0) + 1
        led = False  # the last wait below was as the leader (which hands the watch on)
        try:
            while True:
                with self._lock:
                    events = self._events.setdefault(request_id, {})
                    event = events.get(thread)
                    if event is None or event.is_set():
                        event = events[thread] = self._idle[key] = Wakeup()
                    settled = self._settled.pop(request_id, None)
                # Registered before this look: an answer landing after it is seen by the
                # watcher (or woken directly), never lost in between.
                record = settled or await self._fetch(request_id)
                if record is None:
                    raise refusal(None, request_id)
                if record.status != "pending":
                    return record
                with self._lock:
                    lead = self._leader is None
                    if lead:
                        self._leader = key
                led = lead
                if lead:
                    await self._lead(event, key)
                else:
                    await event.wait()
        finally:
            self._leave(key, led)

    def _leave(self, key: _Key, led: bool) -> None:
        """One waiter of ``key`` stopped waiting (``led``: right after leading)."""
        request_id, thread = key
        with self._lock:
            left = self._count[key] - 1
            if left:
                self._count[key] = left
            else:
                del self._count[key]
                self._idle.pop(key, None)
                events = self._events.get(request_id)
                if events is not None:
                    events.pop(thread, None)
                    if not events:
                        del self._events[request_id]
                        self._settled.pop(request_id, None)
            leaderless = self._leader is None
        if leaderless and not led:
            # This waiter may have been woken to take over just as its own request was
            # resolved: pass the watch on, or the others would wait unwatched. (A leader
            # passed it on already: a waiter on another loop may be taking it over now.)
            self._hand_over(key)

    async def _lead(self, event: Wakeup, key: _Key) -> None:
        try:
            while not event.is_set():
                with self._lock:
                    waited = list(dict.fromkeys(rid for rid, _ in self._count))
                for rid in await self._watch(waited, event):
                    self.wake(rid)
        finally:
            with self._lock:
                self._leader = None
            self._hand_over(key)

    def _hand_over(self, leaving: _Key) -> None:
        """Wake one other waiter; finding its request still pending, it starts watching."""
        with self._lock:
            for key in self._idle:
                if key != leaving:
                    event = self._idle.pop(key)
                    break
            else:
                return
        event.set()
