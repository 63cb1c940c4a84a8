"""The ``Store`` protocol, and the capabilities a store declares beyond it.

``Store`` is what every store implements: requests, the run journal, run records, leases
and the sessions the core opens. Beyond it a store may offer faster ways to do the same
things, grouped as protocols (``JournalWriteNow``, ``JournalBatches``, ``JournalSendAhead``,
``JournalGroups``, ``RunLeases``), a place for integrations' own records beside its runs
(``ThreadTables``), a store-wide feed of its requests opening and ending (``RequestFeed``)
and a place for remembered grants (``GrantBook``, from ``hpd_agent.permissions``). It
declares which it offers by answering ``Store.capabilities()`` with a
``StoreCapabilities`` whose fields hold the object implementing each (usually the store
itself) or None. A run asks once, when its session opens, and uses what is declared and
nothing else: a store that declares nothing (``StoreCapabilities()``) runs through the
plain ``Store`` methods alone. See docs/durability.md ("Writing a store").
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..permissions import GrantBook
from ..sessions import SessionStore
from ._base import JournalEntry, Lease, RequestRecord, RequestState, RunRecord, RunState
from ._behind import BehindWriter
from ._renewer import LeaseRenewer

__all__ = [
    "JournalBatches",
    "JournalBehind",
    "JournalGroups",
    "JournalSendAhead",
    "JournalWriteNow",
    "RequestFeed",
    "RunLeases",
    "Store",
    "StoreCapabilities",
    "ThreadData",
    "ThreadTables",
    "expire_stale",
]


class JournalWriteNow(Protocol):
    """Journal writes made at once on the event loop, without an await.

    A store whose write can finish without waiting (a local database file, a server on this
    machine with a free connection) saves the run a thread hop or a task switch per
    journaled fact. Where it cannot, it says so and the journal awaits
    ``Store.journal_put`` instead.
    """

    def journal_put_nowait(self, run_id: str, entry: JournalEntry) -> bool:
        """Record one fact of a run at once, if that needs no wait.

        Args:
            run_id: The root run.
            entry: The fact (a later entry with the same key replaces it).

        Returns:
            True if it was written; False if nothing was written (the journal then writes
            it with ``Store.journal_put``).
        """
        ...


class JournalBatches(Protocol):
    """Several journal entries written in one transaction.

    A journal whose store declares this holds a model response back until something acts
    on it (a tool's function, a journaled step, a request, the run's end) and writes it
    together with that: one commit where there would be two or more. So a store declaring
    it takes held entries in ``add_request`` too (and in ``RunLeases.close_run``, if it
    declares that). A store that also declares ``JournalSendAhead`` sends entries ahead
    instead, and nothing is held back.
    """

    def journal_put_many_nowait(self, run_id: str, entries: Sequence[JournalEntry]) -> bool:
        """Record several facts of a run in one transaction at once, if that needs no wait.

        Args:
            run_id: The root run.
            entries: The facts, in the order they happened.

        Returns:
            True if they were written; False if nothing was written (the journal then
            writes them with ``journal_put_many``).
        """
        ...

    async def journal_put_many(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        """Record several facts of a run in one transaction.

        Args:
            run_id: The root run.
            entries: The facts, in the order they happened.
        """
        ...

    async def add_request(
        self, record: RequestRecord, *, journal: Sequence[JournalEntry] = ()
    ) -> RequestRecord:
        """``Store.add_request``, writing ``journal`` first in the same transaction.

        Args:
            record: The pending request.
            journal: Facts of the request's run the journal held back until now (the
                asking tool acts on them).

        Returns:
            The stored request (an earlier one with the same id, unchanged, if any).
        """
        ...


class JournalSendAhead(Protocol):
    """Journal writes sent to the store without waiting for the reply.

    The journal sends a model response (and what the framework's own tools return) and goes
    on at once; before anything outside the framework acts on them (a tool's function, a
    journaled step) it waits for ``journal_confirm``. A store with a network round trip per
    write (a database server) saves that round trip on most turns.
    """

    def journal_send_nowait(self, run_id: str, entry: JournalEntry) -> bool:
        """Send one fact of a run to the store without waiting for its reply.

        The store confirms it before it runs anything written after it, so an entry sent
        this way is durable before the run acts on anything stored later.

        Args:
            run_id: The root run.
            entry: The fact.

        Returns:
            True if it was sent; False if it cannot go now (nothing was sent: the journal
            writes it with ``Store.journal_put``).
        """
        ...

    async def journal_confirm(self) -> None:
        """Wait until every write sent ahead is durable (one that failed for a reason
        worth retrying, such as a row lock, is written again first).

        Raises:
            Exception: The store's error for a write sent ahead that failed.
        """
        ...


class JournalBehind(Protocol):
    """Mode ``"async"``'s facts committed behind the runs by one writer thread of the store's
    own for all its runs (``_behind``): a run hands each fact over with a list append, and
    has no writer task of its own."""

    def behind_writer(self) -> BehindWriter:
        """The store object's writer (one for all its runs, made on first use)."""
        ...


class JournalGroups(Protocol):
    """Journal writes of many runs committed together (group commit).

    A store driving many runs at once commits the writes due at the same moment in one
    transaction, and each writer goes on when its own write is durable. A lone run's write
    does not wait for others: the store says it is not grouping (None) and the journal
    writes it the usual way.
    """

    def journal_group(
        self, run_id: str, entries: Sequence[JournalEntry]
    ) -> Awaitable[object] | None:
        """Queue ``entries`` for the next group commit, if the store groups writes now.

        Args:
            run_id: The root run.
            entries: The facts, in the order they happened (one transaction).

        Returns:
            None if the store does not group now (nothing was queued); else an awaitable
            done once they are durable. Queued entries are committed even if the wait is
            cancelled.

        Raises:
            RunLeasedError: (from the awaitable) the run's fence no longer holds: nothing
                of it was written (the other runs' writes were).
        """
        ...


class RunLeases(Protocol):
    """A run's lease made cheap: one renewer per store, a run's start and end in one
    transaction each (all three methods or none).

    A store without it works through ``Store``'s lease methods: a renewing task per run,
    and the sequence each method below names.
    """

    def lease_renewer(self) -> LeaseRenewer:
        """The store object's renewer, made on first use (instead of a renewing task per
        run): a ``LeaseRenewer`` over a ``RenewIO`` of the store's own."""
        ...

    async def open_run(self, record: RunRecord, holder: str, ttl: float) -> Lease:
        """Insert a new run's record and take its lease, atomically (instead of
        ``get_run``, ``take_lease``, ``put_run``).

        Args:
            record: The new run's record.
            holder: The session's holder id.
            ttl: Seconds the lease lasts unless renewed.

        Returns:
            The lease as taken.

        Raises:
            UserError: The store holds a run with this id already; nothing changed.
            RunLeasedError: Another holder's lease on this id is live; nothing changed.
        """
        ...

    async def close_run(
        self, record: RunRecord, holder: str, journal: Sequence[JournalEntry] = ()
    ) -> None:
        """Write a run's final record and give up ``holder``'s lease, atomically (instead of
        ``put_run``, ``release_lease``).

        Args:
            record: The run's final record.
            holder: The session's holder id (another holder's lease stays).
            journal: Facts of the run held back until now (``JournalBatches``), written
                first in the same transaction.
        """
        ...


@dataclass(frozen=True, slots=True)
class ThreadData:
    """What one thread of ``ThreadTables`` holds.

    Attributes:
        rows: Its rows, key to text, in the order each key was first written.
        items: Its items, by index (0, 1, ...).
    """

    rows: dict[str, str] = field(default_factory=dict[str, str])
    items: list[str] = field(default_factory=list[str])


class ThreadTables(Protocol):
    """Records an integration keeps beside a store's runs, as durable as they are.

    A *space* names the integration (``"web"`` for the web server's threads; one per
    adapter, so none sees another's). In a space, a *thread* (any string id) holds *rows*,
    small keyed texts that can be replaced, read back in the order each key was first
    written, and *items*, a log of texts at indices 0, 1, 2, ... Texts are ``str``: JSON
    and its shape are the caller's business. The web server keeps a thread's runs as rows
    and the events it sent as items; a store that does not offer this leaves the server's
    threads in memory, lost with the process.
    """

    async def write_thread(
        self,
        space: str,
        thread_id: str,
        *,
        rows: Mapping[str, str] | None = None,
        items: Sequence[str] = (),
        first: int = 0,
    ) -> None:
        """Write rows and items of one thread, all in one transaction.

        Args:
            space: The integration's space.
            thread_id: The thread.
            rows: Rows to write: a new key is added after the thread's other rows, a key it
                holds gets the new text (and keeps its place).
            items: Items to write at indices ``first``, ``first + 1``, ...; an index the
                thread holds already keeps its text (a write done twice changes nothing).
            first: The index of ``items[0]``.
        """
        ...

    async def read_thread(self, space: str, thread_id: str) -> ThreadData | None:
        """The thread's rows and items; None if it holds neither."""
        ...

    async def thread_of(self, space: str, key: str) -> str | None:
        """The thread of ``space`` holding a row ``key``, or None (meant for keys no two
        threads share, such as run ids; if several do, any one of them)."""
        ...


class RequestFeed(Protocol):
    """Every run's requests as they open and end, store-wide, whichever process writes
    them: what an inbox over the whole store listens to.

    A store declaring it hears of a request written by any process through the store's own
    wake-up (not by polling faster than its waiters do): ``SQLiteStore`` through its wake-up
    sockets, ``PostgresStore`` through LISTEN/NOTIFY, ``MemoryStore`` in its process. Runs
    never ask for it.
    """

    def request_changes(self) -> AbstractAsyncContextManager[AsyncIterator[RequestRecord]]:
        """Listen to the store's requests.

        Once entered, the store listens: a request opened or ended (answered, declined,
        expired, cancelled) from then on is seen, within about a second of its write, as
        its record at that moment (read after the wake-up: a request opened and ended
        between two looks may be seen only ended). Each state of a request is given once
        per listener, as a rule; a consumer tells states apart by ``status`` and ignores
        one it already knows. Iterating is safe to cancel between records (a cancelled
        wait loses nothing). Leaving stops listening.

        Returns:
            An async context manager giving an async iterator of request records.
        """
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreCapabilities:
    """What a store offers beyond ``Store``: for each capability, the object implementing
    it (usually the store itself), or None.

    A store answers ``Store.capabilities()`` with one, e.g.
    ``StoreCapabilities(write_now=self, leases=self)``: each field is typed by its
    protocol, so a type checker proves the store implements what it declares. A run asks
    once, when its session opens, never per write.

    Attributes:
        write_now: Journal writes at once, without an await (``JournalWriteNow``).
        batches: Several journal entries in one transaction (``JournalBatches``): model
            responses are held back and written with what acts on them.
        send_ahead: Journal writes sent without waiting for their reply, confirmed before
            anything acts on them (``JournalSendAhead``); preferred to ``batches`` where a
            store declares both.
        leases: A run's lease made cheap (``RunLeases``).
        groups: Many runs' journal writes due at once in one commit (``JournalGroups``).
        behind: Mode ``"async"``'s facts committed by one writer of the store's for all
            its runs (``JournalBehind``); without it each ``"async"`` run writes behind
            itself in a task of its own.
        threads: Integrations' own records kept beside the runs (``ThreadTables``): the web
            server's threads, for one. Not a run's concern: runs never ask for it.
        feed: Every run's requests as they open and end (``RequestFeed``): what
            ``hpd-agent inbox`` listens to. Not a run's concern either.
        grants: Remembered grants (``hpd_agent.permissions.GrantBook``): an
            ``Approve(scope="always")`` answer kept, and found by every later run on the
            store (``hpd-agent grants`` lists and revokes them). Without it an "always"
            approves the one call it answers.
    """

    write_now: JournalWriteNow | None = None
    batches: JournalBatches | None = None
    send_ahead: JournalSendAhead | None = None
    leases: RunLeases | None = None
    groups: JournalGroups | None = None
    behind: JournalBehind | None = None
    threads: ThreadTables | None = None
    feed: RequestFeed | None = None
    grants: GrantBook | None = None


@runtime_checkable
class Store(SessionStore, Protocol):
    """Durable requests, run journals and run records. All methods are async and anyio-safe.

    Implementations: ``MemoryStore`` (one process, tests), ``SQLiteStore`` (one machine, the
    default), ``PostgresStore`` (many workers). A store also opens the runs it keeps
    (``SessionStore``'s ``open_session`` / ``resume_session``; ``Sessions`` provides both).
    """

    # -- requests ------------------------------------------------------------------------
    async def add_request(self, record: RequestRecord) -> RequestRecord:
        """Insert a pending request; if its id exists already, return the stored one unchanged.

        The second case is a replay reaching a request it raised before the crash.
        """
        ...

    async def get_request(self, request_id: str) -> RequestRecord | None:
        """The request with this id, or None."""
        ...

    async def list_requests(
        self, *, run_id: str | None = None, status: RequestState | None = "pending"
    ) -> list[RequestRecord]:
        """Requests, oldest first, narrowed to a run and/or a status (None: any)."""
        ...

    async def resolve(
        self,
        request_id: str,
        status: RequestState,
        answer: Any = None,
        *,
        context: Mapping[str, Any] | None = None,
    ) -> RequestRecord:
        """Atomically move a *pending* request to ``status`` (with ``answer`` if answered).

        The answer must already be validated (see ``hpd_agent.store.respond``).

        Returns:
            The updated record.

        Raises:
            UnknownRequestError, RequestAlreadyAnsweredError, RequestExpiredError,
            RequestCancelledError: It was not pending; nothing changed.
        """
        ...

    async def wait_resolved(self, request_id: str) -> RequestRecord:
        """Wait until the request is no longer pending (answered here or by another process)."""
        ...

    async def recover(
        self, max_age: float, *, run_id: str | None = None, now: float | None = None
    ) -> list[str]:
        """Expire pending requests older than ``max_age`` seconds (or past their expiry).

        Args:
            max_age: Age in seconds past which a pending request is given up.
            run_id: Only this run's requests.
            now: The clock to compare against; defaults to ``time.time()``.

        Returns:
            The ids that expired.
        """
        ...

    # -- journal -------------------------------------------------------------------------
    async def journal_put(self, run_id: str, entry: JournalEntry) -> None:
        """Record one fact of a run (a later put with the same key replaces it)."""
        ...

    async def journal(self, run_id: str) -> dict[str, JournalEntry]:
        """Every journaled fact of a run, by key."""
        ...

    # -- runs ----------------------------------------------------------------------------
    async def put_run(self, record: RunRecord) -> None:
        """Insert or replace a run record."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run record, or None."""
        ...

    async def list_runs(self, *, status: RunState | None = None) -> list[RunRecord]:
        """Run records, oldest first, optionally of one status."""
        ...

    # -- leases: one process drives a run at a time ------------------------------------
    lease_ttl: float
    """Seconds a lease lasts unless renewed (its holder renews it every third of that)."""

    async def take_lease(self, run_id: str, holder: str, ttl: float) -> Lease:
        """Atomically take the run's lease for ``ttl`` seconds: if nobody holds it, its
        holder let it expire, or ``holder`` holds it already.

        Raises:
            RunLeasedError: Another holder's lease is live; nothing changed.
        """
        ...

    async def renew_lease(self, run_id: str, holder: str, ttl: float) -> bool:
        """Extend ``holder``'s lease to ``ttl`` seconds from now; False if it holds it no
        longer (another holder took it over)."""
        ...

    async def release_lease(self, run_id: str, holder: str) -> None:
        """Give up ``holder``'s lease (nothing happens if another holder has it)."""
        ...

    async def get_lease(self, run_id: str) -> Lease | None:
        """The run's lease as last taken or renewed (maybe expired), or None."""
        ...

    async def aclose(self) -> None:
        """Release connections. The store can't be used afterwards."""
        ...

    # -- what it offers beyond these methods -----------------------------------------------
    def capabilities(self) -> StoreCapabilities:
        """What this store offers beyond the methods above (see ``StoreCapabilities``).

        Asked once per run, when its session opens. A store that offers nothing more
        answers ``StoreCapabilities()``, and its runs work through the methods above.
        """
        ...


async def expire_stale(
    store: Store, max_age: float, *, run_id: str | None = None, now: float | None = None
) -> list[str]:
    """``Store.recover`` in terms of the other methods; every shipped store's ``recover``
    is this (a store of your own can answer ``recover`` with it too).

    Args:
        store: The store.
        max_age: Age in seconds past which a pending request is given up.
        run_id: Only this run's requests.
        now: The clock to compare against; defaults to ``time.time()``.

    Returns:
        The ids that expired (one answered or ended meanwhile is left as it is).
    """
    clock = time.time() if now is None else now
    expired: list[str] = []
    for record in await store.list_requests(run_id=run_id):
        late = record.expires_at is not None and record.expires_at <= clock
        if clock - record.created_at > max_age or late:
            try:
                await store.resolve(record.request_id, "expired")
            except Exception:
                continue  # answered or cancelled meanwhile: leave it as it is
            expired.append(record.request_id)
    return expired
