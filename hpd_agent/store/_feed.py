"""The SQL stores' request feed (``RequestFeed``): one listener's iterator of request
records, woken by the store's own wake-up, with a look now and then at what changed lately.

A listener hears request ids from the wake-up (``Heard``: a SQLite store's socket, a
PostgreSQL store's LISTEN connection) and reads their records at once, several in one query.
Every ``every`` seconds, and whenever the store has no wake-up (each poll), it also looks at
the requests opened or ended since its last look (less ``MARGIN``: a commit may land a
moment after its writer read the clock), so a wake-up that was lost (a full socket buffer, a
dropped connection) delays a change by a look at most. It remembers the state it gave of
each request while a look could find it again, and gives each state once.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..exceptions import StoreCorruptError
from ._base import RequestRecord

__all__ = ["MARGIN", "FeedChanges", "Heard", "by_ids", "readable", "recent_sql"]

MARGIN = 5.0
"""Seconds a look reaches back before the previous one began (see the module doc)."""

_CHUNK = 500
"""Ids read per query (SQLite allows 999 parameters by default)."""

Heard = Callable[[float], Awaitable[list[str] | None]]
"""``heard(timeout)``: the request ids the wake-up gave within ``timeout`` seconds (maybe
none); None when the store has no wake-up now (it waited a poll's time): look."""

Recent = Callable[[float], Awaitable[Sequence[tuple[str, str]]]]
"""``recent(since)``: (id, status) of the requests opened (still pending) or ended since."""

Read = Callable[[list[str]], Awaitable[list[RequestRecord]]]
"""``read(ids)``: the records of these ids (unreadable or missing ones left out)."""


def recent_sql(mark: str) -> str:
    """The look's query: (id, status) of requests pending since, or ended since, ``mark``
    (given twice)."""
    return (
        "SELECT id, status FROM hpd_requests WHERE (status = 'pending' AND created_at >= "
        f"{mark}) OR answered_at >= {mark}"
    )


def by_ids(columns: str, mark: str, ids: list[str]) -> list[tuple[str, list[str]]]:
    """The queries reading the requests of ``ids``, a chunk each, with their arguments."""
    out: list[tuple[str, list[str]]] = []
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        marks = ",".join([mark] * len(chunk))
        out.append((f"SELECT {columns} FROM hpd_requests WHERE id IN ({marks})", chunk))
    return out


def readable(
    rows: Sequence[Sequence[Any]], read: Callable[[Sequence[Any]], RequestRecord]
) -> list[RequestRecord]:
    """The records of ``rows``, a row that cannot be read left out (the feed goes on; the
    request's listing says what is wrong with it)."""
    records: list[RequestRecord] = []
    for row in rows:
        try:
            records.append(read(row))
        except StoreCorruptError:
            continue
    return records


class FeedChanges:
    """One listener's records, as ``RequestFeed.request_changes`` gives them.

    Safe to cancel while it waits or reads: ids heard stay wanted until their records were
    read, and a look reaches back past anything a cancelled one missed.

    Args:
        heard: See ``Heard``.
        recent: See ``Recent``.
        read: See ``Read``.
        every: Seconds between looks while wake-ups come.
    """

    def __init__(self, heard: Heard, recent: Recent, read: Read, every: float) -> None:
        self._heard = heard
        self._recent = recent
        self._read = read
        self._every = every
        now = time.time()
        self._looked = now
        self._next = now + every
        self._wanted: set[str] = set()
        self._ready: deque[RequestRecord] = deque()
        self._seen: dict[str, tuple[str, float]] = {}
        """Per request: the state given last, and when it came to be (for pruning)."""

    def __aiter__(self) -> FeedChanges:
        return self

    async def __anext__(self) -> RequestRecord:
        while not self._ready:
            await self._fill()
        return self._ready.popleft()

    async def _fill(self) -> None:
        now = time.time()
        ids = None if now >= self._next else await self._heard(self._next - now)
        if ids is None:
            await self._look()
            return
        self._wanted.update(ids)
        if self._wanted:
            self._offer(await self._read(sorted(self._wanted)))
            self._wanted.clear()

    async def _look(self) -> None:
        started = time.time()
        since = self._looked - MARGIN
        found = await self._recent(since)
        self._wanted.update(rid for rid, status in found if self._given(rid) != status)
        if self._wanted:
            self._offer(await self._read(sorted(self._wanted)))
            self._wanted.clear()
        self._looked = started
        self._next = started + self._every
        # What no look can find again (changed before its reach) need not be remembered.
        self._seen = {k: v for k, v in self._seen.items() if v[1] >= since}

    def _given(self, request_id: str) -> str | None:
        seen = self._seen.get(request_id)
        return None if seen is None else seen[0]

    def _offer(self, records: list[RequestRecord]) -> None:
        """Queue the records whose state is new to this listener, oldest change first."""
        fresh = [r for r in records if self._given(r.request_id) != r.status]
        fresh.sort(key=_changed_at)
        for record in fresh:
            self._seen[record.request_id] = (record.status, _changed_at(record))
            self._ready.append(record)


def _changed_at(record: RequestRecord) -> float:
    """When the request came to its state: opened, or ended."""
    return record.created_at if record.answered_at is None else record.answered_at
