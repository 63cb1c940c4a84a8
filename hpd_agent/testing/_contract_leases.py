"""The store contract (``store_contract``): leases, the lease as a fence, the capabilities."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from ..exceptions import RunLeasedError
from ..store import (
    GrantBook,
    JournalBatches,
    JournalEntry,
    JournalGroups,
    JournalSendAhead,
    JournalWriteNow,
    RequestFeed,
    RunLeases,
    RunRecord,
    Store,
    ThreadTables,
    holder_gone,
    new_holder,
)
from ..store._fence import Fence, fencing
from ._contract_requests import question

__all__ = [
    "PROTOCOLS",
    "test_store_a_gone_holders_lease_is_taken_over_at_once",
    "test_store_a_runs_fencing_token_grows_from_take_to_take",
    "test_store_a_stale_session_writes_nothing_and_the_new_holder_writes",
    "test_store_an_expired_lease_is_taken_over",
    "test_store_each_declared_capability_implements_its_protocol",
    "test_store_take_renew_release",
    "until_lapsed",
]

RUN = "run_1"  # the run of ``question``

PROTOCOLS: dict[str, type] = {
    "write_now": JournalWriteNow,
    "batches": JournalBatches,
    "send_ahead": JournalSendAhead,
    "leases": RunLeases,
    "groups": JournalGroups,
    "threads": ThreadTables,
    "feed": RequestFeed,
    "grants": GrantBook,
}
"""Each field of ``StoreCapabilities`` and the protocol its object implements."""


def _methods(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


async def until_lapsed(store: Store, run_id: str, *, timeout: float = 10) -> None:
    """Wait (bounded) until the run's lease, as the store reports it, has expired."""
    with anyio.fail_after(timeout):
        while True:
            lease = await store.get_lease(run_id)
            if lease is None or lease.expires_at <= time.time():
                return
            await anyio.sleep(min(0.05, max(0.0, lease.expires_at - time.time())))


@pytest.mark.anyio
async def test_store_take_renew_release(contract_store: Store) -> None:
    store = contract_store
    first = await store.take_lease("r", "host:1:a", 60)
    assert first.holder == "host:1:a" and first.expires_at > time.time() + 50
    assert first.run_id == "r" and await store.get_lease("r") == first
    with pytest.raises(RunLeasedError) as refused:
        await store.take_lease("r", "host:2:b", 60)
    assert refused.value.holder == "host:1:a" and "host:1:a" in str(refused.value)
    assert await store.take_lease("r", "host:1:a", 60)  # its own holder may take it again
    assert await store.renew_lease("r", "host:1:a", 60)
    assert not await store.renew_lease("r", "host:2:b", 60)
    await store.release_lease("r", "host:2:b")  # not its lease: nothing happens
    assert (await store.get_lease("r")) is not None
    await store.release_lease("r", "host:1:a")
    assert await store.get_lease("r") is None
    taken = await store.take_lease("r", "host:2:b", 60)
    assert taken.holder == "host:2:b"
    assert not await store.renew_lease("r", "host:1:a", 60)  # lost: renewal says so
    assert await store.get_lease("never") is None


@pytest.mark.anyio
async def test_store_an_expired_lease_is_taken_over(contract_store: Store) -> None:
    store = contract_store
    await store.take_lease("r", "dead:1:a", 0.05)
    await until_lapsed(store, "r")
    taken = await store.take_lease("r", "live:2:b", 60)
    assert taken.holder == "live:2:b"
    assert not await store.renew_lease("r", "dead:1:a", 60)


@pytest.mark.anyio
async def test_store_a_gone_holders_lease_is_taken_over_at_once(contract_store: Store) -> None:
    store = contract_store
    mine = new_holder().split(":")
    if len(mine) < 5:
        pytest.skip("this system cannot tell whether a holder's process is gone (no /proc)")
    # A process of this machine that has exited: its holder id names no live process.
    done = await anyio.run_process([sys.executable, "-c", "import os; print(os.getpid())"])
    gone = ":".join([mine[0], done.stdout.decode().strip(), "0", *mine[3:]])
    assert holder_gone(gone) and not holder_gone(new_holder())
    await store.take_lease("r", gone, 60)
    taken = await store.take_lease("r", "live:2:b", 60)  # not waited out for 60 s
    assert taken.holder == "live:2:b"
    await store.take_lease("s", new_holder(), 60)
    with pytest.raises(RunLeasedError):  # a live holder's lease is not
        await store.take_lease("s", "live:2:b", 60)


def _entry(key: str) -> JournalEntry:
    return JournalEntry(key=key, kind="model", value={"text": key})


Write = Callable[[], Awaitable[Any]]


def _writes(store: Store, record: RunRecord, holder: str) -> dict[str, tuple[Write, set[str]]]:
    """Every fenced write the store declares, as a session of ``holder`` makes it, with the
    journal keys each writes. A ``..._nowait`` write may answer False instead: it wrote
    nothing (the journal then writes with an awaited method)."""
    caps = store.capabilities()
    writes: dict[str, tuple[Write, set[str]]] = {
        "journal_put": (lambda: store.journal_put(RUN, _entry("one")), {"one"}),
        "add_request": (lambda: store.add_request(question("req_w")), set()),
        "put_run": (lambda: store.put_run(record), set()),
    }
    if caps.write_now is not None:
        now = caps.write_now

        async def put_now() -> bool:
            return now.journal_put_nowait(RUN, _entry("now"))

        writes["journal_put_nowait"] = (put_now, {"now"})
    if caps.batches is not None:
        batches = caps.batches

        async def put_many_now() -> bool:
            return batches.journal_put_many_nowait(RUN, [_entry("now1"), _entry("now2")])

        pair = [_entry("many1"), _entry("many2")]
        writes["journal_put_many"] = (
            lambda: batches.journal_put_many(RUN, pair),
            {"many1", "many2"},
        )
        writes["journal_put_many_nowait"] = (put_many_now, {"now1", "now2"})
        held = [_entry("held1"), _entry("held2")]
        writes["add_request with entries"] = (
            lambda: batches.add_request(question("req_b"), journal=held),
            {"held1", "held2"},
        )
    if caps.leases is not None:
        leases = caps.leases
        done = dataclasses.replace(record, status="completed", output="done")
        last = [_entry("last1"), _entry("last2")]
        writes["close_run with entries"] = (
            lambda: leases.close_run(done, holder, last),
            {"last1", "last2"},
        )
        writes["close_run"] = (lambda: leases.close_run(done, holder), set())
    return writes


async def _state(store: Store) -> tuple[Any, ...]:
    requests = await store.list_requests(run_id=RUN, status=None)
    return (
        await store.journal(RUN),
        await store.get_run(RUN),
        sorted(r.request_id for r in requests),
        await store.get_lease(RUN),
    )


@pytest.mark.anyio
async def test_store_a_stale_session_writes_nothing_and_the_new_holder_writes(
    contract_store: Store,
) -> None:
    store = contract_store
    record = RunRecord(run_id=RUN, agent_name="A", prompt="go", history=[])
    await store.put_run(record)
    old = await store.take_lease(RUN, "old:1:a", 60)
    # The old holder stalled: its lease lapsed and another holder took it (given up here,
    # which leaves the lease row as a lapse would).
    await store.release_lease(RUN, "old:1:a")
    new = await store.take_lease(RUN, "new:2:b", 60)
    assert new.fence > old.fence > 0
    before = await _state(store)
    with fencing(Fence(RUN, old.fence)):
        for name, (write, _) in _writes(store, record, "old:1:a").items():
            try:
                done = await write()
            except RunLeasedError as refused:
                assert refused.lost, name
            else:
                assert done is False, f"{name} was not refused for a stale holder"
            assert await _state(store) == before, f"{name} wrote for a stale holder"
    wanted: set[str] = set()
    with fencing(Fence(RUN, new.fence)):
        for write, keys in _writes(store, record, "new:2:b").values():
            if await write() is not False:
                wanted |= keys
    assert set(await store.journal(RUN)) == wanted
    final = await store.get_run(RUN)
    assert final is not None
    if store.capabilities().leases is not None:
        assert final.status == "completed"  # close_run wrote the end
        assert await store.get_lease(RUN) is None  # and gave the lease up


@pytest.mark.anyio
async def test_store_a_runs_fencing_token_grows_from_take_to_take(contract_store: Store) -> None:
    store = contract_store
    tokens: list[int] = []
    for holder in ("a:1:x", "a:1:x", "b:2:y"):  # again by the same holder, then another
        lease = await store.take_lease(RUN, holder, 60)
        tokens.append(lease.fence)
        assert (await store.get_lease(RUN)) == lease
        await store.release_lease(RUN, holder)
    expired = await store.take_lease(RUN, "c:3:z", -1)  # lapsed at once
    tokens.append(expired.fence)
    taken = await store.take_lease(RUN, "d:4:w", 60)  # over a lapsed lease, not given up
    tokens.append(taken.fence)
    assert tokens == sorted(set(tokens)) and tokens[0] > 0
    leases = store.capabilities().leases
    if leases is not None:  # a new run's first take, with its record
        opened = await leases.open_run(
            RunRecord(run_id="run_2", agent_name="A", prompt="go", history=[]), "e:5:v", 60
        )
        assert opened.fence > 0 and opened == await store.get_lease("run_2")


@pytest.mark.anyio
async def test_store_each_declared_capability_implements_its_protocol(
    contract_store: Store,
) -> None:
    store = contract_store
    assert isinstance(store, Store)  # every method of the protocol, ``lease_ttl`` too
    assert store.lease_ttl > 0
    capabilities = store.capabilities()
    for name, protocol in PROTOCOLS.items():
        offered = getattr(capabilities, name)
        if offered is None:
            continue
        for method in _methods(protocol):
            assert callable(getattr(offered, method, None)), f"{name} lacks {method}"
    assert store.capabilities() == capabilities  # the same answer each time
