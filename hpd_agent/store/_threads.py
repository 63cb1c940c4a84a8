"""``ThreadTables`` in SQL: the shipped stores' records for integrations (see ``_protocol``).

Two tables beside the store's own: ``hpd_thread_rows`` (space, thread, key, its place among
the thread's rows, text) and ``hpd_thread_items`` (space, thread, index, text). A
``SQLiteStore`` keeps them in its file, written with its ``durability``, through a
connection of their own and a second one for reads (WAL: a read never queues behind a
write); a ``PostgresStore`` in its database, through a connection of their own (named
``hpd-agent-threads``, opened again once if the server dropped it). Connections are opened
at the first call, so a store whose runs never use them opens none. ``MemoryThreadTables``
keeps them in a private in-memory SQLite database: compact (a finished thread leaves the
Python heap), gone with the object.

Calls run in worker threads (``anyio.to_thread``), one at a time per connection.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Literal, TypeVar

import anyio.to_thread

from ._protocol import ThreadData

__all__ = ["THREADS_NAME", "MemoryThreadTables", "SQLThreadTables", "postgres_thread_tables"]

T = TypeVar("T")

THREADS_NAME = "hpd-agent-threads"
"""The ``application_name`` of a ``PostgresStore``'s thread tables' connection."""

_TABLES = (
    """CREATE TABLE IF NOT EXISTS hpd_thread_rows (
    space TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (space, thread_id, key)
)""",
    "CREATE INDEX IF NOT EXISTS hpd_thread_rows_key ON hpd_thread_rows (space, key)",
    """CREATE TABLE IF NOT EXISTS hpd_thread_items (
    space TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (space, thread_id, idx)
)""",
)

# A new key goes after the thread's rows (``seq``); a key it holds keeps its place.
_PUT_ROW = (
    "INSERT INTO hpd_thread_rows (space, thread_id, key, seq, value)"
    " SELECT ?, ?, ?, COALESCE(MAX(seq) + 1, 0), ? FROM hpd_thread_rows"
    " WHERE space = ? AND thread_id = ?"
    " ON CONFLICT (space, thread_id, key) DO UPDATE SET value = excluded.value"
)
_PUT_ITEM = (
    "INSERT INTO hpd_thread_items (space, thread_id, idx, item) VALUES (?,?,?,?)"
    " ON CONFLICT (space, thread_id, idx) DO NOTHING"
)
_ROWS = "SELECT key, value FROM hpd_thread_rows WHERE space = ? AND thread_id = ? ORDER BY seq"
_ITEMS = "SELECT item FROM hpd_thread_items WHERE space = ? AND thread_id = ? ORDER BY idx"
_SCHEMA_LOCK = 0x6870_6474  # PostgreSQL advisory lock id: the tables made once

_OWNER = "SELECT thread_id FROM hpd_thread_rows WHERE space = ? AND key = ? LIMIT 1"


class SQLThreadTables:
    """``ThreadTables`` over DB-API connections (SQLite here; ``_PgThreadTables``).

    Args:
        path: The SQLite file (``":memory:"``: a private database of this object's).
        durability: The file's ``durability`` (as ``SQLiteStore``'s): ``"process"``
            commits without waiting for the disk, ``"os"`` waits for ``fsync``.
    """

    _param = "?"

    def __init__(self, path: str = ":memory:", durability: Literal["process", "os"] = "os") -> None:
        self._path = path
        self._durability = durability
        self._conn: Any = None
        self._reader: Any = None
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._closed = False

    # -- what each database does its own way ---------------------------------------------
    def _connect(self) -> tuple[Any, Any]:
        """The writing connection, with the tables made, and a reading one (or None)."""
        conn = self._sqlite()
        if self._path == ":memory:":
            return conn, None
        # The store's durability for these tables too (SQLite's default on a connection
        # of our own, FULL, would make every commit wait for an fsync the store's do not).
        conn.execute(f"PRAGMA synchronous={'NORMAL' if self._durability == 'process' else 'FULL'}")
        return conn, self._sqlite()

    def _sqlite(self) -> sqlite3.Connection:
        return sqlite3.connect(
            self._path, timeout=30, isolation_level=None, check_same_thread=False
        )

    @contextlib.contextmanager
    def _transaction(self, conn: Any) -> Generator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _create(self, conn: Any) -> None:
        """Make the tables (in a transaction), if the database lacks them."""
        for sql in _TABLES:
            conn.execute(sql)

    def _retry(self, fn: Callable[[Any], T], error: BaseException) -> T:
        """After ``fn`` failed on the writing connection: raise (PostgreSQL reconnects)."""
        raise error

    # -- plumbing ------------------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql if self._param == "?" else sql.replace("?", self._param)

    def _writer(self) -> Any:
        """The writing connection, opened (with the tables) at first use; under the lock."""
        if self._conn is None:
            if self._closed:
                raise RuntimeError("these thread tables are closed")
            conn, reader = self._connect()
            try:
                with self._transaction(conn):
                    self._create(conn)
            except BaseException:
                conn.close()
                if reader is not None:
                    reader.close()
                raise
            self._conn, self._reader = conn, reader
        return self._conn

    async def _call(self, fn: Callable[[Any], T]) -> T:
        def locked() -> T:
            with self._lock:
                conn = self._writer()
                try:
                    return fn(conn)
                except Exception as e:
                    return self._retry(fn, e)

        return await anyio.to_thread.run_sync(locked)

    async def _read(self, fn: Callable[[Any], T]) -> T:
        """``fn`` on the reading connection, in one read transaction (a consistent
        snapshot); on the writing one where there is none."""
        with self._lock:
            opened = self._conn is not None
        if not opened:
            await self._call(lambda conn: None)
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

    # -- ThreadTables --------------------------------------------------------------------
    async def write_thread(
        self,
        space: str,
        thread_id: str,
        *,
        rows: Mapping[str, str] | None = None,
        items: Sequence[str] = (),
        first: int = 0,
    ) -> None:
        """Write rows and items of one thread in one transaction (``ThreadTables``)."""
        keyed = [(space, thread_id, k, v, space, thread_id) for k, v in (rows or {}).items()]
        logged = [(space, thread_id, first + i, item) for i, item in enumerate(items)]
        if not keyed and not logged:
            return
        put_row, put_item = self._sql(_PUT_ROW), self._sql(_PUT_ITEM)

        def write(conn: Any) -> None:
            with self._transaction(conn):
                cursor = conn.cursor()
                for row in keyed:  # one by one: each new key's place counts the one before
                    cursor.execute(put_row, row)
                if logged:
                    cursor.executemany(put_item, logged)

        await self._call(write)

    async def read_thread(self, space: str, thread_id: str) -> ThreadData | None:
        """The thread's rows and items; None if it holds neither (``ThreadTables``)."""
        rows_sql, items_sql = self._sql(_ROWS), self._sql(_ITEMS)

        def read(conn: Any) -> ThreadData | None:
            rows = conn.execute(rows_sql, (space, thread_id)).fetchall()
            items = conn.execute(items_sql, (space, thread_id)).fetchall()
            if not rows and not items:
                return None
            return ThreadData({k: v for k, v in rows}, [i for (i,) in items])

        return await self._read(read)

    async def thread_of(self, space: str, key: str) -> str | None:
        """The thread of ``space`` holding a row ``key``, or None (``ThreadTables``)."""
        sql = self._sql(_OWNER)

        def read(conn: Any) -> str | None:
            row = conn.execute(sql, (space, key)).fetchone()
            return None if row is None else str(row[0])

        return await self._read(read)

    def close(self) -> None:
        """Close the connections (a later call raises)."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None


class MemoryThreadTables(SQLThreadTables):
    """``ThreadTables`` in this process's memory, gone with the object.

    Kept in a private in-memory SQLite database rather than in Python objects: a thread's
    texts then take no room in the Python heap. Use it where a store offers no thread
    tables; ``MemoryStore`` offers one of these.
    """

    def __init__(self) -> None:
        super().__init__(":memory:")


class _PgThreadTables(SQLThreadTables):
    """The same tables in a PostgreSQL database (psycopg 3, autocommit connection); a
    connection the server dropped (a database restart) is opened again, once per call."""

    _param = "%s"

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self._dsn = dsn

    def _connect(self) -> tuple[Any, Any]:
        import psycopg

        conn = psycopg.connect(
            self._dsn, autocommit=True, connect_timeout=10, application_name=THREADS_NAME
        )
        return conn, None

    @contextlib.contextmanager
    def _transaction(self, conn: Any) -> Generator[None]:
        with conn.transaction():
            yield

    def _create(self, conn: Any) -> None:
        # Two processes making the tables at once would collide in the catalog.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        super()._create(conn)

    def _retry(self, fn: Callable[[Any], T], error: BaseException) -> T:
        import psycopg

        if not isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError)):
            raise error
        if not self._conn.closed:
            raise error
        self._conn = None
        return fn(self._writer())


def postgres_thread_tables(dsn: str) -> SQLThreadTables:
    """A ``PostgresStore``'s thread tables, in the database of ``dsn``."""
    return _PgThreadTables(dsn)
