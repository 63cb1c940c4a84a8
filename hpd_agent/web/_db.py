"""Where the web package keeps its threads across restarts: two tables beside the store's.

``hpd_web_runs`` maps a thread to the root runs it started (the run ids stay on the server)
with their mode and status; ``hpd_web_events`` holds every AG-UI event sent on a thread, in
order, so a restarted server still knows what each client saw. With a ``SQLiteStore`` they
live in the store's own file, with a ``PostgresStore`` in its database (a connection of our
own, from its DSN); with any other store in a private in-memory SQLite database (compact, so
finished threads still leave the Python heap, but gone with the process).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread

from ..store import SQLiteStore, Store

__all__ = ["RunRow", "ThreadDB", "open_thread_db"]

T = TypeVar("T")

APP_NAME = "hpd-agent-web"
"""The ``application_name`` of the web server's own PostgreSQL connection."""

_TABLES = (
    """CREATE TABLE IF NOT EXISTS hpd_web_runs (
    thread_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    run_id TEXT NOT NULL UNIQUE,
    mode TEXT NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
)""",
    """CREATE TABLE IF NOT EXISTS hpd_web_events (
    thread_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    frame TEXT NOT NULL,
    PRIMARY KEY (thread_id, idx)
)""",
)

_PUT_RUN = (
    "INSERT INTO hpd_web_runs (thread_id, seq, run_id, mode, status) VALUES (?,?,?,?,?)"
    " ON CONFLICT (thread_id, seq) DO UPDATE SET status = excluded.status"
)
_ADD_EVENTS = (
    "INSERT INTO hpd_web_events (thread_id, idx, frame) VALUES (?,?,?)"
    " ON CONFLICT (thread_id, idx) DO NOTHING"
)
_RUNS = "SELECT run_id, mode, status FROM hpd_web_runs WHERE thread_id = ? ORDER BY seq"
_FRAMES = "SELECT frame FROM hpd_web_events WHERE thread_id = ? ORDER BY idx"
_OWNER = "SELECT thread_id FROM hpd_web_runs WHERE run_id = ?"


@dataclass(slots=True)
class RunRow:
    """A root run a thread started."""

    run_id: str
    mode: str
    status: str


class ThreadDB:
    """Threads' runs and sent events over one DB-API connection (SQLite; see ``_PgThreadDB``),
    and ``reader`` if given: a second connection to the same SQLite file for the reads, so
    a read never queues behind a write waiting for the file's write lock (WAL: readers do
    not wait for writers)."""

    _param = "?"

    def __init__(self, conn: Any, reader: Any = None) -> None:
        self._conn: Any = conn
        self._lock = threading.Lock()
        self._reader: Any = reader
        self._read_lock = threading.Lock()
        with self._lock, self._transaction():
            for sql in _TABLES:
                conn.execute(sql)

    @contextlib.contextmanager
    def _transaction(self) -> Generator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _sql(self, sql: str) -> str:
        return sql if self._param == "?" else sql.replace("?", self._param)

    async def _call(self, fn: Callable[[Any], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn(self._conn)

        return await anyio.to_thread.run_sync(locked)

    async def _read(self, fn: Callable[[Any], T]) -> T:
        """``fn`` on the reader (in one read transaction: a consistent snapshot), else as
        ``_call``."""
        if self._reader is None:
            return await self._call(fn)

        def locked() -> T:
            with self._read_lock:
                self._reader.execute("BEGIN")
                try:
                    return fn(self._reader)
                finally:
                    self._reader.execute("COMMIT")

        return await anyio.to_thread.run_sync(locked)

    async def _write(self, *batches: tuple[str, list[tuple[object, ...]]]) -> None:
        """Run each ``(sql, rows)`` batch, all in one transaction."""
        batches = tuple(b for b in batches if b[1])
        if self._conn is None or not batches:
            return

        def write(conn: Any) -> None:
            with self._transaction():
                cursor = conn.cursor()
                for sql, rows in batches:
                    cursor.executemany(self._sql(sql), rows)

        await self._call(write)

    async def put_run(self, thread_id: str, seq: int, row: RunRow) -> None:
        """Insert or update a thread's run."""
        await self._write((_PUT_RUN, [(thread_id, seq, row.run_id, row.mode, row.status)]))

    async def add_events(
        self, thread_id: str, first: int, frames: list[str], run: tuple[int, RunRow] | None = None
    ) -> None:
        """Append frames ``first``, ``first + 1``, ... of a thread (already written: kept);
        with ``run`` (its ``seq`` and row), update that run in the same transaction."""
        rows: list[tuple[object, ...]] = [(thread_id, first + i, f) for i, f in enumerate(frames)]
        runs: list[tuple[object, ...]] = []
        if run is not None:
            seq, row = run
            runs.append((thread_id, seq, row.run_id, row.mode, row.status))
        await self._write((_PUT_RUN, runs), (_ADD_EVENTS, rows))

    async def load(self, thread_id: str) -> tuple[list[RunRow], list[str]] | None:
        """A thread's runs (oldest first) and frames, or None if it has none."""

        def read(conn: Any) -> tuple[list[RunRow], list[str]]:
            runs = conn.execute(self._sql(_RUNS), (thread_id,)).fetchall()
            frames = conn.execute(self._sql(_FRAMES), (thread_id,)).fetchall()
            return [RunRow(*r) for r in runs], [f for (f,) in frames]

        runs, frames = await self._read(read)
        return (runs, frames) if runs else None

    async def thread_of(self, run_id: str) -> str | None:
        """The thread that started root run ``run_id``, or None."""

        def read(conn: Any) -> str | None:
            row = conn.execute(self._sql(_OWNER), (run_id,)).fetchone()
            return None if row is None else str(row[0])

        return await self._read(read)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None


class _PgThreadDB(ThreadDB):
    """The same tables in a PostgreSQL database (psycopg 3, autocommit connection); a
    connection the server lost (a database restart) is opened again once per call."""

    _param = "%s"

    def __init__(self, dsn: str) -> None:
        import psycopg

        self._dsn = dsn
        self._errors = (psycopg.OperationalError, psycopg.InterfaceError)
        super().__init__(
            psycopg.connect(dsn, autocommit=True, connect_timeout=10, application_name=APP_NAME)
        )

    @contextlib.contextmanager
    def _transaction(self) -> Generator[None]:
        with self._conn.transaction():
            yield

    async def _call(self, fn: Callable[[Any], T]) -> T:
        import psycopg

        def locked() -> T:
            with self._lock:
                try:
                    return fn(self._conn)
                except self._errors:
                    if self._conn is None or not self._conn.closed:
                        raise
                    self._conn = psycopg.connect(
                        self._dsn, autocommit=True, connect_timeout=10, application_name=APP_NAME
                    )
                    return fn(self._conn)

        return await anyio.to_thread.run_sync(locked)


def open_thread_db(store: Store) -> ThreadDB:
    """The thread DB beside ``store``: its SQLite file, its PostgreSQL database, or memory."""
    if isinstance(store, SQLiteStore) and store.path != ":memory:":
        path = store.path
    elif type(store).__name__ == "PostgresStore":
        from ..store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        return _PgThreadDB(store.dsn)
    else:
        path = ":memory:"
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    if isinstance(store, SQLiteStore) and path != ":memory:":
        # The store's durability for its threads too (SQLite's default on a connection of
        # our own, FULL, made every thread commit wait for an fsync the store's do not).
        sync = "NORMAL" if store.durability == "process" else "FULL"
        conn.execute(f"PRAGMA synchronous={sync}")
        reader = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        return ThreadDB(conn, reader)
    return ThreadDB(conn)
