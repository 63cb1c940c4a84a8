"""The run leases of the SQL stores (see ``_lease``): one row per run in ``hpd_leases``.

``SQLLeases`` is a part of ``SQLStore``: it uses the store's connection, transaction and
dialect. Taking a lease is atomic: in SQLite the transaction holds the database's write
lock (``BEGIN IMMEDIATE``); in PostgreSQL the insert yields to an existing row and the
conditional update waits for a racing taker's commit, then re-checks its condition.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar

from ._base import Lease
from ._lease import leased

__all__ = ["SQLLeases"]

C = TypeVar("C")
T = TypeVar("T")


class _Spelling(Protocol):
    """What the lease queries use of ``_sql.Dialect``."""

    @property
    def mark(self) -> str:
        """The parameter placeholder."""
        ...

    def insert(self, table: str, columns: str, key: str, *, overwrite: bool) -> str:
        """An INSERT that keeps (or overwrites) an existing row with the same key."""
        ...


class _Rows(Protocol):
    """What the lease queries use of a cursor (``_sql.Cursor``)."""

    @property
    def rowcount(self) -> int:
        """Rows the last statement changed."""
        ...

    def fetchone(self) -> Sequence[Any] | None:
        """The next row, or None."""
        ...


class SQLLeases(ABC, Generic[C]):
    """``take_lease``, ``renew_lease``, ``release_lease`` and ``get_lease`` in SQL."""

    @abstractmethod
    def _spelling(self) -> _Spelling:
        """The store's ``Dialect``."""

    @abstractmethod
    def _query(self, conn: C, sql: str, args: Sequence[Any] = ()) -> _Rows:
        """Run one statement on ``conn``."""

    @abstractmethod
    def _transaction(self, conn: C) -> AbstractContextManager[object]:
        """A write transaction."""

    @abstractmethod
    async def _point(self, fn: Callable[[C], T]) -> T:
        """Run ``fn``, a short statement or transaction about one row, with the connection."""

    async def take_lease(self, run_id: str, holder: str, ttl: float) -> Lease:
        """Take the run's lease if it is free, expired or ``holder``'s; else ``RunLeasedError``."""
        mark = self._spelling().mark
        insert = self._spelling().insert(
            "hpd_leases", "run_id, holder, expires_at", "run_id", overwrite=False
        )
        take_over = (
            f"UPDATE hpd_leases SET holder = {mark}, expires_at = {mark} "
            f"WHERE run_id = {mark} AND (holder = {mark} OR expires_at <= {mark})"
        )

        def take(conn: C) -> Lease:
            with self._transaction(conn):
                # In the transaction (SQLite: the write lock; PostgreSQL: the conditional
                # statements wait for a racing taker's commit): exactly one taker wins.
                now = time.time()
                lease = Lease(run_id=run_id, holder=holder, expires_at=now + ttl)
                if self._query(conn, insert, (run_id, holder, lease.expires_at)).rowcount == 1:
                    return lease
                args = (holder, lease.expires_at, run_id, holder, now)
                if self._query(conn, take_over, args).rowcount == 1:
                    return lease
                live = self._lease(conn, run_id)
            raise leased(live or lease, now=now)

        return await self._point(take)

    async def renew_lease(self, run_id: str, holder: str, ttl: float) -> bool:
        """Extend ``holder``'s lease; False if another holder has it now."""
        mark = self._spelling().mark
        sql = f"UPDATE hpd_leases SET expires_at = {mark} WHERE run_id = {mark} AND holder = {mark}"
        return await self._point(
            lambda conn: self._query(conn, sql, (time.time() + ttl, run_id, holder)).rowcount == 1
        )

    async def release_lease(self, run_id: str, holder: str) -> None:
        """Give up ``holder``'s lease on the run."""
        mark = self._spelling().mark
        sql = f"DELETE FROM hpd_leases WHERE run_id = {mark} AND holder = {mark}"
        await self._point(lambda conn: self._query(conn, sql, (run_id, holder)))

    async def get_lease(self, run_id: str) -> Lease | None:
        """The run's lease (maybe expired), or None."""
        return await self._point(lambda conn: self._lease(conn, run_id))

    def _lease(self, conn: C, run_id: str) -> Lease | None:
        sql = f"SELECT holder, expires_at FROM hpd_leases WHERE run_id = {self._spelling().mark}"
        row = self._query(conn, sql, (run_id,)).fetchone()
        return None if row is None else Lease(run_id=run_id, holder=row[0], expires_at=row[1])
