"""``SQLiteStore``: the default durable store; one file, zero set-up, several processes.

The file is in WAL mode, so readers never block the writer and a process killed with
SIGKILL loses nothing that was committed. With ``durability="process"`` (the default) a
short statement about one row runs on the event loop, on a connection that never waits for
a lock; everything else (and every statement with ``durability="os"``, where a commit waits
for ``fsync``) runs in worker threads (``anyio.to_thread``, through the store's own limiter,
so it never queues behind blocked sync tools), one at a time per store. See ``_sqlite_io``.

Answers written by another process wake a waiting process through a Unix datagram socket
in ``<store>.wake/``, or, where there is none, are seen by short polling
(``poll_interval``, 25 ms by default); answers written through the same store object wake
the waiter at once. A request feed (``request_changes``: an inbox) hears of requests opened
and ended in every process the same way.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, TypeVar

from ..exceptions import StoreUnavailableError, UserError
from ._base import JournalEntry, RequestRecord, RequestState, dump_json, refusal
from ._feed import FeedChanges
from ._fence import Fence
from ._grants import GRANT_TABLES, SQLGrants
from ._group import GroupOp
from ._lease import DEFAULT_LEASE_TTL, check_lease_ttl
from ._protocol import StoreCapabilities
from ._schemes import StoreOptions, lease_option
from ._side import SideDB
from ._sql import (
    MIGRATIONS,
    MISSED,
    REQUEST_COLUMNS,
    Dialect,
    Missed,
    SQLStore,
    record_from_row,
    schema,
)
from ._sqlite_io import (
    WAL_SIZE_LIMIT,
    Checkpointer,
    Durability,
    check_durability,
    is_busy,
)
from ._sqlite_watch import AnswerWatch, FeedSocket
from ._threads import THREAD_TABLES, SQLThreadTables
from ._waiters import Wakeup

__all__ = ["SQLiteStore", "open_file"]

T = TypeVar("T")

_RESOLVE = (
    "UPDATE hpd_requests SET status = ?, answer = ?, answered_at = ?, context = json_patch("
    f"context, ?) WHERE id = ? AND status = 'pending' RETURNING {REQUEST_COLUMNS}"
)
"""``resolve`` in one statement (one commit instead of a transaction of four statements):
the conditional update merges the context and returns the row. A racing resolver, in any
process, waits for the write lock, then finds the row no longer pending."""

# BEGIN IMMEDIATE (see _transaction) takes the write lock for the whole transaction, so the
# read before an update needs no row lock.
# No ``next_fence``: a take's fencing token is the run's own (``SQLLeases._next_fence``),
# set by the statement that takes, so a take writes no page but the lease's (a counter row
# cost a page more per commit). A store file of an earlier version keeps its unused
# ``hpd_fences`` table; its small counted tokens never equal these clock-sized ones.
_DIALECT = Dialect(mark="?", real="REAL", on_conflict=False)

_FEED_LOOK = 1.0
"""Seconds between a request feed's looks at what changed lately while it hears wake-ups
(as often as a waiter's full check: ``_sqlite_watch``)."""


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
        durability: ``"process"`` (default): a commit survives the crash of any process
            using the store (even SIGKILL), not an OS crash or power cut (WAL,
            ``synchronous=NORMAL``; tens of microseconds per commit). ``"os"``: a commit
            survives an OS crash or power cut too (``synchronous=FULL``: each commit waits
            for ``fsync``). See docs/durability.md.
        gc_tuning: While the store drives many runs at once (64 or more), CPython's cyclic
            GC collects its young objects every 50,000 allocations instead of every 700
            (``gc.set_threshold``), and the previous thresholds are set back when it drives
            16 or fewer; False leaves the collector alone (so does
            ``HPD_AGENT_GC_TUNING=0``). See docs/durability.md.

    Raises:
        StoreUnavailableError: The file (or its directory) does not exist, or it is not a
            SQLite database (the message names the path).
        UserError: A bad ``poll_interval``, ``lease_ttl`` or ``durability``.
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
        durability: Durability = "process",
        gc_tuning: bool = True,
    ) -> None:
        check_lease_ttl(lease_ttl)
        self.durability = check_durability(durability)
        if poll_interval <= 0:
            raise UserError("poll_interval must be positive")
        self.path = os.fspath(path)
        self.poll_interval = poll_interval
        _check_path(self.path, create)
        conn = self._connect(busy_timeout)
        try:
            for statement in schema(_DIALECT.real, clustered=" WITHOUT ROWID"):
                conn.execute(statement)
            _migrate(conn)
            # A separate file per connection for :memory:; a URI may name one too.
            shared = not (self.path == ":memory:" or self.path.startswith("file:"))
            fast = None
            if shared and durability == "process":
                fast = self._connect(0.0, setup_timeout=busy_timeout)
        except sqlite3.Error as e:
            conn.close()
            raise self._open_error(e, busy_timeout) from None
        super().__init__(conn, lease_ttl=lease_ttl, gc_tuning=gc_tuning)
        self._fast = fast
        # A commit on the fast connection costs ~13 µs on the event loop: grouping pays
        # only with the collector tuned, which keeps the runs' objects a batch holds across
        # its wait from being walked again and again (``SQLRuns._grouping``, ``_crowd``).
        self._grouping = fast is None or self._driving.tune
        self._capabilities: StoreCapabilities | None = None
        self._fast_lock = threading.Lock()
        self._checkpointer = Checkpointer(self.path) if shared else None
        self._answers = AnswerWatch(self.path, poll_interval, self._run)
        # Thread tables and grants: the file's side tables, on a connection of their own.
        self._side = SideDB(
            (*THREAD_TABLES, *GRANT_TABLES),
            self.path,
            self.durability,
            None if self._checkpointer is None else self._checkpointer.tick,
        )
        self._threads = SQLThreadTables(self._side)
        self._grants = SQLGrants(self._side)

    def _connect(
        self, busy_timeout: float, *, setup_timeout: float | None = None
    ) -> sqlite3.Connection:
        """A connection to the file whose statements wait ``busy_timeout`` for a lock; its
        set-up (the pragmas) waits ``setup_timeout`` if longer (the fast connection, which
        never waits afterwards, must still wait for a file another process holds locked)."""
        wait = busy_timeout if setup_timeout is None else max(busy_timeout, setup_timeout)
        try:
            conn = sqlite3.connect(
                self.path, timeout=wait, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise StoreUnavailableError(f"cannot open SQLite store {self.path!r}: {e}") from None
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            sync = "NORMAL" if self.durability == "process" else "FULL"
            conn.execute(f"PRAGMA synchronous={sync}")
            # Checkpoints happen in the background (``Checkpointer``), never on a commit.
            conn.execute("PRAGMA wal_autocheckpoint=0")
            # A WAL that grew in a burst is cut back when it starts again.
            conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            if wait != busy_timeout:
                conn.execute(f"PRAGMA busy_timeout={round(busy_timeout * 1000)}")
        except sqlite3.Error as e:
            conn.close()
            raise self._open_error(e, wait) from None
        return conn

    def _open_error(self, error: sqlite3.Error, waited: float) -> StoreUnavailableError:
        """Why the file could not be opened: locked by another process (it waited), or not
        a store at all."""
        if isinstance(error, sqlite3.OperationalError) and is_busy(error):
            return StoreUnavailableError(
                f"cannot open SQLite store {self.path!r}: another process held the file "
                f"locked for longer than the busy timeout ({waited:g} s); try again"
            )
        return StoreUnavailableError(
            f"cannot open SQLite store {self.path!r}: {error} (is it a hpd-agent store?)"
        )

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def capabilities(self) -> StoreCapabilities:
        """Journal writes at once and in batches, and cheap leases: a commit on a local
        file costs little, so the journal holds model responses back and commits them with
        what acts on them; while it drives several runs, their writes due at once are
        committed together where a commit waits for the disk or the store's thread
        (``durability="os"``, a ``:memory:`` or ``file:`` database; see
        ``StoreCapabilities``). Thread tables and remembered grants in the same file
        (``_threads``, ``_grants``); the request feed through the wake-up sockets
        (``request_changes``)."""
        caps = self._capabilities
        if caps is None:  # made once: asked at every run's start
            groups = self if self._grouping else None
            caps = self._capabilities = StoreCapabilities(
                write_now=self,
                batches=self,
                leases=self,
                groups=groups,
                behind=self,
                threads=self._threads,
                feed=self,
                grants=self._grants,
            )
        return caps

    def request_changes(self) -> AbstractAsyncContextManager[AsyncIterator[RequestRecord]]:
        """Every process's requests as they open and end (``RequestFeed``): heard through
        a wake-up socket of the listener's own in ``<store>.wake/`` (a look at what changed
        lately every second besides), else by polling every ``poll_interval``."""
        return self._changes()

    @contextlib.asynccontextmanager
    async def _changes(self) -> AsyncGenerator[AsyncIterator[RequestRecord]]:
        wake = FeedSocket(self.path, self.poll_interval)
        wake.open()
        try:
            yield FeedChanges(wake.heard, self._feed_recent, self._feed_read, _FEED_LOOK)
        finally:
            wake.close()

    # -- the SQLite way of the shared steps ----------------------------------------------
    # The connection's own methods: no Python frame per statement (a durable run makes
    # 19 on SQLite, each through here). Every caller passes its arguments by position.
    _query = staticmethod(sqlite3.Connection.execute)  # pyright: ignore[reportAssignmentType]
    _query_many = staticmethod(sqlite3.Connection.executemany)  # pyright: ignore[reportAssignmentType]

    def _transaction(self, conn: sqlite3.Connection) -> _Transaction:
        return _Transaction(conn)

    def _point_now(self, fn: Callable[..., T], *args: Any) -> T | Missed:
        """``fn(conn, *args)`` on the event loop when the fast connection is free and the
        file is not locked by another writer (else nothing was written and the worker
        thread waits for the lock)."""
        fast = self._fast
        if fast is None or not self._fast_lock.acquire(blocking=False):
            return MISSED
        try:
            if self._fast is None:
                return MISSED
            result = fn(fast, *args)
        except sqlite3.OperationalError as e:
            if not is_busy(e):
                raise
            return MISSED
        finally:
            self._fast_lock.release()
        if self._checkpointer is not None:
            self._checkpointer.tick()
        return result

    async def _commit_group(self, ops: list[GroupOp]) -> None:
        # A batch's commit grows the WAL with every write in it: counted as many, a steady
        # stream of grouped writes is checkpointed as often as the same writes one by one.
        if self._checkpointer is not None:
            self._checkpointer.tick(len(ops) - 1)
        await super()._commit_group(ops)

    def _behind_commit(
        self,
        conn: sqlite3.Connection,
        batch: Sequence[tuple[str, Fence | None, list[JournalEntry]]],
    ) -> list[BaseException | None]:
        # The writer's batches grow the WAL like the same writes one by one.
        if self._checkpointer is not None:
            self._checkpointer.tick(sum(len(entries) for _, _, entries in batch))
        return super()._behind_commit(conn, batch)

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._checkpointer is not None:
            self._checkpointer.tick()
        return await super()._run(fn)

    def _resolve_in(
        self,
        conn: sqlite3.Connection,
        request_id: str,
        status: RequestState,
        answer_json: str | None,
        extra: dict[str, Any],
    ) -> RequestRecord:
        # json_patch merges objects recursively and drops null members; the shallow merge
        # the context needs is the same only for other values: else the transaction.
        if any(v is None or isinstance(v, dict) for v in extra.values()):
            return super()._resolve_in(conn, request_id, status, answer_json, extra)
        args = (status, answer_json, time.time(), dump_json(extra), request_id)
        try:
            rows = conn.execute(_RESOLVE, args).fetchall()
        except sqlite3.OperationalError as e:
            if "JSON" not in str(e):
                raise
            # A stored context that is not JSON: the transaction names the broken row.
            return super()._resolve_in(conn, request_id, status, answer_json, extra)
        if not rows:
            raise refusal(self._get(conn, request_id), request_id)
        return record_from_row(rows[0])

    def _renewal_connect(self) -> sqlite3.Connection | None:
        """The renewer thread's own connection to the file (the store's for ``:memory:``);
        its renewal waits at most a third of ``lease_ttl`` for another writer."""
        return self._connect(self.lease_ttl / 3) if self._checkpointer is not None else None

    def _notify(self, conn: sqlite3.Connection, request_id: str) -> None:
        """Nothing inside the transaction: ``_announce`` sends after the commit."""

    def _announce(self, request_id: str) -> None:
        self._answers.announce(request_id)

    def _opened(self, request_id: str) -> None:
        self._answers.announce_opened(request_id)

    def _close(self, conn: sqlite3.Connection) -> None:
        with self._fast_lock:
            if self._fast is not None:
                self._fast.close()
                self._fast = None
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._answers.close()
        self._side.close()
        super()._close(conn)

    # -- answers from other processes: a wake-up socket, else short polling --------------
    async def _watch(self, waited: list[str], wakeup: Wakeup) -> list[str]:
        return await self._answers.watch(waited, wakeup)


class _Transaction:
    """``SQLiteStore._transaction``: committed on normal exit, rolled back on an exception.
    A class rather than a generator: a durable run enters two (its start and its end).

    IMMEDIATE takes the write lock first: the read and the conditional update in
    ``resolve`` see no other writer in between, whichever process that writer is.
    """

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self._conn.execute("ROLLBACK")
            return
        try:
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise


def open_file(location: str, options: StoreOptions) -> SQLiteStore:
    """The ``sqlite:`` scheme's factory, and plain paths' (``register_scheme``):
    ``sqlite:///abs/path.db``, ``sqlite://rel/path.db``, ``sqlite:path.db`` or a path."""
    path = location
    if location[:7].lower() == "sqlite:":
        path = location[7:]
        path = path[2:] if path.startswith("//") else path
    durability = options.durability or "process"  # SQLiteStore's default
    return SQLiteStore(path, create=options.create, durability=durability, **lease_option(options))
