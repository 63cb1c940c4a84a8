"""A store's side connection: the tables beside its runs (thread tables, grants).

What a store keeps for others than its runs' hot path (``ThreadTables`` for integrations,
``GrantBook`` for remembered grants) goes through one ``SideDB``: a ``SQLiteStore`` keeps
the tables in its file, written with its ``durability``, through a connection of their own
and a second one for reads (WAL: a read never queues behind a write); a ``PostgresStore``
in its database, through a connection of their own (named ``hpd-agent-threads``, opened
again once if the server dropped it); ``MemoryThreadTables`` and ``MemoryStore`` in a
private in-memory SQLite database. Connections are opened at the first call, so a store
whose runs never use them opens none, and the tables are made then if the database lacks
them (``CREATE TABLE IF NOT EXISTS``: a database an older version made gains them there).

Calls run in worker threads (``anyio.to_thread``), one at a time per connection.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Generator, Sequence
from typing import Any, Literal, TypeVar

import anyio.to_thread

__all__ = ["SIDE_NAME", "SideDB", "postgres_side_db"]

T = TypeVar("T")

SIDE_NAME = "hpd-agent-threads"
"""The ``application_name`` of a ``PostgresStore``'s side connection."""

_SCHEMA_LOCK = 0x6870_6474  # PostgreSQL advisory lock id: the tables made once


class SideDB:
    """The side tables' connections over DB-API (SQLite here; ``_PgSideDB``).

    Args:
        tables: The statements making the tables (and indexes), if the database lacks them;
            written with ``?`` for a parameter, as every statement given to ``sql``.
        path: The SQLite file (``":memory:"``: a private database of this object's).
        durability: The file's ``durability`` (as ``SQLiteStore``'s): ``"process"``
            commits without waiting for the disk, ``"os"`` waits for ``fsync``.
        checkpoint: The file's background checkpointer (``Checkpointer.tick``), told of
            each write (``call``'s ``writes``). Given, a commit here never checkpoints the
            WAL itself, as the store's own connections never do (SQLite's default would,
            once the WAL holds 1,000 pages: a web server's frames, megabytes a run, made
            nearly every commit copy the WAL into the file and wait for two ``fsync``s,
            the run's closing frames among them).
    """

    _param = "?"

    def __init__(
        self,
        tables: Sequence[str],
        path: str = ":memory:",
        durability: Literal["process", "os"] = "os",
        checkpoint: Callable[[int], None] | None = None,
    ) -> None:
        self._tables = tuple(tables)
        self._checkpoint = checkpoint
        self._path = path
        self._durability = durability
        self._conn: Any = None
        self._reader: Any = None
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._closed = False
        self._now: sqlite3.Connection | None = None
        """A SQLite file's connection for reads made on the event loop (``read_now``): it
        never waits for a lock (a WAL read takes none; if one were held, the read goes to a
        worker thread instead)."""
        self._now_lock = threading.Lock()

    # -- what each database does its own way ---------------------------------------------
    def _connect(self) -> tuple[Any, Any]:
        """The writing connection, and a reading one (or None)."""
        conn = self._sqlite()
        if self._path == ":memory:":
            return conn, None
        # The store's durability for these tables too (SQLite's default on a connection
        # of our own, FULL, would make every commit wait for an fsync the store's do not).
        conn.execute(f"PRAGMA synchronous={'NORMAL' if self._durability == 'process' else 'FULL'}")
        if self._checkpoint is not None:
            conn.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer's, in the background
        return conn, self._sqlite()

    def _sqlite(self) -> sqlite3.Connection:
        return sqlite3.connect(
            self._path, timeout=30, isolation_level=None, check_same_thread=False
        )

    @contextlib.contextmanager
    def transaction(self, conn: Any) -> Generator[None]:
        """One transaction on ``conn`` (committed, or rolled back on an exception)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _create(self, conn: Any) -> None:
        """Make the tables (in a transaction), if the database lacks them."""
        for sql in self._tables:
            conn.execute(sql)

    def _retry(self, fn: Callable[[Any], T], error: BaseException) -> T:
        """After ``fn`` failed on the writing connection: raise (PostgreSQL reconnects)."""
        raise error

    # -- plumbing ------------------------------------------------------------------------
    def sql(self, sql: str) -> str:
        """``sql`` with this database's parameter marker."""
        return sql if self._param == "?" else sql.replace("?", self._param)

    def _writer(self) -> Any:
        """The writing connection, opened (with the tables) at first use; under the lock."""
        if self._conn is None:
            if self._closed:
                raise RuntimeError("these side tables are closed")
            conn, reader = self._connect()
            try:
                with self.transaction(conn):
                    self._create(conn)
            except BaseException:
                conn.close()
                if reader is not None:
                    reader.close()
                raise
            self._conn, self._reader = conn, reader
        return self._conn

    async def call(self, fn: Callable[[Any], T], *, writes: int = 1) -> T:
        """``fn`` on the writing connection, in a worker thread; ``writes``: how many of the
        store's statements it writes as much as (toward the background checkpoint)."""

        def locked() -> T:
            with self._lock:
                conn = self._writer()
                try:
                    return fn(conn)
                except Exception as e:
                    return self._retry(fn, e)

        done = await anyio.to_thread.run_sync(locked)
        if self._checkpoint is not None:
            self._checkpoint(writes)
        return done

    async def read_now(self, fn: Callable[[Any], T]) -> T:
        """``read``, made at once on the event loop when it needs no wait (a SQLite file,
        its tables made, no other read on its connection now): a thread hop saved per call
        (a grant looked up before every permission request); else ``read``."""
        now = self._now
        if now is None:
            if self._path == ":memory:" or self._param != "?":
                return await self.read(fn)
            await self.read(lambda conn: None)  # opens the connections, makes the tables
            with self._now_lock:
                if self._now is None and not self._closed:
                    self._now = sqlite3.connect(
                        self._path, timeout=0, isolation_level=None, check_same_thread=False
                    )
            now = self._now
        if now is not None and self._now_lock.acquire(blocking=False):
            try:
                if self._now is not None:
                    now.execute("BEGIN")
                    try:
                        return fn(now)
                    finally:
                        now.execute("COMMIT")
            except sqlite3.OperationalError:
                pass  # a lock in the way (rare in WAL): the worker thread waits for it
            finally:
                self._now_lock.release()
        return await self.read(fn)

    async def read(self, fn: Callable[[Any], T]) -> T:
        """``fn`` on the reading connection, in one read transaction (a consistent
        snapshot); on the writing one where there is none."""
        # Not under ``_lock``: a write holds it for its commit (an fsync), and the event
        # loop would wait for it. Once set, ``_conn`` stays until ``close``.
        if self._conn is None:
            await self.call(lambda conn: None)  # opens the connections, makes the tables
        if self._reader is None:
            return await self.call(fn)

        def locked() -> T:
            with self._read_lock:
                self._reader.execute("BEGIN")
                try:
                    return fn(self._reader)
                finally:
                    self._reader.execute("COMMIT")

        return await anyio.to_thread.run_sync(locked)

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
        with self._now_lock:
            if self._now is not None:
                self._now.close()
                self._now = None


class _PgSideDB(SideDB):
    """The same tables in a PostgreSQL database (psycopg 3, autocommit connection); a
    connection the server dropped (a database restart) is opened again, once per call."""

    _param = "%s"

    def __init__(self, dsn: str, tables: Sequence[str]) -> None:
        super().__init__(tables)
        self._dsn = dsn

    def _connect(self) -> tuple[Any, Any]:
        import psycopg

        conn = psycopg.connect(
            self._dsn, autocommit=True, connect_timeout=10, application_name=SIDE_NAME
        )
        return conn, None

    @contextlib.contextmanager
    def transaction(self, conn: Any) -> Generator[None]:
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


def postgres_side_db(dsn: str, tables: Sequence[str]) -> SideDB:
    """A ``PostgresStore``'s side tables, in the database of ``dsn``."""
    return _PgSideDB(dsn, tables)
