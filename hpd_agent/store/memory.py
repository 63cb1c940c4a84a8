"""``MemoryStore``: the ``Store`` protocol in a dict, for one process (tests, interrupt mode)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio

from ._base import (
    JournalEntry,
    RequestRecord,
    RequestState,
    RunRecord,
    RunState,
    dump_json,
    expire_stale,
    refusal,
)
from ._session import Sessions

__all__ = ["MemoryStore"]


class MemoryStore(Sessions):
    """A store that lives in this process's memory: nothing survives the process.

    Good for tests and for ``on_unhandled="interrupt"`` within one long-lived process. An
    answer given through ``resolve`` wakes a waiting run at once. Use it from one event loop.
    """

    def __init__(self) -> None:
        self._requests: dict[str, RequestRecord] = {}
        self._journals: dict[str, dict[str, JournalEntry]] = {}
        self._runs: dict[str, RunRecord] = {}
        self._wakeups: dict[str, anyio.Event] = {}

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._requests)} requests, {len(self._runs)} runs)"

    async def add_request(self, record: RequestRecord) -> RequestRecord:
        """Insert a pending request, or return the stored one with that id."""
        existing = self._requests.get(record.request_id)
        if existing is not None:
            return existing
        self._requests[record.request_id] = record
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
        stored = json.loads(dump_json(answer)) if status == "answered" else None
        updated = record.resolved(status, stored)
        if context:
            updated = _with_context(updated, context)
        self._requests[request_id] = updated
        wakeup = self._wakeups.pop(request_id, None)
        if wakeup is not None:
            wakeup.set()
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
        self._journals.setdefault(run_id, {})[entry.key] = entry

    async def journal(self, run_id: str) -> dict[str, JournalEntry]:
        """Every journaled fact of a run, by key."""
        return dict(self._journals.get(run_id, {}))

    async def put_run(self, record: RunRecord) -> None:
        """Insert or replace a run record."""
        self._runs[record.run_id] = record

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run record, or None."""
        return self._runs.get(run_id)

    async def list_runs(self, *, status: RunState | None = None) -> list[RunRecord]:
        """Run records, oldest first."""
        found = [r for r in self._runs.values() if status is None or r.status == status]
        return sorted(found, key=lambda r: r.created_at)

    async def aclose(self) -> None:
        """Nothing to release."""


def _with_context(record: RequestRecord, context: Mapping[str, Any]) -> RequestRecord:
    from dataclasses import replace

    return replace(record, context={**record.context, **context})
