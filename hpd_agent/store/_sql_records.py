"""The journal and run records of the SQL stores: their rows and their queries.

``SQLRecords`` is a part of ``SQLStore`` (like ``SQLLeases``): it uses the store's
connection, dialect, and its ways of running a statement: ``_point`` (at once on the event
loop when the store can, else in its thread), ``_point_now`` (at once or not at all) and
``_run`` (in its thread).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar, cast

from ..exceptions import StoreCorruptError
from ..text import mend
from ._base import JournalEntry, RunRecord, RunState, dump_json
from ._fence import Fence, current_fence

__all__ = [
    "MISSED",
    "RUN_COLUMNS",
    "Missed",
    "Rows",
    "SQLPart",
    "SQLRecords",
    "journal_from_row",
    "json_column",
    "run_from_row",
    "run_to_row",
]

RUN_COLUMNS = (
    "run_id, agent_name, prompt, history, status, output, error, created_at, updated_at, agent_ref"
)

_RUN_STATES = frozenset({"running", "completed", "failed", "cancelled", "interrupted"})

C = TypeVar("C")
T = TypeVar("T")


class Missed:
    """What ``SQLStore._point_now`` returns when it could not run the statement now."""


MISSED = Missed()


class Rows(Protocol):
    """What the SQL parts' queries use of a cursor (``_sql.Cursor``)."""

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


class SQLPart(ABC, Generic[C]):
    """What the parts of ``SQLStore`` (``SQLRecords``, ``SQLLeases``, ``SQLRuns``) use of
    it: running a statement, a write transaction, a short job on the connection."""

    @abstractmethod
    def _query(self, conn: C, sql: str, args: Sequence[Any] = ()) -> Rows:
        """Run one statement on ``conn``."""

    @abstractmethod
    def _transaction(self, conn: C) -> AbstractContextManager[object]:
        """A write transaction."""

    def _query_many(self, conn: C, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per row of ``rows`` on ``conn`` (SQLite: in one call)."""
        for row in rows:
            self._query(conn, sql, row)

    @abstractmethod
    async def _point(self, fn: Callable[[C], T]) -> T:
        """Run ``fn``, a short statement or transaction about one row, with the connection."""


def json_column(where: str, name: str, text: Any, *, nullable: bool = False) -> Any:
    """A JSON column's value; a clear ``StoreCorruptError`` naming ``where`` if it is not JSON."""
    if text is None and nullable:
        return None
    try:
        return json.loads(cast(str, text))
    except (TypeError, ValueError, RecursionError) as e:
        shown = " ".join(str(e).split())[:200]
        raise StoreCorruptError(f"{where}: column {name} is not JSON ({shown})") from None


def journal_from_row(row: Sequence[Any], run_id: str = "?") -> JournalEntry:
    """A journal entry from (key, kind, value).

    Raises:
        StoreCorruptError: The value is not JSON; the message names the run and the key.
    """
    value = json_column(f"journal entry {row[0]!r} of run {run_id}", "value", row[2])
    return JournalEntry(key=row[0], kind=row[1], value=value)


def run_to_row(r: RunRecord) -> tuple[Any, ...]:
    """The column values of a run, in ``RUN_COLUMNS`` order."""
    return (
        r.run_id,
        mend(r.agent_name),
        mend(r.prompt),
        dump_json(list(r.history)),
        r.status,
        None if r.output is None else mend(r.output),
        None if r.error is None else mend(r.error),
        r.created_at,
        r.updated_at,
        r.agent_ref,
    )


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A run from its columns in ``RUN_COLUMNS`` order.

    Raises:
        StoreCorruptError: The history is not a JSON list or the status is unknown.
    """
    history = json_column(f"run {row[0]}", "history", row[3])
    if not isinstance(history, list) or row[4] not in _RUN_STATES:
        raise StoreCorruptError(f"run {row[0]}: bad history or unknown status {row[4]!r}")
    return RunRecord(
        run_id=row[0],
        agent_name=row[1],
        prompt=row[2],
        history=cast(list[Any], history),
        status=row[4],
        output=row[5],
        error=row[6],
        created_at=row[7],
        updated_at=row[8],
        agent_ref=row[9],
    )


class _Spelling(Protocol):
    """What the record queries use of ``_sql.Dialect``."""

    @property
    def mark(self) -> str:
        """The parameter placeholder."""
        ...

    @property
    def share_row(self) -> str:
        """Appended to the fence check's ``SELECT`` (a shared row lock, or nothing)."""
        ...

    def insert(self, table: str, columns: str, key: str, *, overwrite: bool) -> str:
        """An INSERT that keeps (or overwrites) an existing row with the same key."""
        ...


class SQLRecords(SQLPart[C]):
    """``journal_put`` (and ``journal_put_nowait``), ``journal``, ``put_run``, ``get_run``
    and ``list_runs`` in SQL."""

    _journal_sql: str | None = None
    _journal_fenced_sql: str | None = None

    @abstractmethod
    def _spelling(self) -> _Spelling:
        """The store's ``Dialect``."""

    @abstractmethod
    def _point_now(self, fn: Callable[..., T], *args: Any) -> T | Missed:
        """Run ``fn(conn, *args)`` at once if the store can; ``MISSED`` (nothing written)
        if not."""

    @abstractmethod
    async def _run(self, fn: Callable[[C], T]) -> T:
        """Run ``fn`` in the store's thread."""

    # -- the fence (``_fence``) ----------------------------------------------------------
    def _fence_sql(self) -> str:
        spelling = self._spelling()
        mark = spelling.mark
        return (
            f"SELECT 1 FROM hpd_leases WHERE run_id = {mark} AND fence = {mark}{spelling.share_row}"
        )

    def _check_fence(self, conn: C, fence: Fence | None) -> None:
        """In a write transaction: refuse (``Fence.refuse``) unless ``fence`` holds."""
        if fence is not None:
            found = self._query(conn, self._fence_sql(), (fence.run_id, fence.token))
            if found.fetchone() is None:
                raise fence.refuse()

    def _fenced(self, fence: Fence | None, fn: Callable[[C], T]) -> Callable[[C], T]:
        """``fn`` in a transaction that first checks ``fence`` (``fn`` itself if None)."""
        if fence is None:
            return fn

        def checked(conn: C) -> T:
            with self._transaction(conn):
                self._check_fence(conn, fence)
                return fn(conn)

        return checked

    # -- journal -------------------------------------------------------------------------
    def _journal_fenced(self) -> str:
        """The journal insert that writes its row only if the lease has the token (its
        arguments: the row's, then the run id and the token)."""
        fenced = self._journal_fenced_sql
        if fenced is None:
            sql = self._journal_sql or self._journal_insert()
            marks = ",".join([self._spelling().mark] * 4)
            fenced = self._journal_fenced_sql = sql.replace(
                f"VALUES ({marks})", f"SELECT {marks} WHERE EXISTS ({self._fence_sql()})"
            )
        return fenced

    def _journal_write(self, run_id: str, entry: JournalEntry) -> Callable[[C], object]:
        row = (run_id, entry.key, entry.kind, dump_json(entry.value))
        sql = self._journal_sql or self._journal_insert()
        fence = current_fence(run_id)
        if fence is None:
            return lambda conn: self._query(conn, sql, row)
        # One statement: the row is written only if the lease still has the token.
        fenced = self._journal_fenced()
        args = (*row, run_id, fence.token)

        def write(conn: C) -> object:
            if self._query(conn, fenced, args).rowcount != 1:
                raise fence.refuse()
            return None

        return write

    def _journal_insert(self) -> str:
        sql = self._journal_sql = self._spelling().insert(
            "hpd_journal", "run_id, key, kind, value", "run_id, key", overwrite=True
        )
        return sql

    def _journal_rows(
        self, run_id: str, entries: Sequence[JournalEntry], *, fenced: bool = True
    ) -> Callable[[C], None]:
        """Writes ``entries`` in the caller's transaction, checking the run's fence unless
        the caller checks it in the same transaction itself (``fenced=False``)."""
        rows = [(run_id, e.key, e.kind, dump_json(e.value)) for e in entries]
        return self._rows_write(run_id, rows, current_fence(run_id) if fenced else None)

    def _rows_write(
        self, run_id: str, rows: Sequence[tuple[str, str, str, str]], fence: Fence | None
    ) -> Callable[[C], None]:
        """``_journal_rows`` for rows made already."""
        sql = self._journal_sql or self._journal_insert()
        if fence is None or not rows:

            def write(conn: C) -> None:
                self._check_fence(conn, fence)
                self._query_many(conn, sql, rows)

            return write
        # The first row's own insert checks the fence (no statement of its own); the
        # transaction then holds the lease row (SQLite: the write lock; PostgreSQL: the
        # share lock) until the others are written.
        first = (*rows[0], run_id, fence.token)
        checked = self._journal_fenced()

        def write_checked(conn: C) -> None:
            if self._query(conn, checked, first).rowcount != 1:
                raise fence.refuse()
            if len(rows) > 1:
                self._query_many(conn, sql, rows[1:])

        return write_checked

    def _journal_many(self, run_id: str, entries: Sequence[JournalEntry]) -> Callable[[C], None]:
        write = self._journal_rows(run_id, entries)

        def in_transaction(conn: C) -> None:
            with self._transaction(conn):
                write(conn)

        return in_transaction

    def journal_put_many_nowait(self, run_id: str, entries: Sequence[JournalEntry]) -> bool:
        """Record several facts of a run in one transaction at once, if that needs no wait;
        False when nothing was written (then ``journal_put_many`` writes them)."""
        return not isinstance(self._point_now(self._journal_many(run_id, entries)), Missed)

    async def journal_put_many(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        """Record several facts of a run in one transaction."""
        await self._point(self._journal_many(run_id, entries))

    async def journal_put(self, run_id: str, entry: JournalEntry) -> None:
        """Record one fact of a run."""
        await self._point(self._journal_write(run_id, entry))

    def journal_put_nowait(self, run_id: str, entry: JournalEntry) -> bool:
        """Record one fact of a run at once, if that needs no wait (see ``_point_now``);
        False when nothing was written (then ``journal_put`` writes it). Every journal
        write of a run on SQLite comes here: no closure, one frame (``_journal_in``)."""
        return self._point_now(self._journal_in, run_id, entry) is not MISSED

    def _journal_in(self, conn: C, run_id: str, entry: JournalEntry) -> None:
        """Write one journal row on ``conn`` now, fenced while a session drives the run."""
        row = (run_id, entry.key, entry.kind, dump_json(entry.value))
        fence = current_fence(run_id)
        if fence is None:
            self._query(conn, self._journal_sql or self._journal_insert(), row)
        elif self._query(conn, self._journal_fenced(), (*row, run_id, fence.token)).rowcount != 1:
            raise fence.refuse()

    async def journal(self, run_id: str) -> dict[str, JournalEntry]:
        """Every journaled fact of a run, by key."""
        sql = f"SELECT key, kind, value FROM hpd_journal WHERE run_id = {self._spelling().mark}"

        def select(conn: C) -> dict[str, JournalEntry]:
            rows = self._query(conn, sql, (run_id,)).fetchall()
            return {r[0]: journal_from_row(r, run_id) for r in rows}

        return await self._run(select)

    # -- runs ----------------------------------------------------------------------------
    async def put_run(self, record: RunRecord) -> None:
        """Insert or replace a run record."""
        row = run_to_row(record)
        sql = self._spelling().insert("hpd_runs", RUN_COLUMNS, "run_id", overwrite=True)
        fence = current_fence(record.run_id)
        await self._point(self._fenced(fence, lambda conn: self._query(conn, sql, row)))

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run record, or None."""
        sql = f"SELECT {RUN_COLUMNS} FROM hpd_runs WHERE run_id = {self._spelling().mark}"

        def select(conn: C) -> RunRecord | None:
            row = self._query(conn, sql, (run_id,)).fetchone()
            return None if row is None else run_from_row(row)

        return await self._point(select)

    async def list_runs(self, *, status: RunState | None = None) -> list[RunRecord]:
        """Run records, oldest first."""
        sql = f"SELECT {RUN_COLUMNS} FROM hpd_runs"
        args: tuple[Any, ...] = ()
        if status is not None:
            sql += f" WHERE status = {self._spelling().mark}"
            args = (status,)
        sql += " ORDER BY created_at"
        return await self._run(
            lambda conn: [run_from_row(r) for r in self._query(conn, sql, args).fetchall()]
        )
