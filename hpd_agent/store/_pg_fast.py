"""``PostgresStore``'s fast paths: statements run at once on the event loop's connection.

For a server on this machine ``PostgresStore`` holds a ``FastConnection``: a second
connection for the event loop, whose statements give up after a few milliseconds
(``lock_timeout``, ``statement_timeout``), and what runs on it: a point statement at once
(``point_now``) or else in the worker thread (``point``), the journal write through
``JournalPipe`` (at once, or sent ahead and confirmed later) and a group commit's batch in
one pipelined transaction. A statement that gave up was rolled back and goes to the worker
thread.

After a statement failed or gave up, its connection is used again only once it is idle: a
failure inside a transaction leaves it aborted (every later statement would fail, and its
locks stay held), so it is rolled back (``reusable``), and one that cannot be (broken, or
its rollback gave up too) is closed, its journal writes still unconfirmed written again in
the worker thread, and a new one opened there at the next statement that goes there.

An object the store holds, not a layer of its class: the store binds its ``SQLStore`` steps
(``_point_now``, ``_point``, ``_journal_write``, ``_commit_group``) to this object's methods
when it opens, and declares the object as its ``write_now`` and ``send_ahead`` capabilities,
so the journal write on the event loop (the store's hottest path) costs no call more than
a method of the store's own.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
import psycopg

from ._base import JournalEntry
from ._fence import current_fence, fencing
from ._group import GroupOp
from ._pg_journal import JournalPipe
from ._pg_raw import GAVE_UP, RawStatements
from ._sql import MISSED, Missed, SQLStore

__all__ = ["FAST_LIMIT", "FastConnection", "connect_options", "reusable"]

_Conn = psycopg.Connection[tuple[Any, ...]]

T = TypeVar("T")

_IDLE = psycopg.pq.TransactionStatus.IDLE
_IN_TRANSACTION = (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR)
_PIPELINE_OFF = psycopg.pq.PipelineStatus.OFF
FAST_LIMIT = "5ms"
"""How long a statement on the event loop may wait (for a row lock, or at all) before it
gives up and goes to the worker thread."""

_CONNECT_TIMEOUT = 10
"""Seconds to wait for the server when the DSN does not say (libpq waits forever)."""

_ROLLBACKS = 3
"""Rollbacks tried before a connection is given up (on the event loop's connection a
ROLLBACK too is under its time limit, which a loaded machine can exceed)."""


def connect_options(dsn: str) -> dict[str, Any]:
    """The connect timeout to add to ``dsn``'s options (none when it sets one)."""
    return {} if "connect_timeout" in dsn else {"connect_timeout": _CONNECT_TIMEOUT}


def _idle(conn: _Conn) -> bool:
    pgconn = conn.pgconn
    return pgconn.transaction_status == _IDLE and pgconn.pipeline_status == _PIPELINE_OFF


def reusable(conn: _Conn) -> bool:
    """Whether ``conn`` can run the next statement: idle, or rolled back to idle now.

    False when it cannot be made idle (closed, broken, left in pipeline mode, or its
    rollbacks failed): close it and use another.
    """
    pgconn = conn.pgconn
    if conn.closed or pgconn.pipeline_status != _PIPELINE_OFF:
        return False
    for _ in range(_ROLLBACKS):
        status = pgconn.transaction_status
        if status == _IDLE:
            return True
        if status not in _IN_TRANSACTION:
            return False  # a statement still running, or the connection is lost
        try:
            pgconn.exec_(b"ROLLBACK")  # raw: psycopg would also drop its prepared statements
        except psycopg.Error:
            return False
    return pgconn.transaction_status == _IDLE


class FastConnection:
    """The event loop's connection of a ``PostgresStore`` and what runs on it.

    Args:
        store: The store (its worker thread, limiter, group commit and usual journal
            write serve what cannot run here).
        dsn: Its server.
        local: Whether the server is on this machine: else no connection is opened and
            every statement goes to the worker thread.

    Attributes:
        conn: The connection (None when the server is not on this machine, after a failure
            until it is opened again, or once closed).
        lock: Held while a statement runs on ``conn``.
        pipe: The journal writes on ``conn`` (prepared, sent ahead, to be written again).
        raw: The point statements on ``conn`` through libpq (None unless it speaks UTF-8).
        lost: ``conn`` was closed after a failure: ``point`` opens another.
    """

    __slots__ = ("_dsn", "_store", "_usual_write", "conn", "lock", "lost", "pipe", "raw")

    def __init__(self, store: SQLStore[_Conn], dsn: str, *, local: bool) -> None:
        self._store = store
        self._dsn = dsn
        # The store's own journal write (a psycopg statement), before it is bound here.
        self._usual_write = store._journal_write
        self.lock = threading.Lock()
        self.pipe = JournalPipe()
        self.lost = False
        self.conn = self.connect() if local else None
        utf8 = self.conn is not None and self.conn.info.encoding == "utf-8"
        self.raw = RawStatements() if utf8 else None

    def connect(self) -> _Conn | None:
        """A new event loop's connection (blocking), or None if none can be made.

        The journal writes are prepared on it before its time limit is set: that is setup,
        which a loaded machine may well take longer than ``FAST_LIMIT`` to do. psycopg
        prepares nothing on it (``prepare_threshold=None``): its rollback would drop every
        prepared statement, ours too.
        """
        dsn = self._dsn
        try:
            fast: _Conn = psycopg.connect(
                dsn, autocommit=True, prepare_threshold=None, **connect_options(dsn)
            )
        except psycopg.Error:
            return None
        try:
            if fast.info.encoding == "utf-8":
                self.pipe.prepare(fast.pgconn)
            fast.execute(f"SET lock_timeout = '{FAST_LIMIT}'")
            fast.execute(f"SET statement_timeout = '{FAST_LIMIT}'")
        except psycopg.Error:
            fast.close()
            return None
        return fast

    def point_now(self, fn: Callable[..., T], *args: Any) -> T | Missed:
        """``SQLStore._point_now``: on the event loop when the server is local and the
        connection is free; a statement that gave up (a row lock held, a slow server) was
        rolled back."""
        fast = self.conn
        if fast is None or not self.lock.acquire(blocking=False):
            return MISSED
        try:
            if self.conn is not fast:
                return MISSED
            if not self._settled(fast) or self.pipe.again:
                return MISSED  # ``point`` writes them first, in the worker thread
            return fn(fast, *args)
        except GAVE_UP:
            return MISSED
        finally:
            if not _idle(fast):  # only after a failure
                self._after_failure(fast)
            self.lock.release()

    def _settled(self, fast: _Conn) -> bool:
        """Under ``lock``: the replies of the writes sent ahead on ``fast`` read. False when
        the connection was lost first: it is closed, and those not confirmed are to be
        written again (``_drop``).

        Raises:
            StoreUnavailableError: One of them failed (``JournalPipe.settle``).
        """
        if not self.pipe.sent or self.pipe.settle(fast.pgconn):
            return True
        self._drop(fast)
        return False

    def _after_failure(self, fast: _Conn) -> None:
        """Under ``lock``: ``fast`` idle again (rolled back), or closed."""
        if not reusable(fast):
            self._drop(fast)

    def _drop(self, fast: _Conn) -> None:
        """Under ``lock``: close ``fast``; the worker thread does its work meanwhile."""
        if self.conn is not fast:
            return
        self.conn = None
        self.lost = True
        pipe = self.pipe
        # Their replies are lost with the connection, and maybe the writes too: written
        # again (an upsert, the same row).
        pipe.again.extend(pipe.sent)
        pipe.sent.clear()
        pipe.prepared = False
        with contextlib.suppress(psycopg.Error):
            fast.close()  # its transaction, and the locks it held, end with it

    async def point(self, fn: Callable[[_Conn], T]) -> T:
        """``SQLStore._point``: at once if ``point_now`` can, else in the worker thread
        (the journal writes whose replies were lost first)."""
        result = self.point_now(fn)
        if not isinstance(result, Missed):
            return result
        store = self._store
        if self.pipe.again:
            await store._run(self._write_again)
        result = await store._run(fn)
        if self.lost:
            await self._reopen()
        return result

    def _write_again(self, conn: _Conn) -> None:
        """In the worker thread, on its connection: the journal writes in ``pipe.again``,
        in order; each leaves it once written (one that fails stays, with those after it).

        Raises:
            RunLeasedError: A write's fence no longer holds; nothing was written.
        """
        again = self.pipe.again
        while again:
            run_id, entry, fence = again[0]
            with fencing(fence):
                write = self._usual_write(run_id, entry)
            write(conn)
            again.popleft()

    async def _reopen(self) -> None:
        """Open a new event loop's connection in a thread (one try per connection lost)."""
        self.lost = False
        store = self._store
        fresh = await anyio.to_thread.run_sync(self.connect, limiter=store._limiter())
        if fresh is None:
            return
        with self.lock:
            if self.conn is None and store._conn is not None:  # not closed meanwhile
                self.raw = RawStatements() if fresh.info.encoding == "utf-8" else None
                self.conn, fresh = fresh, None
        if fresh is not None:
            fresh.close()

    def journal_write(self, run_id: str, entry: JournalEntry) -> Callable[[_Conn], object]:
        """``SQLRecords._journal_write``: on this connection through ``JournalPipe``."""
        fast = self.conn
        usual = self._usual_write(run_id, entry)
        if fast is None or fast.info.encoding != "utf-8":
            return usual
        fence = current_fence(run_id)

        def write(conn: _Conn) -> object:
            if conn is not fast:  # the worker thread's connection: psycopg as usual
                return usual(conn)
            self.pipe.write(conn.pgconn, run_id, entry, fence)
            return None

        return write

    def journal_put_nowait(self, run_id: str, entry: JournalEntry) -> bool:
        """``JournalWriteNow``: record one fact of a run at once on this connection: sent
        after the writes sent ahead, and every reply read, so all of them take one round
        trip. False when it could not be written here (then ``journal_put`` writes it)."""
        if not self.journal_send_nowait(run_id, entry):
            return False
        fast = self.conn
        with self.lock:
            if fast is None or self.conn is not fast:
                return False
            try:
                if not self._settled(fast):
                    return False
            finally:
                if not _idle(fast):
                    self._after_failure(fast)
        fence = current_fence(run_id)
        if fence is not None and fence.lost is not None:
            raise fence.lost
        return not self.pipe.again

    async def journal_confirm(self) -> None:
        """``JournalSendAhead``: wait until every journal write sent ahead is confirmed by
        the server (one that met a row lock is written again first)."""
        pipe = self.pipe
        if pipe.sent or pipe.again:
            await self.point(lambda conn: None)

    def journal_send_nowait(self, run_id: str, entry: JournalEntry) -> bool:
        """``JournalSendAhead``: send one fact of a run to the server without waiting for
        its reply.

        The write goes out at once on this connection (see ``_pg_journal``); its reply is
        read before the connection's next statement, so an entry sent this way is confirmed
        before the run acts on anything written after it. False when it cannot go now
        (nothing was sent; write it with ``journal_put`` instead).
        """
        fast = self.conn
        if fast is None or fast.info.encoding != "utf-8" or self._store._crowded():
            return False  # crowded: ``journal_group`` commits it with the others due now
        if self.pipe.again or not self.lock.acquire(blocking=False):
            return False
        try:
            if self.conn is not fast:
                return False
            self.pipe.send(fast.pgconn, run_id, entry, current_fence(run_id))
        except psycopg.Error:
            # The connection failed (its statements were prepared as it opened): another
            # one will be opened, and ``journal_put`` writes the entry (maybe sent already:
            # an upsert, the same row).
            self._drop(fast)
            return False
        finally:
            self.lock.release()
        return True

    async def commit_group(self, ops: list[GroupOp]) -> None:
        """``SQLRuns._commit_group``: a batch (journal writes, runs' starts and ends) in
        this connection's pipeline: one transaction, one round trip. Else (the connection
        busy, a row lock held, a statement failed) statement by statement in one
        transaction, each op in its savepoint where it needs one (``_group``)."""
        raw = self.raw
        if self.conn is not None and raw is not None:
            committed: list[GroupOp] = []

            def batch(conn: _Conn) -> bool:
                return self.pipe.batch(conn.pgconn, ops, raw, committed)

            try:
                done = self.point_now(batch)
            except psycopg.Error:
                done = MISSED  # rolled back: again statement by statement, in savepoints
            if done is True:
                return
            ops = ops[len(committed) :]  # the chunks committed before one that gave up
        await self.point(self._store._group_transaction(ops))

    def close(self, conn: _Conn) -> None:
        """As the store closes (in its worker thread, on its connection ``conn``): read
        the replies of the writes sent ahead, write again on ``conn`` those that were not
        written, and close the event loop's connection.

        Raises:
            StoreUnavailableError: A write sent ahead failed (``JournalPipe.settle``).
            RunLeasedError: A write's fence no longer holds; nothing was written.
        """
        with self.lock:
            fast = self.conn
            try:
                if fast is not None:
                    self._settled(fast)
            finally:
                if fast is not None:
                    self._drop(fast)  # those still unconfirmed go to ``again``
                self._write_again(conn)
