"""``PostgresStore``: the store for many workers on many machines (psycopg 3).

Needs the ``postgres`` extra (``pip install "hpd-agent[postgres]"``). psycopg's synchronous
API runs in worker threads (``anyio.to_thread``), so the store works on asyncio and trio
alike. Answers wake waiting runs in any process through LISTEN/NOTIFY: ``resolve`` sends
``pg_notify('hpd_agent_requests', request_id)`` in the same transaction as its update, and a
waiter LISTENs on its own connection before it looks at the request, so no answer slips
between the look and the wait.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, LiteralString, TypeVar, cast

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

try:
    import psycopg
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError('PostgresStore needs psycopg 3: pip install "hpd-agent[postgres]"') from e

__all__ = ["CHANNEL", "PostgresStore"]

CHANNEL = "hpd_agent_requests"
"""The NOTIFY channel; the payload is the id of the request that left ``pending``."""

_SCHEMA_LOCK = 0x6870_6461  # advisory lock id: concurrent first starts create tables once

T = TypeVar("T")
_Conn = psycopg.Connection[tuple[Any, ...]]


class PostgresStore:
    """A ``Store`` in PostgreSQL, shared by any number of processes and machines.

    Args:
        dsn: A libpq connection string or URL (``postgresql://user@host:port/db``).
        recheck_interval: Seconds after which a waiter looks at its request again even
            without a notification (a safety net; wake-ups come from NOTIFY).
    """

    def __init__(self, dsn: str, *, recheck_interval: float = 1.0) -> None:
        self.dsn = dsn
        self.recheck_interval = recheck_interval
        try:
            conn: _Conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as e:
            raise UserError(f"cannot connect to PostgreSQL store: {e}") from e
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in schema("DOUBLE PRECISION"):
                conn.execute(cast(LiteralString, statement))
        self._conn: _Conn | None = conn
        self._lock = threading.Lock()
        self._listener: _Conn | None = None
        self._listen_lock = threading.Lock()
        self._waiters = Waiters(self.get_request, self._watch)

    def __repr__(self) -> str:
        info = self._conn.info if self._conn is not None else None
        where = f"{info.host}:{info.port}/{info.dbname}" if info is not None else "closed"
        return f"PostgresStore({where!r})"

    # -- plumbing --------------------------------------------------------------------------
    def _locked(self, fn: Callable[[_Conn], T]) -> T:
        with self._lock:
            if self._conn is None:
                raise UserError(f"{self!r} is closed")
            return fn(self._conn)

    async def _run(self, fn: Callable[[_Conn], T]) -> T:
        return await anyio.to_thread.run_sync(self._locked, fn)

    # -- requests --------------------------------------------------------------------------
    async def add_request(self, record: RequestRecord) -> RequestRecord:
        """Insert a pending request, or return the stored one with that id."""
        row = record_to_row(record)

        def add(conn: _Conn) -> RequestRecord:
            cur = conn.execute(
                f"INSERT INTO hpd_requests ({REQUEST_COLUMNS}) VALUES "
                "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (id) DO NOTHING",
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
            where.append("run_id = %s")
            args.append(run_id)
        if status is not None:
            where.append("status = %s")
            args.append(status)
        sql = f"SELECT {REQUEST_COLUMNS} FROM hpd_requests"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, id"
        return await self._run(
            lambda conn: [
                record_from_row(r) for r in conn.execute(cast(LiteralString, sql), args).fetchall()
            ]
        )

    async def resolve(
        self,
        request_id: str,
        status: RequestState,
        answer: Any = None,
        *,
        context: Mapping[str, Any] | None = None,
    ) -> RequestRecord:
        """Atomically move a pending request to ``status`` and NOTIFY waiters."""
        answer_json = dump_json(answer) if status == "answered" else None
        extra = dict(context or {})

        def update(conn: _Conn) -> RequestRecord:
            with conn.transaction():
                # FOR UPDATE: a racing resolver waits here, then reads the committed status.
                row = conn.execute(
                    f"SELECT {REQUEST_COLUMNS} FROM hpd_requests WHERE id = %s FOR UPDATE",
                    (request_id,),
                ).fetchone()
                current = None if row is None else record_from_row(row)
                if current is None or current.status != "pending":
                    raise refusal(current, request_id)
                merged = {**current.context, **extra}
                now = time.time()
                cur = conn.execute(
                    "UPDATE hpd_requests SET status = %s, answer = %s, answered_at = %s, "
                    "context = %s WHERE id = %s AND status = 'pending'",
                    (status, answer_json, now, dump_json(merged), request_id),
                )
                if cur.rowcount != 1:
                    raise refusal(_get(conn, request_id), request_id)
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, request_id))
            stored = None if answer_json is None else json.loads(answer_json)
            return replace(current, status=status, answer=stored, answered_at=now, context=merged)

        record = await self._run(update)
        self._waiters.wake(request_id)
        return record

    async def wait_resolved(self, request_id: str) -> RequestRecord:
        """Wait until the request leaves ``pending``: LISTEN/NOTIFY.

        One listening connection per store object serves every waiting request of the
        process (see ``_waiters``).
        """
        return await self._waiters.wait(request_id)

    async def _watch(self, waited: list[str], wakeup: anyio.Event) -> list[str]:
        stop = threading.Event()
        try:
            notified, fresh = await anyio.to_thread.run_sync(
                self._notifications, stop, abandon_on_cancel=True
            )
        finally:
            stop.set()  # an abandoned listener thread returns within recheck_interval
        if fresh or not notified:
            # Just started listening (an answer may have come before), or heard nothing
            # for a while: look at every waited id.
            return await self._resolved(waited)
        wanted = set(waited)
        return [rid for rid in notified if rid in wanted]

    def _notifications(self, stop: threading.Event) -> tuple[list[str], bool]:
        """Block until notifications arrive (or ``recheck_interval`` passes); runs in a thread.

        The listening connection stays open between calls, so nothing sent while no thread
        reads it is lost: it waits in the connection's buffer.
        """
        with self._listen_lock:
            fresh = self._listener is None
            if self._listener is None:
                listener: _Conn = psycopg.connect(self.dsn, autocommit=True)
                listener.execute(f"LISTEN {CHANNEL}")
                self._listener = listener
            if fresh or stop.is_set():
                return [], True
            listener = self._listener
            found = [
                n.payload for n in listener.notifies(timeout=self.recheck_interval, stop_after=1)
            ]
            if found:
                # Take whatever else already arrived, without waiting for more.
                found += [n.payload for n in listener.notifies(timeout=0.001)]
            return found, False

    async def _resolved(self, waited: list[str]) -> list[str]:
        def select(conn: _Conn) -> list[str]:
            rows = conn.execute(
                "SELECT id FROM hpd_requests WHERE id = ANY(%s) AND status <> 'pending'",
                (waited,),
            ).fetchall()
            return [r[0] for r in rows]

        return await self._run(select) if waited else []

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
                "INSERT INTO hpd_journal (run_id, key, kind, value) VALUES (%s,%s,%s,%s) "
                "ON CONFLICT (run_id, key) DO UPDATE SET kind = EXCLUDED.kind, "
                "value = EXCLUDED.value",
                row,
            )
        )

    async def journal(self, run_id: str) -> dict[str, JournalEntry]:
        """Every journaled fact of a run, by key."""

        def select(conn: _Conn) -> dict[str, JournalEntry]:
            rows = conn.execute(
                "SELECT key, kind, value FROM hpd_journal WHERE run_id = %s", (run_id,)
            ).fetchall()
            return {r[0]: journal_from_row(r) for r in rows}

        return await self._run(select)

    # -- runs ------------------------------------------------------------------------------
    async def put_run(self, record: RunRecord) -> None:
        """Insert or replace a run record."""
        row = run_to_row(record)
        columns = RUN_COLUMNS.split(", ")
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns[1:])
        await self._run(
            lambda conn: conn.execute(
                f"INSERT INTO hpd_runs ({RUN_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                f"ON CONFLICT (run_id) DO UPDATE SET {updates}",
                row,
            )
        )

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run record, or None."""

        def select(conn: _Conn) -> RunRecord | None:
            row = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM hpd_runs WHERE run_id = %s", (run_id,)
            ).fetchone()
            return None if row is None else run_from_row(row)

        return await self._run(select)

    async def list_runs(self, *, status: RunState | None = None) -> list[RunRecord]:
        """Run records, oldest first."""
        sql = f"SELECT {RUN_COLUMNS} FROM hpd_runs"
        args: tuple[Any, ...] = ()
        if status is not None:
            sql += " WHERE status = %s"
            args = (status,)
        sql += " ORDER BY created_at"
        return await self._run(
            lambda conn: [run_from_row(r) for r in conn.execute(sql, args).fetchall()]
        )

    async def aclose(self) -> None:
        """Close the connection."""

        def close(conn: _Conn) -> None:
            conn.close()
            self._conn = None
            with self._listen_lock:
                if self._listener is not None:
                    self._listener.close()
                    self._listener = None

        if self._conn is not None:
            await self._run(close)


def _get(conn: _Conn, request_id: str) -> RequestRecord | None:
    row = conn.execute(
        f"SELECT {REQUEST_COLUMNS} FROM hpd_requests WHERE id = %s", (request_id,)
    ).fetchone()
    return None if row is None else record_from_row(row)
