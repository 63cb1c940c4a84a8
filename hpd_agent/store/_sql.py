"""What the SQL stores share: the schema, the row <-> record mapping and the queries.

Both SQL stores keep JSON as text columns, so one mapping serves SQLite and PostgreSQL.
``SQLStore`` holds every query the two run alike; a ``Dialect`` spells the few pieces of SQL
that differ (placeholders, the float type, insert-or-ignore and upsert, locking a row), and
each concrete store supplies its connection, its transaction, its notify step and how it
watches for answers from other processes.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar, cast
from weakref import WeakKeyDictionary

import anyio
import anyio.lowlevel
import anyio.to_thread

from ..exceptions import StoreCorruptError, UserError
from ..text import mend
from ._base import (
    JournalEntry,
    RequestRecord,
    RequestState,
    dump_json,
    refusal,
)
from ._crowd import Driving, tuning_allowed
from ._feed import by_ids, readable, recent_sql
from ._fence import current_fence
from ._lease import DEFAULT_LEASE_TTL, check_lease_ttl
from ._protocol import StoreCapabilities, expire_stale
from ._session import Sessions
from ._sql_leases import SQLLeases
from ._sql_records import (
    MISSED,
    RUN_COLUMNS,
    Missed,
    SQLRecords,
    journal_from_row,
    json_column,
    run_from_row,
    run_to_row,
)
from ._sql_runs import SQLRuns
from ._waiters import Waiters, Wakeup

__all__ = [
    "MIGRATIONS",
    "MISSED",
    "REQUEST_COLUMNS",
    "RUN_COLUMNS",
    "Connection",
    "Cursor",
    "Dialect",
    "Missed",
    "SQLStore",
    "journal_from_row",
    "record_from_row",
    "record_to_row",
    "run_from_row",
    "run_to_row",
    "schema",
]

REQUEST_COLUMNS = (
    "id, run_id, agent_path, kind, question, payload, options, status, answer, "
    "created_at, answered_at, expires_at, context"
)

MIGRATIONS: tuple[tuple[str, str, str], ...] = (
    ("hpd_runs", "agent_ref", "TEXT"),
    ("hpd_leases", "fence", "BIGINT"),
)
"""(table, column, type) added since the first schema: a store opened on an older file or
database adds the missing ones (existing rows get NULL)."""

_REQUEST_STATES = frozenset({"pending", "answered", "declined", "expired", "cancelled"})


def schema(real: str, *, clustered: str = "", fences: str = "") -> list[str]:
    """The DDL statements, with ``real`` as the floating-point column type.

    ``fences`` makes what numbers the takes of leases (``Dialect.next_fence``).

    ``clustered`` follows the definition of the tables of small rows looked up by their key
    (the journal, the leases): SQLite's ``" WITHOUT ROWID"`` keeps such a row in its key's
    B-tree, so a write changes one page instead of two (a commit ~20 % cheaper). A table
    made by an older version keeps its layout; both read and write alike.
    """
    return [
        f"""CREATE TABLE IF NOT EXISTS hpd_requests (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            agent_path TEXT NOT NULL,
            kind TEXT NOT NULL,
            question TEXT NOT NULL,
            payload TEXT NOT NULL,
            options TEXT,
            status TEXT NOT NULL,
            answer TEXT,
            created_at {real} NOT NULL,
            answered_at {real},
            expires_at {real},
            context TEXT NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS hpd_requests_by_status ON hpd_requests (status, created_at)",
        "CREATE INDEX IF NOT EXISTS hpd_requests_by_run ON hpd_requests (run_id)",
        "CREATE INDEX IF NOT EXISTS hpd_requests_by_answered ON hpd_requests (answered_at)",
        """CREATE TABLE IF NOT EXISTS hpd_journal (
            run_id TEXT NOT NULL,
            key TEXT NOT NULL,
            kind TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (run_id, key)
        )"""
        + clustered,
        f"""CREATE TABLE IF NOT EXISTS hpd_runs (
            run_id TEXT PRIMARY KEY,
            agent_name TEXT NOT NULL,
            prompt TEXT NOT NULL,
            history TEXT NOT NULL,
            status TEXT NOT NULL,
            output TEXT,
            error TEXT,
            created_at {real} NOT NULL,
            updated_at {real} NOT NULL,
            agent_ref TEXT
        )""",
        # One row per run driven now (or whose driver died): see ``_lease``. A new table,
        # so a store file or database made by an older version gains it when opened.
        f"""CREATE TABLE IF NOT EXISTS hpd_leases (
            run_id TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            expires_at {real} NOT NULL,
            fence BIGINT
        )"""
        + clustered,
        *([fences] if fences else []),
    ]


def record_to_row(r: RequestRecord) -> tuple[Any, ...]:
    """The column values of a request, in ``REQUEST_COLUMNS`` order."""
    return (
        r.request_id,
        r.run_id,
        json.dumps(list(r.agent_path)),
        r.kind,
        mend(r.question),
        dump_json(r.payload),
        None if r.options is None else json.dumps(list(r.options)),
        r.status,
        None if r.status != "answered" else dump_json(r.answer),
        r.created_at,
        r.answered_at,
        r.expires_at,
        dump_json(r.context),
    )


def record_from_row(row: Sequence[Any]) -> RequestRecord:
    """A request from its columns in ``REQUEST_COLUMNS`` order.

    Raises:
        StoreCorruptError: A column cannot be read; the message names the request and run.
    """
    where = f"request {row[0]} (run {row[1]})"
    options = json_column(where, "options", row[6], nullable=True)
    path = json_column(where, "agent_path", row[2])
    payload = json_column(where, "payload", row[5])
    context = json_column(where, "context", row[12])
    if options is not None and not (
        isinstance(options, list) and all(isinstance(o, str) for o in cast(list[Any], options))
    ):
        raise StoreCorruptError(f"{where}: column options is not a list of text")
    if not isinstance(path, list) or not isinstance(payload, dict):
        raise StoreCorruptError(f"{where}: agent_path must be a list and payload an object")
    if not isinstance(context, dict) or row[7] not in _REQUEST_STATES:
        raise StoreCorruptError(f"{where}: bad context or unknown status {row[7]!r}")
    return RequestRecord(
        request_id=row[0],
        run_id=row[1],
        agent_path=tuple(cast(list[str], path)),
        kind=row[3],
        question=row[4],
        payload=cast(dict[str, Any], payload),
        options=None if options is None else tuple(cast(list[str], options)),
        status=row[7],
        answer=json_column(where, "answer", row[8], nullable=True),
        created_at=row[9],
        answered_at=row[10],
        expires_at=row[11],
        context=cast(dict[str, Any], context),
    )


_INSERTS: dict[tuple[Dialect, str, str, str, bool], str] = {}
"""``Dialect.insert``'s statements, built once."""


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """The pieces of SQL that differ between the stores' databases.

    Attributes:
        mark: The parameter placeholder (``?`` or ``%s``).
        real: The floating-point column type.
        on_conflict: True for ``INSERT ... ON CONFLICT`` (PostgreSQL), False for
            ``INSERT OR IGNORE`` / ``INSERT OR REPLACE`` (SQLite).
        lock_row: Appended to the ``SELECT`` that reads a request before resolving it, to
            lock the row for the transaction (empty when the transaction holds the lock).
        share_row: Appended to the ``SELECT`` that checks a lease's fencing token before a
            write, so a takeover waits for the write's commit (see ``_fence``).
        next_fence: A query giving the store's next fencing token (one row, one number);
            empty for tokens counted per run (``SQLLeases._next_fence``).
    """

    mark: str
    real: str
    on_conflict: bool
    lock_row: str = ""
    share_row: str = ""
    next_fence: str = ""

    def marks(self, n: int) -> str:
        """``n`` comma-separated placeholders."""
        return ",".join([self.mark] * n)

    def insert(self, table: str, columns: str, key: str, *, overwrite: bool) -> str:
        """An INSERT of one row that keeps (or overwrites) an existing row with the same key.

        Args:
            table: The table.
            columns: The comma-separated columns, key columns first.
            key: The comma-separated key columns (the conflict target).
            overwrite: Overwrite the non-key columns of an existing row instead of keeping it.
        """
        # Built once per statement (a run's start and end ask for theirs every time).
        cached = _INSERTS.get((self, table, columns, key, overwrite))
        if cached is None:
            cached = _INSERTS[self, table, columns, key, overwrite] = self._insert(
                table, columns, key, overwrite
            )
        return cached

    def _insert(self, table: str, columns: str, key: str, overwrite: bool) -> str:
        names = columns.split(", ")
        values = f"({columns}) VALUES ({self.marks(len(names))})"
        if not self.on_conflict:
            return f"INSERT OR {'REPLACE' if overwrite else 'IGNORE'} INTO {table} {values}"
        if not overwrite:
            return f"INSERT INTO {table} {values} ON CONFLICT ({key}) DO NOTHING"
        keys = key.split(", ")
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in names if c not in keys)
        return f"INSERT INTO {table} {values} ON CONFLICT ({key}) DO UPDATE SET {updates}"


class Cursor(Protocol):
    """What the shared queries use of a DB-API cursor."""

    @property
    def rowcount(self) -> int:
        """Rows the last statement changed."""
        ...

    def fetchone(self) -> Sequence[Any] | None:
        """The next row, or None."""
        ...

    def fetchall(self) -> Sequence[Sequence[Any]]:
        """The remaining rows."""
        ...


class Connection(Protocol):
    """What the shared code uses of a connection directly (queries go through ``_query``)."""

    def close(self) -> None:
        """Close the connection."""
        ...


C = TypeVar("C", bound=Connection)
T = TypeVar("T")

_THREADS = 8
"""Threads a store may use at once; its lock runs one query at a time, but calls waiting on
the lock in threads hand over faster than calls queued on a one-token limiter."""


# Per event loop (a limiter belongs to the loop that made it), per store, per use.
_LIMITERS: anyio.lowlevel.RunVar[WeakKeyDictionary[object, dict[str, anyio.CapacityLimiter]]] = (
    anyio.lowlevel.RunVar("hpd_agent_store_limiters")
)


class SQLStore(Sessions, SQLRecords[C], SQLLeases[C], SQLRuns[C], ABC, Generic[C]):
    """The ``Store`` methods the SQL stores share, over one connection used by one thread at a time.

    Blocking calls run in worker threads (``anyio.to_thread``), serialised by a lock. They
    take their threads through the store's own capacity limiter, never anyio's default one:
    sync tools fill that (40 threads), and store I/O must not queue behind blocked tools.

    Args:
        conn: The open connection, with the tables created.
        lease_ttl: Seconds a run's lease lasts unless renewed (see ``_lease``).
        gc_tuning: Whether the cyclic GC is tuned while the store drives many runs
            (``_crowd``).
    """

    dialect: Dialect
    """The SQL spelling of the concrete store's database."""

    def __init__(
        self, conn: C, *, lease_ttl: float = DEFAULT_LEASE_TTL, gc_tuning: bool = True
    ) -> None:
        self.lease_ttl = check_lease_ttl(lease_ttl)
        self._conn: C | None = conn
        self._lock = threading.Lock()
        self._driving = Driving(tune=gc_tuning and tuning_allowed())
        self._waiters = Waiters(self.get_request, self._watch)

    # -- what each database does its own way ---------------------------------------------
    @abstractmethod
    def _query(self, conn: C, sql: str, args: Sequence[Any] = ()) -> Cursor:
        """Run one statement on ``conn``."""

    @abstractmethod
    def _transaction(self, conn: C) -> AbstractContextManager[object]:
        """A write transaction: committed on normal exit, rolled back on an exception."""

    @abstractmethod
    def _notify(self, conn: C, request_id: str) -> None:
        """Inside ``resolve``'s transaction: tell other processes the request was resolved."""

    @abstractmethod
    async def _watch(self, waited: list[str], wakeup: Wakeup) -> list[str]:
        """Wait a while for answers from other processes (see ``_waiters.Watch``)."""

    @abstractmethod
    def capabilities(self) -> StoreCapabilities:
        """What the store offers beyond ``Store`` (each concrete store declares its own)."""

    def _close(self, conn: C) -> None:
        """Release the connection (and whatever else the store holds); under the lock."""
        conn.close()
        self._conn = None

    # -- plumbing ------------------------------------------------------------------------
    def _spelling(self) -> Dialect:
        return self.dialect

    def _locked(self, fn: Callable[[C], T]) -> T:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise UserError(f"{self!r} is closed")
            try:
                return fn(conn)
            except BaseException:
                self._recover(conn)
                raise

    def _recover(self, conn: C) -> None:
        """Under the lock, after ``fn`` failed on ``conn``: make the connection fit for the
        next statement (a PostgreSQL one may be left in an aborted transaction)."""

    def _limiter(self, name: str = "queries") -> anyio.CapacityLimiter:
        """The store's own thread limiter for ``name`` in the running event loop."""
        try:
            mine = _LIMITERS.get()
        except LookupError:
            mine = WeakKeyDictionary[object, dict[str, anyio.CapacityLimiter]]()
            _LIMITERS.set(mine)
        limiters = mine.setdefault(self, {})
        limiter = limiters.get(name)
        if limiter is None:
            limiter = limiters[name] = anyio.CapacityLimiter(_THREADS)
        return limiter

    async def _run(self, fn: Callable[[C], T]) -> T:
        return await anyio.to_thread.run_sync(self._locked, fn, limiter=self._limiter())

    def _point_now(self, fn: Callable[..., T], *args: Any) -> T | Missed:
        """Run a short statement (or transaction) about one row, ``fn(conn, *args)``, at
        once, on the event loop, if the store can (``SQLiteStore``, a ``PostgresStore`` on
        this machine); ``MISSED`` when it cannot now, having written nothing."""
        return MISSED

    async def _point(self, fn: Callable[[C], T]) -> T:
        """Run a short statement (or transaction) about one row: at once if
        ``_point_now`` can, else in the store's thread."""
        result = self._point_now(fn)
        if isinstance(result, Missed):
            return await self._run(fn)
        return result

    def _announce(self, request_id: str) -> None:
        """After ``resolve`` committed: tell other processes by another way than ``_notify``."""

    def _get(self, conn: C, request_id: str, *, lock: bool = False) -> RequestRecord | None:
        sql = f"SELECT {REQUEST_COLUMNS} FROM hpd_requests WHERE id = {self.dialect.mark}"
        if lock:
            sql += self.dialect.lock_row
        row = self._query(conn, sql, (request_id,)).fetchone()
        return None if row is None else record_from_row(row)

    # -- requests ------------------------------------------------------------------------
    async def add_request(
        self, record: RequestRecord, *, journal: Sequence[JournalEntry] = ()
    ) -> RequestRecord:
        """Insert a pending request, or return the stored one with that id.

        Args:
            record: The request.
            journal: Facts of the request's run to record first, in the same transaction
                (what the run held back until something acted on it: see ``_journal``).
        """
        row = record_to_row(record)
        sql = self._request_insert()

        def add(conn: C) -> RequestRecord:
            if self._query(conn, sql, row).rowcount == 1:
                return record
            found = self._get(conn, record.request_id)
            assert found is not None
            return found

        if not journal:
            added = await self._point(self._fenced(current_fence(record.run_id), add))
        else:
            write = self._journal_rows(record.run_id, journal)

            def add_after(conn: C) -> RequestRecord:
                with self._transaction(conn):
                    write(conn)
                    return add(conn)

            added = await self._point(add_after)
        if added is record:
            self._opened(record.request_id)
        return added

    def _request_insert(self) -> str:
        """The statement inserting a request unless its id is stored (its arguments:
        ``record_to_row``)."""
        return self.dialect.insert("hpd_requests", REQUEST_COLUMNS, "id", overwrite=False)

    def _opened(self, request_id: str) -> None:
        """After a new request was committed: tell the store's feeds in other processes by
        another way than the insert itself (``RequestFeed``)."""

    async def _feed_recent(self, since: float) -> list[tuple[str, str]]:
        """(id, status) of the requests opened or ended since ``since`` (a feed's look)."""
        sql = recent_sql(self.dialect.mark)
        rows = await self._run(lambda conn: self._query(conn, sql, (since, since)).fetchall())
        return [(row[0], row[1]) for row in rows]

    async def _feed_read(self, ids: list[str]) -> list[RequestRecord]:
        """The records of ``ids`` (a feed's wake-up), unreadable rows left out."""

        def select(conn: C) -> list[Sequence[Any]]:
            rows: list[Sequence[Any]] = []
            for sql, args in by_ids(REQUEST_COLUMNS, self.dialect.mark, ids):
                rows.extend(self._query(conn, sql, args).fetchall())
            return rows

        return readable(await self._run(select), record_from_row)

    async def get_request(self, request_id: str) -> RequestRecord | None:
        """The request with this id, or None."""
        return await self._point(lambda conn: self._get(conn, request_id))

    async def list_requests(
        self,
        *,
        run_id: str | None = None,
        status: RequestState | None = "pending",
        errors: list[StoreCorruptError] | None = None,
    ) -> list[RequestRecord]:
        """Requests, oldest first, narrowed to a run and/or a status.

        Args:
            run_id: Only this run's requests.
            status: Only requests with this status (None: any).
            errors: When given, a row that cannot be read is added here as a
                ``StoreCorruptError`` and skipped, so one bad row hides none of the others;
                without it, the first such row raises.
        """
        mark = self.dialect.mark
        where: list[str] = []
        args: list[Any] = []
        if run_id is not None:
            where.append(f"run_id = {mark}")
            args.append(run_id)
        if status is not None:
            where.append(f"status = {mark}")
            args.append(status)
        sql = f"SELECT {REQUEST_COLUMNS} FROM hpd_requests"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, id"
        rows = await self._run(lambda conn: self._query(conn, sql, args).fetchall())
        records: list[RequestRecord] = []
        for row in rows:
            try:
                records.append(record_from_row(row))
            except StoreCorruptError as e:
                if errors is None:
                    raise
                errors.append(e)
        return records

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

        def update(conn: C) -> RequestRecord:
            return self._resolve_in(conn, request_id, status, answer_json, extra)

        record = await self._point(update)
        self._announce(request_id)
        self._waiters.wake(request_id, record)
        return record

    def _resolve_in(
        self,
        conn: C,
        request_id: str,
        status: RequestState,
        answer_json: str | None,
        extra: dict[str, Any],
    ) -> RequestRecord:
        """``resolve``'s transaction: read the pending row locked, update it, notify."""
        mark = self.dialect.mark
        sql = (
            f"UPDATE hpd_requests SET status = {mark}, answer = {mark}, answered_at = {mark}, "
            f"context = {mark} WHERE id = {mark} AND status = 'pending'"
        )
        with self._transaction(conn):
            # Locked (by the transaction or the row lock) from this read to the commit:
            # a racing resolver, in any process, reads the status committed here.
            current = self._get(conn, request_id, lock=True)
            if current is None or current.status != "pending":
                raise refusal(current, request_id)
            merged = {**current.context, **extra}
            now = time.time()
            args = (status, answer_json, now, dump_json(merged), request_id)
            if self._query(conn, sql, args).rowcount != 1:
                raise refusal(self._get(conn, request_id), request_id)
            self._notify(conn, request_id)
        stored = None if answer_json is None else json.loads(answer_json)
        return replace(current, status=status, answer=stored, answered_at=now, context=merged)

    async def wait_resolved(self, request_id: str) -> RequestRecord:
        """Wait until the request leaves ``pending``, resolved here or by another process.

        However many requests wait in this process, one watcher serves them all (see
        ``_waiters``).
        """
        return await self._waiters.wait(request_id)

    async def recover(
        self, max_age: float, *, run_id: str | None = None, now: float | None = None
    ) -> list[str]:
        """Expire pending requests older than ``max_age`` seconds or past their expiry."""
        return await expire_stale(self, max_age, run_id=run_id, now=now)

    async def aclose(self) -> None:
        """Close the database connection (and stop the lease renewer thread)."""
        await self._stop_renewer()
        await self._stop_behind()
        self._driving.close()
        if self._conn is not None:
            await self._run(self._close)
