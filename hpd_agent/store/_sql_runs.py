"""The SQL stores' runs together: a run's start and end in one commit each, and the group
commit of the writes of several runs due at once.

``SQLRuns`` is a part of ``SQLStore`` (like ``SQLRecords`` and ``SQLLeases``): ``open_run``
and ``close_run`` (``RunLeases``), and ``journal_group`` (``JournalGroups``). While the
store object drives more than one run (``_driving``: from the take of a run's lease to its
release), journal writes, a run's start and its end go through the store's
``GroupCommit`` (``_group``): the writes due at once in one transaction; a lone run's are
committed at once, as before, and so is every write of a store whose commits are made at once
on the event loop (``_grouping``: SQLite with ``durability="process"`` on a file).
"""

from __future__ import annotations

import contextlib
import threading
import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar, cast

import anyio.to_thread

from ..exceptions import HpdAgentError
from ._base import JournalEntry, Lease, RunRecord, dump_json
from ._behind import BehindIO, BehindWriter
from ._crowd import Driving
from ._fence import Fence, current_fence
from ._group import GroupCommit, GroupOp
from ._lease import lease_refusal
from ._session import run_exists_refusal
from ._sql_leases import Spelling, release_sql
from ._sql_records import RUN_COLUMNS, Rows, SQLPart, run_to_row

__all__ = ["SQLRuns", "close_statement", "open_statement"]

C = TypeVar("C")
T = TypeVar("T")


def open_statement(mark: str) -> str:
    """PostgreSQL's ``open_run`` in one statement: the lease only for an id no run has, the
    record only with the lease. A racing opener's lease insert waits for this one's commit,
    then finds a live lease of another holder and takes nothing."""
    floats = ", ".join([f"{mark}::double precision"] * 2)
    texts = ", ".join([mark] * 7)
    return (
        "WITH fresh AS (SELECT 1 AS one WHERE NOT EXISTS "
        f"(SELECT 1 FROM hpd_runs WHERE run_id = {mark})), "
        "taken AS (INSERT INTO hpd_leases (run_id, holder, expires_at, fence) "
        f"SELECT {mark}, {mark}, {mark}::double precision, nextval('hpd_fences') FROM fresh "
        "ON CONFLICT (run_id) DO UPDATE SET holder = EXCLUDED.holder, "
        "expires_at = EXCLUDED.expires_at, fence = EXCLUDED.fence "
        "WHERE hpd_leases.holder = EXCLUDED.holder "
        f"OR hpd_leases.expires_at <= {mark}::double precision RETURNING fence), "
        f"made AS (INSERT INTO hpd_runs ({RUN_COLUMNS}) SELECT {texts}, {floats}, {mark} "
        "FROM taken ON CONFLICT (run_id) DO NOTHING RETURNING 1) "
        "SELECT (SELECT count(*) FROM fresh), (SELECT count(*) FROM taken), "
        "(SELECT count(*) FROM made), (SELECT max(fence) FROM taken)"
    )


def close_statement(mark: str) -> str:
    """PostgreSQL's fenced ``close_run`` in one statement: the final record is written only
    with the release of the lease of the session's fencing token."""
    floats = ", ".join([f"{mark}::double precision"] * 2)
    texts = ", ".join([mark] * 7)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in RUN_COLUMNS.split(", ")[1:])
    return (
        f"WITH gone AS (UPDATE hpd_leases SET expires_at = 0 WHERE run_id = {mark} "
        f"AND holder = {mark} AND fence = {mark} RETURNING 1) INSERT INTO hpd_runs ({RUN_COLUMNS}) "
        f"SELECT {texts}, {floats}, {mark} FROM gone "
        f"ON CONFLICT (run_id) DO UPDATE SET {updates}"
    )


_UPDATES: dict[str, str] = {}
"""``_update_run``'s statement per placeholder, built once."""


def _update_run(mark: str) -> str:
    """Overwrite a run's row with its record (arguments: ``RUN_COLUMNS`` but the first,
    then the run id)."""
    sql = _UPDATES.get(mark)
    if sql is None:
        columns = RUN_COLUMNS.split(", ")[1:]
        sets = ", ".join(f"{c} = {mark}" for c in columns)
        sql = _UPDATES[mark] = f"UPDATE hpd_runs SET {sets} WHERE run_id = {mark}"
    return sql


_MAKE_WRITER = threading.Lock()

_JOIN_TIMEOUT = 5.0
"""Seconds ``aclose`` waits for the writer thread to commit what it was handed."""


def _first_row(rows: Rows) -> tuple[Any, ...]:
    return tuple(cast(Any, rows.fetchone()))


def _row_count(rows: Rows) -> int:
    return rows.rowcount


class SQLRuns(SQLPart[C]):
    """``open_run``, ``close_run`` and ``journal_group``, grouped while the store drives
    several runs (module doc)."""

    _group: GroupCommit | None = None
    _grouping = True
    """Whether writes due at once are grouped while the store drives several runs. Where a
    commit is made at once on the event loop (SQLite's fast connection) only with the
    collector tuned (``_crowd``): a batch keeps each run's objects alive across its wait,
    and untuned the cyclic GC's work doubled (W5 interleaved 10,000 runs 22.7 s grouped,
    13.4 s not); tuned, grouping wins there too (docs/performance.md, "Fifth pass")."""
    _driving: Driving
    """The runs this store object drives now (from the take of their lease to its release)."""

    @abstractmethod
    def _spelling(self) -> Spelling:
        """The store's ``Dialect``."""

    @abstractmethod
    def _journal_rows(
        self, run_id: str, entries: Sequence[JournalEntry], *, fenced: bool = True
    ) -> Callable[[C], None]:
        """Writes ``entries`` in the caller's transaction (``SQLRecords``)."""

    @abstractmethod
    def _rows_write(
        self, run_id: str, rows: Sequence[tuple[str, str, str, str]], fence: Fence | None
    ) -> Callable[[C], None]:
        """Writes journal rows made already in the caller's transaction (``SQLRecords``)."""

    @abstractmethod
    def _take_in(self, conn: C, run_id: str, holder: str, ttl: float) -> Lease:
        """In a transaction: take the lease (``SQLLeases``)."""

    @abstractmethod
    async def release_lease(self, run_id: str, holder: str) -> None:
        """Give up ``holder``'s lease (``SQLLeases``)."""

    @abstractmethod
    async def get_lease(self, run_id: str) -> Lease | None:
        """The run's lease (``SQLLeases``)."""

    @abstractmethod
    def _renewal_connect(self) -> C | None:
        """A new connection for a thread of the store's own, or None (``SQLLeases``)."""

    @abstractmethod
    def _locked(self, fn: Callable[[C], T]) -> T:
        """Run ``fn`` with the store's connection, under the store's lock (``SQLStore``)."""

    # -- mode "async": one writer thread for all the runs (``_behind``) ------------------
    _behind: BehindWriter | None = None

    def behind_writer(self) -> BehindWriter:
        """``JournalBehind``: this store object's writer thread, made on first use."""
        writer = self._behind
        if writer is None:
            with _MAKE_WRITER:
                if self._behind is None:
                    name = f"hpd-agent journal writer {self!r}"
                    self._behind = BehindWriter(self._behind_io, name)
                writer = self._behind
        return writer

    def _behind_io(self) -> BehindIO:
        return _SQLBehindIO(self, self._renewal_connect())

    def _behind_commit(
        self, conn: C, batch: Sequence[tuple[str, Fence | None, list[JournalEntry]]]
    ) -> list[BaseException | None]:
        """In one transaction, each run's facts fenced by its own token (``BehindIO``)."""
        ops = [
            GroupOp(None, rows=[(r, e.key, e.kind, dump_json(e.value)) for e in es], fence=f)
            for r, f, es in batch
        ]
        with self._transaction(conn):
            for op in ops:
                self._apply(conn, op)
        return [op.error for op in ops]

    async def _stop_behind(self) -> None:
        """Stop the writer thread once it committed what it was handed (store closed)."""
        thread = None if self._behind is None else self._behind.stop()
        if thread is not None:
            await anyio.to_thread.run_sync(thread.join, _JOIN_TIMEOUT)

    # -- group commit (``_group``): many runs' writes due at once, in one commit ----------
    def _crowded(self) -> bool:
        """Whether the store object drives more than one run now: then journal writes, a
        run's start and its end go through the group commit."""
        return self._grouping and len(self._driving.runs) > 1

    def _group_op(self, op: GroupOp) -> Awaitable[Any]:
        """``op`` committed with the other runs' writes due now; its result."""
        group = self._group
        if group is None:
            group = self._group = GroupCommit(self._commit_group)
        return group.run(op)

    def journal_group(self, run_id: str, entries: Sequence[JournalEntry]) -> Awaitable[Any] | None:
        """``JournalGroups``: while the store drives several runs, ``entries`` committed
        with the other runs' writes due now (None: write them the usual way)."""
        if (
            len(self._driving.runs) < 2 or not self._grouping
        ):  # ``_crowded``, inline (every write asks)
            return None
        rows = [(run_id, e.key, e.kind, dump_json(e.value)) for e in entries]
        # No write function made here: a pipelining store sends the rows itself, and one
        # made per write would stay alive with its cells until the batch commits.
        return self._group_op(GroupOp(None, rows=rows, fence=current_fence(run_id)))

    async def _commit_group(self, ops: list[GroupOp]) -> None:
        """Commit a batch of ``GroupOp`` s in one transaction (``GroupCommit``)."""
        await self._point(self._group_transaction(ops))

    def _group_transaction(self, ops: list[GroupOp]) -> Callable[[C], None]:
        def commit(conn: C) -> None:
            with self._transaction(conn):
                for op in ops:
                    self._apply(conn, op)

        return commit

    def _apply(self, conn: C, op: GroupOp) -> None:
        """In the batch's transaction: one op; what refuses it (not a database error,
        which fails the batch) refuses it alone, in its savepoint if it has one."""
        op.error = None  # a batch retried in the store's thread starts again
        if op.savepoint:
            self._query(conn, "SAVEPOINT hpd_op")
        try:
            apply = op.apply
            if apply is None:  # a journal write: its rows
                rows = op.rows or ()
                apply = self._rows_write(rows[0][0] if rows else "", rows, op.fence)
            op.result = apply(conn)
        except HpdAgentError as e:
            if op.savepoint:
                self._query(conn, "ROLLBACK TO SAVEPOINT hpd_op")
            op.error = e
        if op.savepoint:
            self._query(conn, "RELEASE SAVEPOINT hpd_op")

    async def open_run(self, record: RunRecord, holder: str, ttl: float) -> Lease:
        """Insert a new run's record and take its lease, in one commit (with the other
        runs' writes due now, while the store drives several: ``_group``)."""
        run_id = record.run_id
        self._driving.add(run_id)
        try:
            return await self._open_run(record, holder, ttl)
        except BaseException:
            self._driving.discard(run_id)
            raise

    async def _open_run(self, record: RunRecord, holder: str, ttl: float) -> Lease:
        spelling = self._spelling()
        row = run_to_row(record)
        run_id = record.run_id
        if spelling.on_conflict:
            sql = open_statement(spelling.mark)

            now = time.time()
            args = (run_id, run_id, holder, now + ttl, now, *row)

            def take(conn: C) -> tuple[Any, ...]:
                return tuple(cast(Any, self._query(conn, sql, args)).fetchone())

            if self._crowded():  # one statement: pipelined with the others due now
                op = GroupOp(take, statement=(sql, args), read=_first_row)
                fresh, taken, made, fence = await self._group_op(op)
            else:
                fresh, taken, made, fence = await self._point(take)
            lease = Lease(run_id=run_id, holder=holder, expires_at=now + ttl, fence=fence or 0)
            if fresh and taken and made:
                return lease
            if fresh and taken:  # a run of this id appeared meanwhile: leave it alone
                await self.release_lease(run_id, holder)
            if not fresh or taken:
                raise run_exists_refusal(self, run_id)
            raise lease_refusal(await self.get_lease(run_id) or lease, now=now)
        insert = spelling.insert("hpd_runs", RUN_COLUMNS, "run_id", overwrite=False)

        def open_body(conn: C) -> Lease:
            if self._query(conn, insert, row).rowcount != 1:
                raise run_exists_refusal(self, run_id)  # rolled back: nothing changed
            return self._take_in(conn, run_id, holder, ttl)

        if self._crowded():  # with the other runs' writes due now, in its own savepoint
            return await self._group_op(GroupOp(open_body, savepoint=True))

        def open_in(conn: C) -> Lease:
            with self._transaction(conn):
                return open_body(conn)

        return await self._point(open_in)

    async def close_run(
        self, record: RunRecord, holder: str, journal: Sequence[JournalEntry] = ()
    ) -> None:
        """Write ``journal`` (facts the run held back), a run's final record and give up
        ``holder``'s lease, in one commit."""
        try:
            await self._close_run(record, holder, journal)
        finally:
            self._driving.discard(record.run_id)

    async def _close_run(
        self, record: RunRecord, holder: str, journal: Sequence[JournalEntry]
    ) -> None:
        spelling = self._spelling()
        mark = spelling.mark
        put = spelling.insert("hpd_runs", RUN_COLUMNS, "run_id", overwrite=True)
        release = release_sql(mark)
        row = run_to_row(record)
        key = (record.run_id, holder)
        fence = current_fence(record.run_id)
        if spelling.on_conflict and not journal:  # one statement: a data-modifying CTE
            if fence is None:
                sql, args = f"WITH gone AS ({release}) {put}", (*key, *row)
            else:
                sql, args = close_statement(mark), (*key, fence.token, *row)

            def closed(conn: C) -> int:
                return self._query(conn, sql, args).rowcount

            if self._crowded():  # one statement: pipelined with the others due now
                op = GroupOp(closed, statement=(sql, args), read=_row_count)
                done = await self._group_op(op)
            else:
                done = await self._point(closed)
            if fence is not None and done != 1:
                raise fence.refuse()
            return
        # Fenced: the release is the check (only the lease of the session's token is given
        # up; none given up, nothing is written), first in the transaction.
        write = self._journal_rows(record.run_id, journal, fenced=False)
        if fence is not None:
            release += f" AND fence = {mark}"
            key = (*key, fence.token)
        # SQLite: the final record over the row the run's start made, in place (an
        # ``INSERT OR REPLACE`` deletes the row and inserts it again, rewriting the page of
        # the key's index too); inserted only if that row is gone.
        update = None if spelling.on_conflict else _update_run(mark)
        moved = (*row[1:], row[0])

        def close_body(conn: C) -> None:
            # The check first: a refused close has written nothing (no savepoint needed).
            if self._query(conn, release, key).rowcount != 1 and fence is not None:
                raise fence.refuse()
            write(conn)
            if update is None or self._query(conn, update, moved).rowcount != 1:
                self._query(conn, put, row)

        if self._crowded():
            await self._group_op(GroupOp(close_body))
            return

        def close_in(conn: C) -> None:
            with self._transaction(conn):
                close_body(conn)

        await self._point(close_in)


class _SQLBehindIO(BehindIO, Generic[C]):
    """The writer's connection: its own, or the store's (under the store's lock)."""

    def __init__(self, store: SQLRuns[C], conn: C | None) -> None:
        self.store = store
        self.conn = conn

    def commit(
        self, batch: Sequence[tuple[str, Fence | None, list[JournalEntry]]]
    ) -> list[BaseException | None]:
        store = self.store
        if self.conn is None:
            return store._locked(lambda conn: store._behind_commit(conn, batch))  # pyright: ignore[reportPrivateUsage]
        return store._behind_commit(self.conn, batch)  # pyright: ignore[reportPrivateUsage]

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                cast(Any, self.conn).close()
