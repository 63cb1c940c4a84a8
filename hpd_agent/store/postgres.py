"""``PostgresStore``: the store for many workers on many machines (psycopg 3).

Needs the ``postgres`` extra (``pip install "hpd-agent[postgres]"``). psycopg's synchronous
API runs in worker threads (``anyio.to_thread``, through the store's own limiters, so it
never queues behind blocked sync tools), so the store works on asyncio and trio
alike. Answers wake waiting runs in any process through LISTEN/NOTIFY: ``resolve`` sends
``pg_notify('hpd_agent_requests', request_id)`` in the same transaction as its update, and a
waiter LISTENs on its own connection before it looks at the request, so no answer slips
between the look and the wait.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, LiteralString, cast

import anyio
import anyio.to_thread

from ..exceptions import StoreUnavailableError
from ._lease import DEFAULT_LEASE_TTL, check_ttl
from ._sql import MIGRATIONS, Dialect, SQLStore, schema

try:
    import psycopg
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError('PostgresStore needs psycopg 3: pip install "hpd-agent[postgres]"') from e

__all__ = ["CHANNEL", "PostgresStore"]

CHANNEL = "hpd_agent_requests"
"""The NOTIFY channel; the payload is the id of the request that left ``pending``."""

_SCHEMA_LOCK = 0x6870_6461  # advisory lock id: concurrent first starts create tables once

# FOR UPDATE: a racing resolver waits at its read, then reads the committed status.
_DIALECT = Dialect(mark="%s", real="DOUBLE PRECISION", on_conflict=True, lock_row=" FOR UPDATE")

_Conn = psycopg.Connection[tuple[Any, ...]]

_CONNECT_TIMEOUT = 10
"""Seconds to wait for the server when the DSN does not say (libpq waits forever)."""


def _timeout(dsn: str) -> dict[str, Any]:
    return {} if "connect_timeout" in dsn else {"connect_timeout": _CONNECT_TIMEOUT}


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
    """

    dialect = _DIALECT

    def __init__(
        self, dsn: str, *, recheck_interval: float = 1.0, lease_ttl: float = DEFAULT_LEASE_TTL
    ) -> None:
        check_ttl(lease_ttl)
        self.dsn = dsn
        self.recheck_interval = recheck_interval
        try:
            conn: _Conn = psycopg.connect(dsn, autocommit=True, **_timeout(dsn))
        except psycopg.Error as e:
            raise StoreUnavailableError(
                f"cannot connect to PostgreSQL store {_where(dsn)}: {' '.join(str(e).split())}"
            ) from None
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in schema(_DIALECT.real):
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
        self._listener: _Conn | None = None
        self._listen_lock = threading.Lock()
        super().__init__(conn, lease_ttl=lease_ttl)

    def __repr__(self) -> str:
        info = self._conn.info if self._conn is not None else None
        where = f"{info.host}:{info.port}/{info.dbname}" if info is not None else "closed"
        return f"PostgresStore({where!r})"

    # -- the PostgreSQL way of the shared steps ------------------------------------------
    def _query(
        self, conn: _Conn, sql: str, args: Sequence[Any] = ()
    ) -> psycopg.Cursor[tuple[Any, ...]]:
        # The statements are built from constants and placeholders, never from values.
        return conn.execute(cast(LiteralString, sql), args)

    def _transaction(self, conn: _Conn) -> AbstractContextManager[object]:
        return conn.transaction()

    def _notify(self, conn: _Conn, request_id: str) -> None:
        """Wake waiters in every process, at commit (NOTIFY is transactional)."""
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, request_id))

    def _close(self, conn: _Conn) -> None:
        super()._close(conn)
        with self._listen_lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    # -- answers from other processes: LISTEN/NOTIFY -------------------------------------
    async def _watch(self, waited: list[str], wakeup: anyio.Event) -> list[str]:
        stop = threading.Event()
        try:
            notified, fresh = await anyio.to_thread.run_sync(
                self._notifications, stop, abandon_on_cancel=True, limiter=self._limiter("listen")
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
