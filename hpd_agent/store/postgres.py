"""``PostgresStore``: the store for many workers on many machines (psycopg 3).

Needs the ``postgres`` extra (``pip install -e ".[postgres]"`` in the checkout). psycopg's
synchronous API runs in worker threads (``anyio.to_thread``, through the store's own
limiters, so it never queues behind blocked sync tools), so the store works on asyncio and
trio alike. When the server is on this machine (a Unix socket or a loopback address), a short
statement about one row runs on the event loop instead (``_pg_fast``), on a connection of
its own whose statements give up after a few milliseconds (``lock_timeout``,
``statement_timeout``): a round trip there costs less than handing the statement to a
thread; a statement that gives up was rolled back and goes to the thread.

Answers wake waiting runs in any process through LISTEN/NOTIFY: ``resolve`` sends
``pg_notify('hpd_agent_requests', request_id)`` in the same transaction as its update, and a
waiter LISTENs on its own connection before it looks at the request, so no answer slips
between the look and the wait. The listening connection's socket is watched on the event
loop, and notifications are read from it without waiting. A new request is notified on
``hpd_agent_opened`` by its insert: a request feed (``request_changes``: an inbox) listens
on both channels, on a connection of its own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, LiteralString, cast

import anyio
import anyio.to_thread

from ..exceptions import StoreUnavailableError
from ._base import JournalEntry, RequestRecord, RequestState, dump_json, refusal
from ._feed import FeedChanges
from ._fence import Fence
from ._grants import GRANT_TABLES, SQLGrants
from ._lease import DEFAULT_LEASE_TTL, check_lease_ttl
from ._pg_fast import FastConnection, connect_options, reusable
from ._pg_listen import CHANNEL, OPENED, Listener
from ._protocol import StoreCapabilities
from ._schemes import StoreOptions, lease_option, no_durability
from ._side import postgres_side_db
from ._sql import (
    MIGRATIONS,
    REQUEST_COLUMNS,
    Cursor,
    Dialect,
    SQLStore,
    record_from_row,
    schema,
)
from ._threads import THREAD_TABLES, SQLThreadTables
from ._waiters import Wakeup

try:
    import psycopg
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        'PostgresStore needs psycopg 3: pip install -e ".[postgres]" in the hpd-agent checkout'
    ) from e

__all__ = ["CHANNEL", "RENEWER_NAME", "PostgresStore", "open_dsn"]

RENEWER_NAME = "hpd-agent lease renewer"
"""The ``application_name`` of the renewer thread's connection (see ``_renewer``)."""


_SCHEMA_LOCK = 0x6870_6461  # advisory lock id: concurrent first starts create tables once

# FOR UPDATE: a racing resolver waits at its read, then reads the committed status.
_DIALECT = Dialect(
    mark="%s",
    real="DOUBLE PRECISION",
    on_conflict=True,
    lock_row=" FOR UPDATE",
    share_row=" FOR SHARE",
    next_fence="SELECT nextval('hpd_fences')",
)

_Conn = psycopg.Connection[tuple[Any, ...]]

_RESOLVE = (
    "WITH done AS (UPDATE hpd_requests SET status = %s, answer = %s, answered_at = %s, "
    "context = (context::jsonb || %s::jsonb)::text WHERE id = %s AND status = 'pending' "
    f"RETURNING {REQUEST_COLUMNS}) SELECT done.*, pg_notify(%s, done.id) FROM done"
)
"""``resolve`` in one statement (one round trip instead of five): the conditional update
merges the context, returns the row and notifies, atomically. A racing resolver waits for
the row lock, then finds the row no longer pending and updates nothing."""

_BEHIND = (
    "WITH j AS (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::bigint[]) AS j(run_id, key, kind, value, fence)), "
    "ok AS (SELECT l.run_id FROM hpd_leases l JOIN (SELECT DISTINCT run_id, fence FROM j) f "
    "ON l.run_id = f.run_id AND l.fence = f.fence FOR SHARE OF l) "
    "INSERT INTO hpd_journal (run_id, key, kind, value) "
    "SELECT j.run_id, j.key, j.kind, j.value FROM j JOIN ok ON ok.run_id = j.run_id "
    "ON CONFLICT (run_id, key) DO UPDATE SET kind = EXCLUDED.kind, value = EXCLUDED.value "
    "RETURNING run_id"
)
"""A batch of mode ``"async"``'s writer (``_behind``) in one statement (one round trip
instead of one per row): each run's rows only while its lease has the run's token (the
lease row shared until the commit, as for a single write); the runs written come back."""

_NOTIFY_OPENED = f" RETURNING pg_notify('{OPENED}', id) IS NULL"
"""Appended to the request insert: a new request notifies the request feeds at its commit,
in the same statement (no round trip more); a request stored already notifies nobody."""


def _is_local(conn: _Conn) -> bool:
    """Whether the server is on this machine (Unix socket or loopback address)."""
    host = conn.info.host
    return host.startswith("/") or host in ("localhost", "127.0.0.1", "::1") or host == ""


def _where(dsn: str) -> str:
    """The DSN without its password, to name the store in a message."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "(unparsable DSN)"
    host, port, db = info.get("host", "localhost"), info.get("port", 5432), info.get("dbname", "")
    return f"{host}:{port}/{db}"


class PostgresStore(SQLStore[_Conn]):
    """A ``Store`` in PostgreSQL, shared by any number of processes and machines.

    Args:
        dsn: A libpq connection string or URL (``postgresql://user@host:port/db``).
        recheck_interval: Seconds after which a waiter looks at its request again even
            without a notification (a safety net; wake-ups come from NOTIFY).
        lease_ttl: Seconds a run's lease lasts unless renewed (every third of it, while the
            run runs): a run whose worker died can be resumed by another this long after
            its last renewal. The workers' clocks must agree to well within it (NTP).
            See docs/guarantees.md.
        gc_tuning: While the store drives many runs at once (64 or more), CPython's cyclic
            GC collects its young objects every 50,000 allocations instead of every 700
            (``gc.set_threshold``), and the previous thresholds are set back when it drives
            16 or fewer; False leaves the collector alone (so does
            ``HPD_AGENT_GC_TUNING=0``). See docs/durability.md.
    """

    dialect = _DIALECT

    def __init__(
        self,
        dsn: str,
        *,
        recheck_interval: float = 1.0,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        gc_tuning: bool = True,
    ) -> None:
        check_lease_ttl(lease_ttl)
        self.dsn = dsn
        self.recheck_interval = recheck_interval
        try:
            conn: _Conn = psycopg.connect(dsn, autocommit=True, **connect_options(dsn))
        except psycopg.Error as e:
            raise StoreUnavailableError(
                f"cannot connect to PostgreSQL store {_where(dsn)}: {' '.join(str(e).split())}"
            ) from None
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in schema(
                    _DIALECT.real, fences="CREATE SEQUENCE IF NOT EXISTS hpd_fences"
                ):
                    conn.execute(cast(LiteralString, statement))
                for table, column, kind in MIGRATIONS:
                    conn.execute(
                        cast(
                            LiteralString,
                            f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {kind}",
                        )
                    )
        except psycopg.Error as e:
            conn.close()
            raise StoreUnavailableError(
                f"cannot use PostgreSQL store {_where(dsn)}: {' '.join(str(e).split())}"
            ) from None
        self._listener = Listener(dsn, _where(dsn), connect_options(dsn))
        self._side = postgres_side_db(dsn, (*THREAD_TABLES, *GRANT_TABLES))
        self._threads = SQLThreadTables(self._side)
        self._grants = SQLGrants(self._side)
        super().__init__(conn, lease_ttl=lease_ttl, gc_tuning=gc_tuning)
        # The event loop's connection: an object the store holds, whose methods its shared
        # steps and its journal capabilities are bound to (no call more than a method of
        # its own: the journal write on the event loop is the store's hottest path).
        fast = self._fast = FastConnection(self, dsn, local=_is_local(conn))
        self._point_now = fast.point_now
        self._point = fast.point
        self._journal_write = fast.journal_write
        self._commit_group = fast.commit_group
        self.journal_put_nowait = fast.journal_put_nowait
        self.journal_send_nowait = fast.journal_send_nowait
        self.journal_confirm = fast.journal_confirm

    def _recover(self, conn: _Conn) -> None:
        """After a failure in the worker thread: its connection idle again (rolled back:
        an aborted transaction fails every later statement), or replaced by a new one."""
        if self._conn is not conn or reusable(conn):
            return
        with contextlib.suppress(psycopg.Error):
            conn.close()
        with contextlib.suppress(psycopg.Error):  # else the next statement says it is closed
            self._conn = psycopg.connect(self.dsn, autocommit=True, **connect_options(self.dsn))

    def _renewal_connect(self) -> _Conn:
        """The renewer thread's own connection; a renewal that cannot finish within a third
        of ``lease_ttl`` fails (and is retried at the next one)."""
        conn: _Conn = psycopg.connect(
            self.dsn, autocommit=True, application_name=RENEWER_NAME, **connect_options(self.dsn)
        )
        limit = max(1, int(self.lease_ttl * 1000 / 3))
        conn.execute(cast(LiteralString, f"SET statement_timeout = {limit}"))
        return conn

    def __repr__(self) -> str:
        info = self._conn.info if self._conn is not None else None
        where = f"{info.host}:{info.port}/{info.dbname}" if info is not None else "closed"
        return f"PostgresStore({where!r})"

    def capabilities(self) -> StoreCapabilities:
        """Everything: journal writes at once, in batches and sent ahead, and cheap leases.
        The journal sends entries ahead (a round trip saved per turn) rather than hold
        them back; while the store drives several runs, their writes due at once go in one
        pipelined transaction instead (see ``StoreCapabilities``). Thread tables and
        remembered grants in the same database (``_threads``, ``_grants``)."""
        fast = self._fast
        return StoreCapabilities(
            write_now=fast,
            batches=self,
            send_ahead=fast,
            leases=self,
            groups=self,
            behind=self,
            threads=self._threads,
            feed=self,
            grants=self._grants,
        )

    def request_changes(self) -> AbstractAsyncContextManager[AsyncIterator[RequestRecord]]:
        """Every worker's requests as they open and end (``RequestFeed``): a listening
        connection of the listener's own (LISTEN on both channels), a look at what changed
        lately every ``recheck_interval`` besides."""
        return self._changes()

    @contextlib.asynccontextmanager
    async def _changes(self) -> AsyncGenerator[AsyncIterator[RequestRecord]]:
        listener = Listener(
            self.dsn, _where(self.dsn), connect_options(self.dsn), (CHANNEL, OPENED)
        )

        async def heard(timeout: float) -> list[str] | None:
            if not listener.listening:  # lost: listening again, then a look
                await anyio.to_thread.run_sync(listener.open, limiter=self._limiter("listen"))
                return None
            found = listener.notifications()
            if not found:
                with anyio.move_on_after(timeout):
                    await anyio.wait_readable(listener.fileno())
                found = listener.notifications()
            return found

        await anyio.to_thread.run_sync(listener.open, limiter=self._limiter("listen"))
        try:
            yield FeedChanges(heard, self._feed_recent, self._feed_read, self.recheck_interval)
        finally:
            listener.close()

    def _request_insert(self) -> str:
        return super()._request_insert() + _NOTIFY_OPENED

    # -- the PostgreSQL way of the shared steps ------------------------------------------
    def _query(self, conn: _Conn, sql: str, args: Sequence[Any] = ()) -> Cursor:
        # On the event loop's connection, through libpq (``_pg_raw``) when it can.
        fast = self._fast
        if conn is fast.conn and fast.raw is not None:
            rows = fast.raw.run(conn.pgconn, sql, args)
            if rows is not None:
                return rows
        # The statements are built from constants and placeholders, never from values.
        return conn.execute(cast(LiteralString, sql), args)

    def _transaction(self, conn: _Conn) -> AbstractContextManager[object]:
        return conn.transaction()

    def _behind_commit(
        self, conn: _Conn, batch: Sequence[tuple[str, Fence | None, list[JournalEntry]]]
    ) -> list[BaseException | None]:
        if any(fence is None for _, fence, _ in batch):
            return super()._behind_commit(conn, batch)
        # A key written twice in one batch (a kept conversation) once, with its last value:
        # one statement may not update a row twice.
        rows: dict[tuple[str, str], tuple[str, str, int]] = {}
        for run_id, fence, entries in batch:
            token = cast(Fence, fence).token
            for e in entries:
                rows[run_id, e.key] = (e.kind, dump_json(e.value), token)
        keys, values = list(rows), list(rows.values())
        args = (
            [k[0] for k in keys],
            [k[1] for k in keys],
            [v[0] for v in values],
            [v[1] for v in values],
            [v[2] for v in values],
        )
        kept = {r[0] for r in self._query(conn, _BEHIND, args).fetchall()}
        return [
            None if run_id in kept else cast(Fence, fence).refuse() for run_id, fence, _ in batch
        ]

    def _resolve_in(
        self,
        conn: _Conn,
        request_id: str,
        status: RequestState,
        answer_json: str | None,
        extra: dict[str, Any],
    ) -> RequestRecord:
        args = (status, answer_json, time.time(), dump_json(extra), request_id, CHANNEL)
        try:
            row = self._query(conn, _RESOLVE, args).fetchone()
        except psycopg.errors.DataError:
            # A stored context that is not JSON (read back as StoreCorruptError naming the
            # request), or text jsonb refuses (a NUL): the read-then-update transaction.
            return super()._resolve_in(conn, request_id, status, answer_json, extra)
        if row is None:
            raise refusal(self._get(conn, request_id), request_id)
        return record_from_row(row[:-1])

    def _notify(self, conn: _Conn, request_id: str) -> None:
        """Wake waiters in every process, at commit (NOTIFY is transactional)."""
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, request_id))

    def _close(self, conn: _Conn) -> None:
        try:
            self._fast.close(conn)  # first: what it could not write is written on ``conn``
        finally:
            super()._close(conn)
            self._listener.close()
            self._side.close()

    # -- answers from other processes: LISTEN/NOTIFY -------------------------------------
    async def _watch(self, waited: list[str], wakeup: Wakeup) -> list[str]:
        listener = self._listener
        if not listener.listening:
            await anyio.to_thread.run_sync(listener.open, limiter=self._limiter("listen"))
            # Just started listening: an answer may have come before.
            return await self._resolved(waited)
        found = listener.notifications()
        if not found:
            if not await wakeup.readable(listener.fileno(), self.recheck_interval):
                # Heard nothing for a while: look at every waited id.
                return await self._resolved(waited)
            found = listener.notifications()
        # Every id notified: a request registered since the wait began is woken too.
        return found

    async def _resolved(self, waited: list[str]) -> list[str]:
        def select(conn: _Conn) -> list[str]:
            rows = conn.execute(
                "SELECT id FROM hpd_requests WHERE id = ANY(%s) AND status <> 'pending'",
                (waited,),
            ).fetchall()
            return [r[0] for r in rows]

        return await self._run(select) if waited else []


def open_dsn(location: str, options: StoreOptions) -> PostgresStore:
    """The ``postgresql://`` and ``postgres://`` schemes' factory (``register_scheme``)."""
    why = "a PostgreSQL server's durability is its own setting (synchronous_commit)"
    no_durability(options, why)
    return PostgresStore(location, **lease_option(options))
