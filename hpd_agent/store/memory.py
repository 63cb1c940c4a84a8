"""``MemoryStore``: the ``Store`` protocol in a dict, for one process (tests, interrupt mode)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any

import anyio

# The kit's public names only, as a store of your own would use (a test checks).
from .kit import (
    DEFAULT_LEASE_TTL,
    JournalEntry,
    Lease,
    LeaseRenewer,
    MemoryGrants,
    MemoryThreadTables,
    RenewIO,
    RequestRecord,
    RequestState,
    RunRecord,
    RunState,
    Sessions,
    StoreCapabilities,
    StoreOptions,
    check_lease_ttl,
    current_fence,
    expire_stale,
    holder_gone,
    jsonable,
    lease_refusal,
    refusal,
    run_exists_refusal,
)

__all__ = ["MemoryStore", "open_memory"]


class MemoryStore(Sessions):
    """A store that lives in this process's memory: nothing survives the process.

    Good for tests and for ``on_unhandled="interrupt"`` within one long-lived process. An
    answer given through ``resolve`` wakes a waiting run at once. Use it from one event loop.

    Args:
        lease_ttl: Seconds a run's lease lasts unless renewed (see ``SQLiteStore``); within
            one process it keeps two ``resume`` calls of one run from both driving it.
    """

    def __init__(self, *, lease_ttl: float = DEFAULT_LEASE_TTL) -> None:
        self.lease_ttl = check_lease_ttl(lease_ttl)
        self._leases: dict[str, Lease] = {}
        self._requests: dict[str, RequestRecord] = {}
        self._journals: dict[str, dict[str, JournalEntry]] = {}
        self._runs: dict[str, RunRecord] = {}
        self._wakeups: dict[str, anyio.Event] = {}
        self._lease_lock = threading.Lock()
        self._renewer: LeaseRenewer | None = None
        self._fences = 0
        self._threads = MemoryThreadTables()
        self._listeners: set[_Listener] = set()
        self._grants = MemoryGrants()

    def _check(self, run_id: str) -> None:
        """Refuse a write of ``run_id`` whose fence no longer holds (see ``_fence``)."""
        fence = current_fence(run_id)
        if fence is not None:
            current = self._leases.get(run_id)
            if current is None or current.fence != fence.token:
                raise fence.refuse()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._requests)} requests, {len(self._runs)} runs)"

    async def add_request(self, record: RequestRecord) -> RequestRecord:
        """Insert a pending request, or return the stored one with that id."""
        existing = self._requests.get(record.request_id)
        if existing is not None:
            return existing
        self._check(record.run_id)
        self._requests[record.request_id] = record
        self._tell(record)
        return record

    async def get_request(self, request_id: str) -> RequestRecord | None:
        """The request with this id, or None."""
        return self._requests.get(request_id)

    async def list_requests(
        self, *, run_id: str | None = None, status: RequestState | None = "pending"
    ) -> list[RequestRecord]:
        """Requests, oldest first, narrowed to a run and/or a status."""
        found = [
            r
            for r in self._requests.values()
            if (run_id is None or r.run_id == run_id) and (status is None or r.status == status)
        ]
        return sorted(found, key=lambda r: r.created_at)

    async def resolve(
        self,
        request_id: str,
        status: RequestState,
        answer: Any = None,
        *,
        context: Mapping[str, Any] | None = None,
    ) -> RequestRecord:
        """Move a pending request to ``status``; refuses (distinct errors) if not pending."""
        # No await between the check and the write: atomic within the event loop.
        record = self._requests.get(request_id)
        if record is None or record.status != "pending":
            raise refusal(record, request_id)
        # Kept as JSON would keep it, so every store hands back the same shapes.
        stored = jsonable(answer) if status == "answered" else None
        updated = record.resolved(status, stored)
        if context:
            updated = _with_context(updated, context)
        self._requests[request_id] = updated
        wakeup = self._wakeups.pop(request_id, None)
        if wakeup is not None:
            wakeup.set()
        self._tell(updated)
        return updated

    async def wait_resolved(self, request_id: str) -> RequestRecord:
        """Wait until the request leaves ``pending``."""
        while True:
            record = self._requests.get(request_id)
            if record is None or record.status != "pending":
                if record is None:
                    raise refusal(None, request_id)
                return record
            wakeup = self._wakeups.setdefault(request_id, anyio.Event())
            await wakeup.wait()

    async def recover(
        self, max_age: float, *, run_id: str | None = None, now: float | None = None
    ) -> list[str]:
        """Expire pending requests older than ``max_age`` seconds or past their expiry."""
        return await expire_stale(self, max_age, run_id=run_id, now=now)

    async def journal_put(self, run_id: str, entry: JournalEntry) -> None:
        """Record one fact of a run."""
        self.journal_put_nowait(run_id, entry)

    async def journal(self, run_id: str) -> dict[str, JournalEntry]:
        """Every journaled fact of a run, by key."""
        return dict(self._journals.get(run_id, {}))

    async def put_run(self, record: RunRecord) -> None:
        """Insert or replace a run record."""
        self._check(record.run_id)
        self._runs[record.run_id] = record

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run record, or None."""
        return self._runs.get(run_id)

    async def list_runs(self, *, status: RunState | None = None) -> list[RunRecord]:
        """Run records, oldest first."""
        found = [r for r in self._runs.values() if status is None or r.status == status]
        return sorted(found, key=lambda r: r.created_at)

    async def take_lease(self, run_id: str, holder: str, ttl: float) -> Lease:
        """Take the run's lease if it is free, expired or ``holder``'s; else ``RunLeasedError``."""
        with self._lease_lock:  # the renewer thread writes leases too
            return self._take(run_id, holder, ttl)

    def _take(self, run_id: str, holder: str, ttl: float) -> Lease:
        now = time.time()
        current = self._leases.get(run_id)
        if (
            current is not None
            and current.holder != holder
            and current.expires_at > now
            and not holder_gone(current.holder)
        ):
            raise lease_refusal(current, now=now)
        self._fences += 1
        lease = Lease(run_id=run_id, holder=holder, expires_at=now + ttl, fence=self._fences)
        self._leases[run_id] = lease
        return lease

    async def renew_lease(self, run_id: str, holder: str, ttl: float) -> bool:
        """Extend ``holder``'s lease; False if another holder has it now."""
        return bool(self._renew([(run_id, holder)], ttl))

    def _renew(self, leases: Sequence[tuple[str, str]], ttl: float) -> set[tuple[str, str]]:
        kept: set[tuple[str, str]] = set()
        with self._lease_lock:
            expires_at = time.time() + ttl
            for run_id, holder in leases:
                current = self._leases.get(run_id)
                if current is not None and current.holder == holder and current.expires_at:
                    self._leases[run_id] = Lease(
                        run_id=run_id, holder=holder, expires_at=expires_at, fence=current.fence
                    )
                    kept.add((run_id, holder))
        return kept

    async def release_lease(self, run_id: str, holder: str) -> None:
        """Give up ``holder``'s lease on the run."""
        with self._lease_lock:
            self._give_up(run_id, holder)

    def _give_up(self, run_id: str, holder: str) -> None:
        """Expire ``holder``'s lease, keeping its fencing token the run's last."""
        current = self._leases.get(run_id)
        if current is not None and current.holder == holder:
            self._leases[run_id] = replace(current, expires_at=0.0)

    async def get_lease(self, run_id: str) -> Lease | None:
        """The run's lease (maybe expired), or None (none, or given up)."""
        lease = self._leases.get(run_id)
        return lease if lease is not None and lease.expires_at else None

    # -- what it offers beyond ``Store`` ---------------------------------------------------
    def capabilities(self) -> StoreCapabilities:
        """Journal writes at once and cheap leases (in memory nothing waits, so there is
        nothing to batch or send ahead); thread tables and remembered grants as long as the
        store object lives; the request feed of this process."""
        return StoreCapabilities(
            write_now=self, leases=self, threads=self._threads, feed=self, grants=self._grants
        )

    def request_changes(self) -> AbstractAsyncContextManager[AsyncIterator[RequestRecord]]:
        """Every request as it opens and ends (``RequestFeed``), told at once."""
        return self._changes()

    @contextlib.asynccontextmanager
    async def _changes(self) -> AsyncGenerator[AsyncIterator[RequestRecord]]:
        listener = _Listener()
        self._listeners.add(listener)
        try:
            yield listener
        finally:
            self._listeners.discard(listener)

    def _tell(self, record: RequestRecord) -> None:
        for listener in self._listeners:
            listener.tell(record)

    def journal_put_nowait(self, run_id: str, entry: JournalEntry) -> bool:
        """Record one fact of a run at once (always possible in memory)."""
        self._check(run_id)
        self._journals.setdefault(run_id, {})[entry.key] = entry
        return True

    # -- a run's lease made cheap (``RunLeases``) ----------------------------------------
    def lease_renewer(self) -> LeaseRenewer:
        """This store's renewer thread (``_renewer``), made on first use."""
        renewer = self._renewer
        if renewer is None:
            with self._lease_lock:
                if self._renewer is None:
                    self._renewer = LeaseRenewer(
                        lambda: _MemoryRenewIO(self), self.lease_ttl, "hpd-agent lease renewer"
                    )
                renewer = self._renewer
        return renewer

    async def open_run(self, record: RunRecord, holder: str, ttl: float) -> Lease:
        """Insert a new run's record and take its lease, atomically."""
        with self._lease_lock:
            if record.run_id in self._runs:
                raise run_exists_refusal(self, record.run_id)
            lease = self._take(record.run_id, holder, ttl)
            self._runs[record.run_id] = record
            return lease

    async def close_run(
        self, record: RunRecord, holder: str, journal: Sequence[JournalEntry] = ()
    ) -> None:
        """Write ``journal``, a run's final record and give up ``holder``'s lease, atomically."""
        with self._lease_lock:
            self._check(record.run_id)
            for entry in journal:
                self.journal_put_nowait(record.run_id, entry)
            self._runs[record.run_id] = record
            self._give_up(record.run_id, holder)

    async def aclose(self) -> None:
        """Stop the lease renewer, if it runs, and close the thread tables."""
        if self._renewer is not None:
            await self._renewer.aclose()
        self._threads.close()


class _Listener:
    """One listener of ``MemoryStore.request_changes``: the records told, until read."""

    def __init__(self) -> None:
        self._told: deque[RequestRecord] = deque()
        self._event = anyio.Event()

    def tell(self, record: RequestRecord) -> None:
        self._told.append(record)
        self._event.set()

    def __aiter__(self) -> _Listener:
        return self

    async def __anext__(self) -> RequestRecord:
        while not self._told:
            if self._event.is_set():
                self._event = anyio.Event()
            await self._event.wait()
        return self._told.popleft()


class _MemoryRenewIO(RenewIO):
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def renew(self, leases: Sequence[tuple[str, str]], ttl: float) -> set[tuple[str, str]]:
        return self.store._renew(leases, ttl)  # pyright: ignore[reportPrivateUsage]

    def current(self, run_id: str) -> Lease | None:
        return self.store._leases.get(run_id)  # pyright: ignore[reportPrivateUsage]


def open_memory(location: str, options: StoreOptions) -> MemoryStore:
    """The ``memory:`` scheme's factory (``register_scheme``): a new, empty store."""
    from ..exceptions import UserError

    if options.durability is not None:
        raise UserError(
            "durability is a SQLite store option; a memory: store keeps nothing on disk"
        )
    if not options.create:
        raise UserError(
            "a memory: store is new and empty in every process: it holds no run or request "
            "to list, answer or resume"
        )
    if options.lease_ttl is None:
        return MemoryStore()
    return MemoryStore(lease_ttl=options.lease_ttl)


def _with_context(record: RequestRecord, context: Mapping[str, Any]) -> RequestRecord:
    from dataclasses import replace

    return replace(record, context={**record.context, **context})
