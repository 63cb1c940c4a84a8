"""``SQLiteStore``: the default durable store; one file, zero set-up, several processes.

Blocking ``sqlite3`` calls run in worker threads (``anyio.to_thread``, through the store's
own limiter, so they never queue behind blocked sync tools), one at a time per store. The file is in WAL mode, so readers never block the writer and a process killed with
SIGKILL loses nothing that was committed. Answers written by another process are seen by
short polling (``poll_interval``, 25 ms by default); answers written through the same store
object wake the waiter at once.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio

from ..exceptions import StoreUnavailableError, UserError
from ._lease import DEFAULT_LEASE_TTL, check_ttl
from ._sql import MIGRATIONS, Dialect, SQLStore, schema

__all__ = ["SQLiteStore"]

_RESOLVED_MARGIN = 5.0

# BEGIN IMMEDIATE (see _transaction) takes the write lock for the whole transaction, so the
# read before an update needs no row lock.
_DIALECT = Dialect(mark="?", real="REAL", on_conflict=False)


def _check_path(path: str, create: bool) -> None:
    """Refuse a path that cannot be (or, without ``create``, is not) a store file."""
    if path == ":memory:" or path.startswith("file:"):
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise StoreUnavailableError(
            f"cannot open SQLite store {path!r}: directory {folder!r} does not exist"
        )
    if os.path.isdir(path):
        raise StoreUnavailableError(f"cannot open SQLite store {path!r}: it is a directory")
    if not create and not os.path.exists(path):
        raise StoreUnavailableError(
            f"no SQLite store at {path!r}: the file does not exist (check the path; a run "
            "started with a store creates it)"
        )


def _migrate(conn: sqlite3.Connection) -> None:
    """Add the columns a store file made by an older version lacks."""
    for table, column, kind in MIGRATIONS:
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


class SQLiteStore(SQLStore[sqlite3.Connection]):
    """A ``Store`` in one SQLite file, shared safely by several processes on one machine.

    Args:
        path: The database file (created with its tables if missing, unless ``create`` is
            False).
        poll_interval: Seconds between checks for answers written by other processes.
        busy_timeout: Seconds a write waits for another process's write lock.
        create: Create the file if it does not exist; False refuses a missing file (a typo
            in a path must not silently open a new, empty store).
        lease_ttl: Seconds a run's lease lasts unless renewed (every third of it, while the
            run runs): a run whose process died can be resumed elsewhere this long after
            its last renewal. See docs/guarantees.md.

    Raises:
        StoreUnavailableError: The file (or its directory) does not exist, or it is not a
            SQLite database (the message names the path).
    """

    dialect = _DIALECT

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        poll_interval: float = 0.025,
        busy_timeout: float = 30.0,
        create: bool = True,
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> None:
        check_ttl(lease_ttl)
        if poll_interval <= 0:
            raise UserError("poll_interval must be positive")
        self.path = os.fspath(path)
        self.poll_interval = poll_interval
        _check_path(self.path, create)
        try:
            conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise StoreUnavailableError(f"cannot open SQLite store {self.path!r}: {e}") from None
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            for statement in schema(_DIALECT.real):
                conn.execute(statement)
            _migrate(conn)
        except sqlite3.Error as e:
            conn.close()
            raise StoreUnavailableError(
                f"cannot open SQLite store {self.path!r}: {e} (is it a hpd-agent store?)"
            ) from None
        super().__init__(conn, lease_ttl=lease_ttl)
        self._rounds = 0
        self._since: float | None = None

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    # -- the SQLite way of the shared steps ----------------------------------------------
    def _query(
        self, conn: sqlite3.Connection, sql: str, args: Sequence[Any] = ()
    ) -> sqlite3.Cursor:
        return conn.execute(sql, args)

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Generator[None, None, None]:
        # IMMEDIATE takes the write lock first: the read and the conditional update in
        # resolve see no other writer in between, whichever process that writer is.
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _notify(self, conn: sqlite3.Connection, request_id: str) -> None:
        """Nothing to send: other processes poll (``_watch``)."""

    # -- answers from other processes: short polling -------------------------------------
    async def _watch(self, waited: list[str], wakeup: anyio.Event) -> list[str]:
        with anyio.move_on_after(self.poll_interval):
            await wakeup.wait()
        if wakeup.is_set():
            return []
        started = time.time()
        self._rounds += 1
        # Now and then look at every waited id, not only the rows resolved lately.
        full = self._rounds % max(1, round(1.0 / self.poll_interval)) == 0
        since = self._since if self._since is not None else started - _RESOLVED_MARGIN
        found = await self._resolved_since(waited, since, full)
        # Rows resolved since a little before this poll: the margin covers commits that
        # land a moment after the answering process read its clock.
        self._since = started - _RESOLVED_MARGIN
        return found

    async def _resolved_since(self, waited: list[str], since: float, full: bool) -> list[str]:
        def select(conn: sqlite3.Connection) -> list[str]:
            if not full:
                rows = conn.execute(
                    "SELECT id FROM hpd_requests WHERE answered_at >= ? AND status != 'pending'",
                    (since,),
                )
                wanted = set(waited)
                return [r[0] for r in rows if r[0] in wanted]
            found: list[str] = []
            for i in range(0, len(waited), 500):
                chunk = waited[i : i + 500]
                marks = _DIALECT.marks(len(chunk))
                rows = conn.execute(
                    f"SELECT id FROM hpd_requests WHERE id IN ({marks}) AND status != 'pending'",
                    chunk,
                )
                found.extend(r[0] for r in rows)
            return found

        return await self._run(select)
