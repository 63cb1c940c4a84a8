"""``PostgresStore``'s fast paths: statements run at once on the event loop's connection.

For a server on this machine ``PostgresStore`` opens a second connection for the event loop,
whose statements give up after a few milliseconds (``lock_timeout``, ``statement_timeout``).
``FastPaths`` holds what runs on it: a point statement at once (``_point_now``) or else in the
worker thread (``_point``), the journal write through ``JournalPipe`` (at once, or sent ahead
and confirmed later) and a group commit's batch in one pipelined transaction. A statement
that gave up was rolled back and goes to the worker thread.

After a statement failed or gave up, its connection is used again only once it is idle: a
failure inside a transaction leaves it aborted (every later statement would fail, and its
locks stay held), so it is rolled back (``reusable``), and one that cannot be (broken, or
its rollback gave up too) is closed, its journal writes still unconfirmed written again in
the worker thread, and a new one opened there at the next statement that goes there.

A layer between ``SQLStore`` and ``PostgresStore`` rather than an object the store holds: the
journal write on the event loop is the store's hottest path, and an override here costs no
call more than one in ``PostgresStore`` itself.
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

__all__ = ["FastPaths", "reusable"]

_Conn = psycopg.Connection[tuple[Any, ...]]

T = TypeVar("T")

_IDLE = psycopg.pq.TransactionStatus.IDLE
_IN_TRANSACTION = (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR)
_PIPELINE_OFF = psycopg.pq.PipelineStatus.OFF
_ROLLBACKS = 3
"""Rollbacks tried before a connection is given up (on the event loop's connection a
ROLLBACK too is under its time limit, which a loaded machine can exceed)."""


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


class FastPaths(SQLStore[_Conn]):
    """The methods of ``PostgresStore`` that use the event loop's connection.

    Attributes:
        _fast: The event loop's connection (None when the server is not on this machine,
            or once the store is closed).
        _fast_lock: Held while a statement runs on ``_fast``.
        _pipe: The journal writes on ``_fast`` (prepared, sent ahead, to be written again).
        _raw: The point statements on ``_fast`` through libpq (None unless it speaks UTF-8).
    """

    # Set by PostgresStore.__init__; declared here so that the methods below are typed.
    _fast: _Conn | None
    _fast_lock: threading.Lock
    _pipe: JournalPipe
    _raw: RawStatements | None
    _fast_lost = False
    """The event loop's connection was closed after a failure: ``_point`` opens another."""

    def _fast_connect(self) -> _Conn | None:
        """A new connection for the event loop (blocking), or None if none can be made."""
        raise NotImplementedError

    def _point_now(self, fn: Callable[[_Conn], T]) -> T | Missed:
        """On the event loop when the server is local and the fast connection is free; a
        statement that gave up (a row lock held, a slow server) was rolled back."""
        fast = self._fast
        if fast is None or not self._fast_lock.acquire(blocking=False):
            return MISSED
        try:
            if self._fast is not fast:
                return MISSED
            pipe = self._pipe
            if pipe.sent:
                pipe.settle(fast.pgconn)
            if pipe.again:
                return MISSED  # ``_point`` writes them first, in the worker thread
            return fn(fast)
        except GAVE_UP:
            return MISSED
        finally:
            if not _idle(fast):  # only after a failure
                self._after_failure(fast)
            self._fast_lock.release()

    def _after_failure(self, fast: _Conn) -> None:
        """Under ``_fast_lock``: ``fast`` idle again (rolled back), or closed."""
        if not reusable(fast):
            self._drop_fast(fast)

    def _drop_fast(self, fast: _Conn) -> None:
        """Under ``_fast_lock``: close ``fast``; the worker thread does its work meanwhile."""
        if self._fast is not fast:
            return
        self._fast = None
        self._fast_lost = True
        pipe = self._pipe
        # Their replies are lost with the connection: written again (an upsert, the same row).
        pipe.again.extend(pipe.sent)
        pipe.sent.clear()
        pipe.prepared = False
        with contextlib.suppress(psycopg.Error):
            fast.close()  # its transaction, and the locks it held, end with it

    async def _point(self, fn: Callable[[_Conn], T]) -> T:
        result = self._point_now(fn)
        if not isinstance(result, Missed):
            return result
        while self._pipe.again:
            run_id, entry, fence = self._pipe.again.popleft()
            with fencing(fence):
                await self._run(super()._journal_write(run_id, entry))
        result = await self._run(fn)
        if self._fast_lost:
            await self._reopen_fast()
        return result

    async def _reopen_fast(self) -> None:
        """Open a new event loop's connection in a thread (one try per connection lost)."""
        self._fast_lost = False
        fresh = await anyio.to_thread.run_sync(self._fast_connect, limiter=self._limiter())
        if fresh is None:
            return
        with self._fast_lock:
            if self._fast is None and self._conn is not None:  # not closed meanwhile
                self._raw = RawStatements() if fresh.info.encoding == "utf-8" else None
                self._fast, fresh = fresh, None
        if fresh is not None:
            fresh.close()

    def _journal_write(self, run_id: str, entry: JournalEntry) -> Callable[[_Conn], object]:
        fast = self._fast
        usual = super()._journal_write(run_id, entry)
        if fast is None or fast.info.encoding != "utf-8":
            return usual
        fence = current_fence(run_id)

        def write(conn: _Conn) -> object:
            if conn is not fast:  # the worker thread's connection: psycopg as usual
                return usual(conn)
            self._pipe.write(conn.pgconn, run_id, entry, fence)
            return None

        return write

    def journal_put_nowait(self, run_id: str, entry: JournalEntry) -> bool:
        """Record one fact of a run at once on the event loop's connection: sent after the
        writes sent ahead, and every reply read, so all of them take one round trip. False
        when it could not be written there (then ``journal_put`` writes it)."""
        if not self.journal_send_nowait(run_id, entry):
            return False
        fast = self._fast
        with self._fast_lock:
            if fast is None or self._fast is not fast:
                return False
            try:
                self._pipe.settle(fast.pgconn)
            finally:
                if not _idle(fast):
                    self._after_failure(fast)
        fence = current_fence(run_id)
        if fence is not None and fence.lost is not None:
            raise fence.lost
        return not self._pipe.again

    async def journal_confirm(self) -> None:
        """Wait until every journal write sent ahead is confirmed by the server (one that
        met a row lock is written again first)."""
        pipe = self._pipe
        if pipe.sent or pipe.again:
            await self._point(lambda conn: None)

    def journal_send_nowait(self, run_id: str, entry: JournalEntry) -> bool:
        """Send one fact of a run to the server without waiting for its reply.

        The write goes out at once on the event loop's connection (see ``_pg_journal``);
        its reply is read before that connection's next statement, so an entry sent this
        way is confirmed before the run acts on anything written after it. False when it
        cannot go now (nothing was sent; write it with ``journal_put`` instead).
        """
        fast = self._fast
        if fast is None or fast.info.encoding != "utf-8" or self._crowded():
            return False  # crowded: ``journal_group`` commits it with the others due now
        if self._pipe.again or not self._fast_lock.acquire(blocking=False):
            return False
        try:
            if self._fast is not fast:
                return False
            self._pipe.send(fast.pgconn, run_id, entry, current_fence(run_id))
        except psycopg.Error:
            # The connection failed (its statements were prepared as it opened): another
            # one will be opened, and ``journal_put`` writes the entry (maybe sent already:
            # an upsert, the same row).
            self._drop_fast(fast)
            return False
        finally:
            self._fast_lock.release()
        return True

    async def _commit_group(self, ops: list[GroupOp]) -> None:
        """A batch (journal writes, runs' starts and ends) in the pipeline of the event
        loop's connection: one transaction, one round trip. Else (that connection busy, a
        row lock held, a statement failed) statement by statement in one transaction,
        each op in its savepoint where it needs one (``_group``)."""
        raw = self._raw
        if self._fast is not None and raw is not None:
            committed: list[GroupOp] = []
            try:
                done = self._point_now(
                    lambda conn: self._pipe.batch(conn.pgconn, ops, raw, committed)
                )
            except psycopg.Error:
                done = MISSED  # rolled back: again statement by statement, in savepoints
            if done is True:
                return
            ops = ops[len(committed) :]  # the chunks committed before one that gave up
        await self._point(self._group_transaction(ops))
