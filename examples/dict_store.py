"""A store written from scratch: one module, public names of ``hpd_agent.store`` only.

``DictStore`` keeps requests, journals, runs and leases in dicts (one process, like
``MemoryStore``), honours the lease as a fence, and offers thread tables. It declares no
fast path (``StoreCapabilities`` has only ``threads``): every durable feature runs through
its plain ``Store`` methods. ``register_scheme`` makes ``dict:`` a location
``open_store`` (and the ``hpd-agent`` commands) can open. tests/store/test_store_kit.py
runs ``hpd_agent.testing.store_contract`` on it; docs/durability.md ("Writing a store")
walks through it.

    python examples/dict_store.py    # a run that asks, interrupted, resumed through it
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import anyio

from hpd_agent.store import (
    DEFAULT_LEASE_TTL,
    JournalEntry,
    Lease,
    MemoryThreadTables,
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
    register_scheme,
)


class DictStore(Sessions):
    """A ``Store`` in dicts: nothing outlives the object. Use it from one event loop."""

    def __init__(self, *, lease_ttl: float = DEFAULT_LEASE_TTL) -> None:
        self.lease_ttl = check_lease_ttl(lease_ttl)
        self._requests: dict[str, RequestRecord] = {}
        self._journals: dict[str, dict[str, JournalEntry]] = {}
        self._runs: dict[str, RunRecord] = {}
        self._leases: dict[str, Lease] = {}
        self._answered: dict[str, anyio.Event] = {}
        self._tokens = 0  # fencing tokens: each take of a lease gets a larger one
        self._threads = MemoryThreadTables()

    def capabilities(self) -> StoreCapabilities:
        """No fast path; thread tables (the web server keeps its threads there)."""
        return StoreCapabilities(threads=self._threads)

    def _fenced(self, run_id: str) -> None:
        """Refuse a write of a session whose lease another holder has taken since."""
        fence = current_fence(run_id)
        if fence is None:
            return
        lease = self._leases.get(run_id)
        if lease is None or lease.fence != fence.token:
            raise fence.refuse()

    # -- requests ------------------------------------------------------------------------
    async def add_request(self, record: RequestRecord) -> RequestRecord:
        if record.request_id in self._requests:
            return self._requests[record.request_id]  # a replay asks again: the same one
        self._fenced(record.run_id)
        self._requests[record.request_id] = record
        return record

    async def get_request(self, request_id: str) -> RequestRecord | None:
        return self._requests.get(request_id)

    async def list_requests(
        self, *, run_id: str | None = None, status: RequestState | None = "pending"
    ) -> list[RequestRecord]:
        found = [
            r
            for r in self._requests.values()
            if run_id in (None, r.run_id) and status in (None, r.status)
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
        record = self._requests.get(request_id)
        if record is None or record.status != "pending":
            raise refusal(record, request_id)  # the error that says why
        kept = jsonable(answer) if status == "answered" else None  # as JSON keeps it
        done = record.resolved(status, kept)
        if context:
            done = replace(done, context={**done.context, **context})
        self._requests[request_id] = done
        if request_id in self._answered:
            self._answered.pop(request_id).set()
        return done

    async def wait_resolved(self, request_id: str) -> RequestRecord:
        while True:
            record = self._requests.get(request_id)
            if record is None:
                raise refusal(None, request_id)
            if record.status != "pending":
                return record
            await self._answered.setdefault(request_id, anyio.Event()).wait()

    async def recover(
        self, max_age: float, *, run_id: str | None = None, now: float | None = None
    ) -> list[str]:
        return await expire_stale(self, max_age, run_id=run_id, now=now)

    # -- the journal and run records -----------------------------------------------------
    async def journal_put(self, run_id: str, entry: JournalEntry) -> None:
        self._fenced(run_id)
        self._journals.setdefault(run_id, {})[entry.key] = entry

    async def journal(self, run_id: str) -> dict[str, JournalEntry]:
        return dict(self._journals.get(run_id, {}))

    async def put_run(self, record: RunRecord) -> None:
        self._fenced(record.run_id)
        self._runs[record.run_id] = record

    async def get_run(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    async def list_runs(self, *, status: RunState | None = None) -> list[RunRecord]:
        found = [r for r in self._runs.values() if status in (None, r.status)]
        return sorted(found, key=lambda r: r.created_at)

    # -- leases --------------------------------------------------------------------------
    async def take_lease(self, run_id: str, holder: str, ttl: float) -> Lease:
        now = time.time()
        lease = self._leases.get(run_id)
        live = lease is not None and lease.expires_at > now and lease.holder != holder
        if lease is not None and live and not holder_gone(lease.holder):
            raise lease_refusal(lease, now=now)
        self._tokens += 1
        taken = Lease(run_id=run_id, holder=holder, expires_at=now + ttl, fence=self._tokens)
        self._leases[run_id] = taken
        return taken

    async def renew_lease(self, run_id: str, holder: str, ttl: float) -> bool:
        lease = self._leases.get(run_id)
        if lease is None or lease.holder != holder or not lease.expires_at:
            return False
        self._leases[run_id] = replace(lease, expires_at=time.time() + ttl)
        return True

    async def release_lease(self, run_id: str, holder: str) -> None:
        lease = self._leases.get(run_id)
        if lease is not None and lease.holder == holder:
            # Expired, not removed: its fencing token stays the run's last.
            self._leases[run_id] = replace(lease, expires_at=0.0)

    async def get_lease(self, run_id: str) -> Lease | None:
        lease = self._leases.get(run_id)
        return lease if lease is not None and lease.expires_at else None

    async def aclose(self) -> None:
        self._threads.close()


def open_dict(location: str, options: StoreOptions) -> DictStore:
    """``dict:`` locations: a new ``DictStore``."""
    if options.lease_ttl is None:
        return DictStore()
    return DictStore(lease_ttl=options.lease_ttl)


register_scheme("dict", open_dict)


async def main() -> None:
    from hpd_agent import Agent, ClarificationRequest, ask_user
    from hpd_agent.store import open_store
    from hpd_agent.testing import ScriptedModel, text, tool_call

    store = open_store("dict:")
    ask = tool_call("ask_user", question="Which framework?", options=["Express", "FastAPI"])
    model = ScriptedModel([ask, text("plan: use FastAPI")])
    agent = Agent("Planner", model=model, tools=[ask_user()])
    result = await agent.run("plan", store=store, on_unhandled="interrupt")
    (asked,) = result.pending
    assert isinstance(asked, ClarificationRequest)
    print(f"{type(store).__name__}: run {result.status} at {asked.question!r}")
    done = await agent.resume(result.run_id, store=store, answers={asked.request_id: "FastAPI"})
    print(f"resumed: {done.output}")
    await store.aclose()


if __name__ == "__main__":
    anyio.run(main)
