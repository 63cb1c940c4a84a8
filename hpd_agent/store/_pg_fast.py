"""``PostgresStore``'s fast paths: statements run at once on the event loop's connection.

For a server on this machine ``PostgresStore`` opens a second connection for the event loop,
whose statements give up after a few milliseconds (``lock_timeout``, ``statement_timeout``).
``FastPaths`` holds what runs on it: a point statement at once (``_point_now``) or else in the
worker thread (``_point``), the journal write through ``JournalPipe`` (at once, or sent ahead
and confirmed later) and a group commit's batch in one pipelined transaction. A statement
that gave up was rolled back and goes to the worker thread.

A layer between ``SQLStore`` and ``PostgresStore`` rather than an object the store holds: the
journal write on the event loop is the store's hottest path, and an override here costs no
call more than one in ``PostgresStore`` itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from ._base import JournalEntry
from ._fence import current_fence, fencing
from ._group import GroupOp
from ._pg_journal import JournalPipe
from ._pg_raw import RawStatements
from ._sql import MISSED, Missed, SQLStore

__all__ = ["FastPaths"]

_Conn = psycopg.Connection[tuple[Any, ...]]

T = TypeVar("T")


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

    def _point_now(self, fn: Callable[[_Conn], T]) -> T | Missed:
        """On the event loop when the server is local and the fast connection is free; a
        statement that gave up (a row lock held, a slow server) was rolled back."""
        fast = self._fast
        if fast is None or not self._fast_lock.acquire(blocking=False):
            return MISSED
        try:
            if self._fast is None:
                return MISSED
            pipe = self._pipe
            if pipe.sent:
                pipe.settle(fast.pgconn)
            if pipe.again:
                return MISSED  # ``_point`` writes them first, in the worker thread
            return fn(fast)
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled):
            return MISSED
        finally:
            self._fast_lock.release()

    async def _point(self, fn: Callable[[_Conn], T]) -> T:
        result = self._point_now(fn)
        if not isinstance(result, Missed):
            return result
        while self._pipe.again:
            run_id, entry, fence = self._pipe.again.popleft()
            with fencing(fence):
                await self._run(super()._journal_write(run_id, entry))
        return await self._run(fn)

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
            if fast is None or self._fast is None:
                return False
            self._pipe.settle(fast.pgconn)
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
            if self._fast is None:
                return False
            self._pipe.send(fast.pgconn, run_id, entry, current_fence(run_id))
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
            try:
                done = self._point_now(lambda conn: self._pipe.batch(conn.pgconn, ops, raw))
            except psycopg.Error:
                done = MISSED  # rolled back: again statement by statement, in savepoints
            if done is True:
                return
        await self._point(self._group_transaction(ops))
