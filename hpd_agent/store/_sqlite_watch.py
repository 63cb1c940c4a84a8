"""How a ``SQLiteStore`` hears of answers written by other processes: a Unix datagram
socket of its own in ``<store>.wake/`` that answering processes write to (``_sqlite_io``),
or, where there can be none, short polling (``poll_interval``), with a look at every waited
request now and then either way (a datagram dropped by a full buffer is caught up with).
A request feed (``FeedSocket``) hears of requests opened and ended the same way."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable

import anyio

from ._sqlite_io import FEED, WakeSocket, feed_sockets, notify_all, send_to, wake_dir
from ._waiters import Wakeup

__all__ = ["AnswerWatch", "FeedSocket"]

_FEEDS_LOOK = 0.5
"""Seconds a process keeps the list of request feeds' sockets it tells of new requests (a
feed started meanwhile finds them at its first look, a second after it starts): a request
opened costs no directory listing when nobody listens."""

_RESOLVED_MARGIN = 5.0
_RECHECK = 1.0
"""Seconds between full checks of the waited requests when wake-ups come by socket (a
datagram dropped by a full buffer is caught up with then)."""

Select = Callable[[sqlite3.Connection], list[str]]


class AnswerWatch:
    """A store's wake-up socket (bound at its first wait), or its polling state.

    Args:
        path: The store file.
        poll_interval: Seconds between polls where there is no socket.
        run: Runs a query in the store's worker thread.
    """

    def __init__(
        self, path: str, poll_interval: float, run: Callable[[Select], Awaitable[list[str]]]
    ) -> None:
        folder = wake_dir(path)
        self.wake = WakeSocket(folder) if folder is not None else None
        self.poll_interval = poll_interval
        self._run = run
        self._open: bool | None = None  # None: not tried yet
        self._rounds = 0
        self._since: float | None = None
        self._feeds: list[str] = []
        self._feeds_looked = float("-inf")

    def announce(self, request_id: str) -> None:
        """After a request was resolved here: tell every waiting process."""
        if self.wake is not None:
            notify_all(self.wake.folder, request_id)

    def announce_opened(self, request_id: str) -> None:
        """After a request was added here: tell every process's request feed (waiters
        need not hear of it), as last listed (``_FEEDS_LOOK``)."""
        if self.wake is None:
            return
        folder = self.wake.folder
        now = time.monotonic()
        if now - self._feeds_looked >= _FEEDS_LOOK:
            self._feeds = feed_sockets(folder)
            self._feeds_looked = now
        if self._feeds:
            self._feeds = send_to(folder, self._feeds, request_id)

    def close(self) -> None:
        """Close and remove this process's socket."""
        if self.wake is not None:
            self.wake.close()

    async def watch(self, waited: list[str], wakeup: Wakeup) -> list[str]:
        """Wait a while for answers from other processes (see ``_waiters.Watch``)."""
        if self._open is None and self.wake is not None:
            self._open = self.wake.open()
            if self._open:
                # Listening from now on: whatever was answered before is found by a look.
                return await self._resolved_since(waited, 0.0, True)
        if self._open and self.wake is not None and self.wake.sock is not None:
            return await self._wait_socket(self.wake, waited, wakeup)
        return await self._poll(waited, wakeup)

    async def _wait_socket(self, wake: WakeSocket, waited: list[str], wakeup: Wakeup) -> list[str]:
        sock = wake.sock
        assert sock is not None
        heard = wake.drain()
        if not heard:
            if not await wakeup.readable(sock.fileno(), _RECHECK):
                return await self._resolved_since(waited, 0.0, True)
            heard = wake.drain()
        # Every id heard, not only those waited for when the wait began: a request
        # registered meanwhile is woken too (the waiters ignore ids nobody waits for).
        return heard

    async def _poll(self, waited: list[str], wakeup: Wakeup) -> list[str]:
        with anyio.move_on_after(self.poll_interval):
            await wakeup.wait()
        if wakeup.is_set():
            return []
        started = time.time()
        self._rounds += 1
        # Now and then look at every waited id, not only the rows resolved lately.
        full = self._rounds % max(1, round(1.0 / self.poll_interval)) == 0
        since = self._since if self._since is not None else started - _RESOLVED_MARGIN
        found = await self._resolved_since(waited, since, full)
        # Rows resolved since a little before this poll: the margin covers commits that
        # land a moment after the answering process read its clock.
        self._since = started - _RESOLVED_MARGIN
        return found

    async def _resolved_since(self, waited: list[str], since: float, full: bool) -> list[str]:
        def select(conn: sqlite3.Connection) -> list[str]:
            if not full:
                rows = conn.execute(
                    "SELECT id FROM hpd_requests WHERE answered_at >= ? AND status != 'pending'",
                    (since,),
                )
                wanted = set(waited)
                return [r[0] for r in rows if r[0] in wanted]
            found: list[str] = []
            for i in range(0, len(waited), 500):
                chunk = waited[i : i + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT id FROM hpd_requests WHERE id IN ({marks}) AND status != 'pending'",
                    chunk,
                )
                found.extend(r[0] for r in rows)
            return found

        return await self._run(select)


class FeedSocket:
    """A request feed's wake-up: a socket of its own in ``<store>.wake/`` (named ``FEED``...,
    so that a new request is sent to it too), else polling (``_feed.Heard``).

    Args:
        path: The store file.
        poll_interval: Seconds between looks where there is no socket.
    """

    def __init__(self, path: str, poll_interval: float) -> None:
        folder = wake_dir(path)
        self._wake = WakeSocket(folder, prefix=FEED) if folder is not None else None
        self._poll = poll_interval

    def open(self) -> None:
        """Bind the socket (listening from now on), if there can be one."""
        if self._wake is not None and not self._wake.open():
            self._wake = None

    def close(self) -> None:
        """Close and remove the socket."""
        if self._wake is not None:
            self._wake.close()

    async def heard(self, timeout: float) -> list[str] | None:
        """The ids sent within ``timeout`` seconds; None after a poll's wait (no socket)."""
        wake = self._wake
        sock = None if wake is None else wake.sock
        if wake is None or sock is None:
            await anyio.sleep(min(timeout, self._poll))
            return None
        found = wake.drain()
        if not found:
            with anyio.move_on_after(timeout):
                await anyio.wait_readable(sock.fileno())
            found = wake.drain()
        return found
