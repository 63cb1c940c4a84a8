"""The run leases of the SQL stores (see ``_lease``): one row per run in ``hpd_leases``.

``SQLLeases`` is a part of ``SQLStore``: it uses the store's connection, transaction and
dialect. Taking a lease is atomic: in SQLite the transaction holds the database's write
lock (``BEGIN IMMEDIATE``); in PostgreSQL the insert yields to an existing row and the
conditional update waits for a racing taker's commit, then re-checks its condition.

A new run's record and lease are written in one commit (``open_run``), and so are its final
record and the lease's release (``close_run``): in PostgreSQL each is one statement (one
round trip). The store's renewer thread (``_renewer``) renews all the leases the store
object holds on a connection of its own (``_renewal_connect``), in one transaction (SQLite)
or one statement (PostgreSQL).
"""

from __future__ import annotations

import contextlib
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Generic, Protocol, TypeVar, cast

from ._base import Lease
from ._crowd import Driving
from ._holder import holder_gone
from ._lease import lease_refusal
from ._renewer import LeaseRenewer, RenewIO
from ._sql_records import SQLPart

__all__ = ["SQLLeases", "Spelling"]

C = TypeVar("C")
T = TypeVar("T")


class Spelling(Protocol):
    """What the lease and run queries (``SQLLeases``, ``SQLRuns``) use of ``_sql.Dialect``."""

    @property
    def mark(self) -> str:
        """The parameter placeholder."""
        ...

    @property
    def on_conflict(self) -> bool:
        """True for PostgreSQL's ``INSERT ... ON CONFLICT``."""
        ...

    def marks(self, n: int) -> str:
        """``n`` comma-separated placeholders."""
        ...

    @property
    def next_fence(self) -> str:
        """The query giving the next fencing token."""
        ...

    def insert(self, table: str, columns: str, key: str, *, overwrite: bool) -> str:
        """An INSERT that keeps (or overwrites) an existing row with the same key."""
        ...


_MAKE_RENEWER = threading.Lock()


def release_sql(mark: str) -> str:
    """Give a holder's lease up: expired, its row kept (its fence stays the last)."""
    return f"UPDATE hpd_leases SET expires_at = 0 WHERE run_id = {mark} AND holder = {mark}"


class SQLLeases(SQLPart[C]):
    """``take_lease``, ``renew_lease``, ``release_lease`` and ``get_lease`` in SQL, and
    ``open_run``, ``close_run`` and the renewer (``RunLeases``)."""

    _renewer: LeaseRenewer | None = None
    lease_ttl: float
    _driving: Driving
    """The runs this store object drives now (from the take of their lease to its release):
    more than one, and journal writes are committed in groups (``_group``)."""

    @abstractmethod
    def _spelling(self) -> Spelling:
        """The store's ``Dialect``."""

    @abstractmethod
    def _locked(self, fn: Callable[[C], T]) -> T:
        """Run ``fn`` with the store's connection, in this thread, under the store's lock."""

    def _renewal_connect(self) -> C | None:
        """A new connection for the renewer thread, or None to share the store's."""
        return None

    async def take_lease(self, run_id: str, holder: str, ttl: float) -> Lease:
        """Take the run's lease if it is free, expired or ``holder``'s; else ``RunLeasedError``."""

        def take(conn: C) -> Lease:
            with self._transaction(conn):
                return self._take_in(conn, run_id, holder, ttl)

        lease = await self._point(take)
        self._driving.add(run_id)
        return lease

    def _take_in(self, conn: C, run_id: str, holder: str, ttl: float) -> Lease:
        """In a transaction: take the lease, or raise ``RunLeasedError`` (the transaction
        then rolls back, having changed nothing). Each take gets a new fencing token
        (``_next_fence``). A live lease is taken over only from a holder known to be gone
        (``_holder``)."""
        # In the transaction (SQLite: the write lock; PostgreSQL: the conditional
        # statements wait for a racing taker's commit): exactly one taker wins.
        spelling = self._spelling()
        mark = spelling.mark
        insert = spelling.insert(
            "hpd_leases", "run_id, holder, expires_at, fence", "run_id", overwrite=False
        )
        now = time.time()
        fence, bump = self._next_fence(conn, now)
        lease = Lease(run_id=run_id, holder=holder, expires_at=now + ttl, fence=fence)
        if self._query(conn, insert, (run_id, holder, lease.expires_at, fence)).rowcount == 1:
            return lease
        update = f"UPDATE hpd_leases SET holder = {mark}, expires_at = {mark}, fence = {bump} "
        taken = (holder, lease.expires_at, fence)
        take_over = (
            f"{update}WHERE run_id = {mark} AND (holder = {mark} OR expires_at <= {mark}) "
            "RETURNING fence"
        )
        found = self._query(conn, take_over, (*taken, run_id, holder, now)).fetchall()
        current = None
        if not found:
            current = self._lease(conn, run_id)
            if current is not None and holder_gone(current.holder):
                gone = f"{update}WHERE run_id = {mark} AND holder = {mark} RETURNING fence"
                found = self._query(conn, gone, (*taken, run_id, current.holder)).fetchall()
        if not found:
            raise lease_refusal(current or lease, now=now)
        return replace(lease, fence=int(found[0][0]))

    def _next_fence(self, conn: C, now: float) -> tuple[int, str]:
        """The fencing token of a take: (its value for a new lease row, how an update of
        the run's row sets it, with that value as its argument).

        With a counter for the whole store (``Dialect.next_fence``: PostgreSQL's sequence),
        the counter's next value. Else the run's own: its row's last token plus one, and
        never below the clock in microseconds (a row made anew starts above the tokens of
        any earlier row of that run). Either way a run's token only grows from take to
        take, and the SQLite take writes no row beyond the lease's own.
        """
        spelling = self._spelling()
        if spelling.next_fence:
            found = self._query(conn, spelling.next_fence).fetchone()
            return (int(found[0]) if found is not None else 0), spelling.mark
        return int(now * 1_000_000), f"max(COALESCE(fence, 0) + 1, {spelling.mark})"

    async def renew_lease(self, run_id: str, holder: str, ttl: float) -> bool:
        """Extend ``holder``'s lease; False if another holder has it now."""
        mark = self._spelling().mark
        sql = (
            f"UPDATE hpd_leases SET expires_at = {mark} WHERE run_id = {mark} "
            f"AND holder = {mark} AND expires_at > 0"
        )
        return await self._point(
            lambda conn: self._query(conn, sql, (time.time() + ttl, run_id, holder)).rowcount == 1
        )

    async def release_lease(self, run_id: str, holder: str) -> None:
        """Give up ``holder``'s lease on the run: its row stays, expired (its fencing token
        stays the run's last: see ``_fence``)."""
        mark = self._spelling().mark
        sql = release_sql(mark)
        try:
            await self._point(lambda conn: self._query(conn, sql, (run_id, holder)))
        finally:
            self._driving.discard(run_id)

    async def get_lease(self, run_id: str) -> Lease | None:
        """The run's lease (maybe expired), or None."""
        return await self._point(lambda conn: self._lease(conn, run_id))

    def _lease(self, conn: C, run_id: str) -> Lease | None:
        mark = self._spelling().mark
        sql = f"SELECT holder, expires_at, fence FROM hpd_leases WHERE run_id = {mark}"
        row = self._query(conn, sql, (run_id,)).fetchone()
        if row is None or not row[1]:
            return None  # none, or given up (``release_lease``)
        return Lease(run_id=run_id, holder=row[0], expires_at=row[1], fence=row[2] or 0)

    # -- a run's lease made cheap (``RunLeases``) ----------------------------------------
    def lease_renewer(self) -> LeaseRenewer:
        """This store object's renewer thread (``_renewer``), made on first use."""
        renewer = self._renewer
        if renewer is None:
            with _MAKE_RENEWER:
                if self._renewer is None:
                    self._renewer = LeaseRenewer(
                        self._renew_io, self.lease_ttl, f"hpd-agent lease renewer {self!r}"
                    )
                renewer = self._renewer
        return renewer

    async def _stop_renewer(self) -> None:
        """Stop the renewer thread (the store is being closed)."""
        if self._renewer is not None:
            await self._renewer.aclose()

    def _renew_io(self) -> RenewIO:
        return _SQLRenewIO(self, self._renewal_connect())

    def _renew_in(
        self, conn: C, leases: Sequence[tuple[str, str]], ttl: float
    ) -> set[tuple[str, str]]:
        """Extend each (run_id, holder) lease; the ones still held."""
        spelling = self._spelling()
        mark = spelling.mark
        expires_at = time.time() + ttl
        if spelling.on_conflict:  # PostgreSQL: one statement for all
            sql = (
                f"UPDATE hpd_leases AS l SET expires_at = {mark} FROM unnest({mark}::text[], "
                f"{mark}::text[]) AS k(run_id, holder) WHERE l.run_id = k.run_id AND "
                "l.holder = k.holder AND l.expires_at > 0 RETURNING l.run_id, l.holder"
            )
            args = (expires_at, [r for r, _ in leases], [h for _, h in leases])
            rows = cast(Any, self._query(conn, sql, args)).fetchall()
            return {(r[0], r[1]) for r in rows}
        sql = (
            f"UPDATE hpd_leases SET expires_at = {mark} WHERE run_id = {mark} "
            f"AND holder = {mark} AND expires_at > 0"
        )
        with self._transaction(conn):  # one commit for all
            return {
                (run_id, holder)
                for run_id, holder in leases
                if self._query(conn, sql, (expires_at, run_id, holder)).rowcount == 1
            }


class _SQLRenewIO(RenewIO, Generic[C]):
    """The renewer's connection: its own, or the store's (under the store's lock)."""

    def __init__(self, store: SQLLeases[C], conn: C | None) -> None:
        self.store = store
        self.conn = conn

    def _with(self, fn: Callable[[C], T]) -> T:
        if self.conn is None:
            return self.store._locked(fn)  # pyright: ignore[reportPrivateUsage]
        return fn(self.conn)

    def renew(self, leases: Sequence[tuple[str, str]], ttl: float) -> set[tuple[str, str]]:
        return self._with(
            lambda conn: self.store._renew_in(conn, leases, ttl)  # pyright: ignore[reportPrivateUsage]
        )

    def current(self, run_id: str) -> Lease | None:
        return self._with(lambda conn: self.store._lease(conn, run_id))  # pyright: ignore[reportPrivateUsage]

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                cast(Any, self.conn).close()
