"""``SQLiteStore``: the default durable store; one file, zero set-up, several processes.

Blocking ``sqlite3`` calls run in worker threads (``anyio.to_thread``), one at a time per
store. The file is in WAL mode, so readers never block the writer and a process killed with
SIGKILL loses nothing that was committed. Answers written by another process are seen by
short polling (``poll_interval``, 25 ms by default); answers written through the same store
object wake the waiter at once.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ..exceptions import UserError
from ._base import (
    JournalEntry,
    RequestRecord,
    RequestState,
    RunRecord,
    RunState,
    dump_json,
    refusal,
)
from ._sql import (
    REQUEST_COLUMNS,
    RUN_COLUMNS,
    journal_from_row,
    record_from_row,
    record_to_row,
    run_from_row,
    run_to_row,
    schema,
)
from ._waiters import Waiters

__all__ = ["SQLiteStore"]

_RESOLVED_MARGIN = 5.0

T = TypeVar("T")


class SQLiteStore:
    """A ``Store`` in one SQLite file, shared safely by several processes on one machine.

    Args:
        path: The database file (created with its tables if missing).
        poll_interval: Seconds between checks for answers written by other processes.
        busy_timeout: Seconds a write waits for another process's write lock.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        poll_interval: float = 0.025,
        busy_timeout: float = 30.0,
    ) -> None:
        if poll_interval <= 0:
            raise UserError("poll_interval must be positive")
        self.path = os.fspath(path)
        self.poll_interval = poll_interval
        try:
            conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise UserError(f"cannot open SQLite store {self.path!r}: {e}") from e
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        for statement in schema("REAL"):
            conn.execute(statement)
        self._conn: sqlite3.Connection | None = conn
        self._lock = threading.Lock()
        self._waiters = Waiters(self.get_request, self._watch)
        self._rounds = 0
        self._since: float | None = None

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    # -- plumbing --------------------------------------------------------------------------
    def _locked(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._conn is None:
                raise UserError(f"{self!r} is closed")
            return fn(self._conn)

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await anyio.to_thread.run_sync(self._locked, fn)

    # -- requests --------------------------------------------------------------------------
    async def add_request(self, record: RequestRecord) -> RequestRecord:
        """Insert a pending request, or return the stored one with that id."""
        row = record_to_row(record)

        def add(conn: sqlite3.Connection) -> RequestRecord:
            cur = conn.execute(
                f"INSERT OR IGNORE INTO hpd_requests ({REQUEST_COLUMNS}) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                row,
            )
            if cur.rowcount == 1:
                return record
            found = _get(conn, record.id)
            assert found is not None
            return found

        return await self._run(add)

    async def get_request(self, request_id: str) -> RequestRecord | None:
        """The request with this id, or None."""
        return await self._run(lambda conn: _get(conn, request_id))

    async def list_requests(
        self, *, run_id: str | None = None, status: RequestState | None = "pending"
    ) -> list[RequestRecord]:
        """Requests, oldest first, narrowed to a run and/or a status."""
        where: list[str] = []
        args: list[Any] = []
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        if status is not None:
            where.append("status = ?")
            args.append(status)
        sql = f"SELECT {REQUEST_COLUMNS} FROM hpd_requests"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, id"

        def select(conn: sqlite3.Connection) -> list[RequestRecord]:
            return [record_from_row(r) for r in conn.execute(sql, args)]

        return await self._run(select)

    async def resolve(
        self,
        request_id: str,
        status: RequestState,
        answer: Any = None,
        *,
        context: Mapping[str, Any] | None = None,
    ) -> RequestRecord:
        """Atomically move a pending request to ``status``; distinct errors if not pending."""
        answer_json = dump_json(answer) if status == "answered" else None
        extra = dict(context or {})

        def update(conn: sqlite3.Connection) -> RequestRecord:
            # IMMEDIATE takes the write lock first: the read and the conditional update
            # below see no other writer in between, whichever process that writer is.
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = _get(conn, request_id)
                if current is None or current.status != "pending":
                    raise refusal(current, request_id)
                merged = {**current.context, **extra}
                now = time.time()
                cur = conn.execute(
                    "UPDATE hpd_requests SET status = ?, answer = ?, answered_at = ?, context = ? "
                    "WHERE id = ? AND status = 'pending'",
                    (status, answer_json, now, dump_json(merged), request_id),
                )
                if cur.rowcount != 1:
                    raise refusal(_get(conn, request_id), request_id)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            stored = None if answer_json is None else json.loads(answer_json)
            return replace(current, status=status, answer=stored, answered_at=now, context=merged)

        record = await self._run(update)
        self._waiters.wake(request_id)
        return record

    async def wait_resolved(self, request_id: str) -> RequestRecord:
        """Wait until the request leaves ``pending``, polling for other processes' answers.

        However many requests wait in this process, one poll query per ``poll_interval``
        serves them all (see ``_waiters``).
        """
        return await self._waiters.wait(request_id)

    async def _watch(self, waited: list[str], wakeup: anyio.Event) -> list[str]:
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

    async def recover(
        self, max_age: float, *, run_id: str | None = None, now: float | None = None
    ) -> list[str]:
        """Expire pending requests older than ``max_age`` seconds or past their expiry."""
        clock = time.time() if now is None else now
        expired: list[str] = []
        for record in await self.list_requests(run_id=run_id):
            late = record.expires_at is not None and record.expires_at <= clock
            if clock - record.created_at > max_age or late:
                try:
                    await self.resolve(record.id, "expired")
                except Exception:
                    continue  # answered or cancelled meanwhile: leave it as it is
                expired.append(record.id)
        return expired

    # -- journal ---------------------------------------------------------------------------
    async def journal_put(self, run_id: str, entry: JournalEntry) -> None:
        """Record one fact of a run."""
        row = (run_id, entry.key, entry.kind, dump_json(entry.value))
        await self._run(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO hpd_journal (run_id, key, kind, value) VALUES (?,?,?,?)",
                row,
            )
        )

    async def journal(self, run_id: str) -> dict[str, JournalEntry]:
        """Every journaled fact of a run, by key."""

        def select(conn: sqlite3.Connection) -> dict[str, JournalEntry]:
            rows = conn.execute(
                "SELECT key, kind, value FROM hpd_journal WHERE run_id = ?", (run_id,)
            )
            return {r[0]: journal_from_row(r) for r in rows}

        return await self._run(select)

    # -- runs ------------------------------------------------------------------------------
    async def put_run(self, record: RunRecord) -> None:
        """Insert or replace a run record."""
        row = run_to_row(record)
        await self._run(
            lambda conn: conn.execute(
                f"INSERT OR REPLACE INTO hpd_runs ({RUN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)", row
            )
        )

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run record, or None."""

        def select(conn: sqlite3.Connection) -> RunRecord | None:
            row = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM hpd_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            return None if row is None else run_from_row(row)

        return await self._run(select)

    async def list_runs(self, *, status: RunState | None = None) -> list[RunRecord]:
        """Run records, oldest first."""
        sql = f"SELECT {RUN_COLUMNS} FROM hpd_runs"
        args: tuple[Any, ...] = ()
        if status is not None:
            sql += " WHERE status = ?"
            args = (status,)
        sql += " ORDER BY created_at"
        return await self._run(lambda conn: [run_from_row(r) for r in conn.execute(sql, args)])

    async def aclose(self) -> None:
        """Close the database connection."""

        def close(conn: sqlite3.Connection) -> None:
            conn.close()
            self._conn = None

        if self._conn is not None:
            await self._run(close)


def _get(conn: sqlite3.Connection, request_id: str) -> RequestRecord | None:
    row = conn.execute(
        f"SELECT {REQUEST_COLUMNS} FROM hpd_requests WHERE id = ?", (request_id,)
    ).fetchone()
    return None if row is None else record_from_row(row)
