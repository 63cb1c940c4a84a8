"""Each fenced write of the built-in stores, one by one: a session whose lease was taken by
another holder writes nothing (``RunLeasedError``), the new holder's session writes; and a
run's fencing token grows from take to take (see ``hpd_agent.store._fence``)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)
from test_store import question

from hpd_agent import RunLeasedError
from hpd_agent.store import JournalEntry, MemoryStore, RunRecord, SQLiteStore, Store, open_store
from hpd_agent.store._fence import Fence, fencing

pytestmark = pytest.mark.anyio

RUN = "run_1"  # the run of ``test_store.question``


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        made: Store = MemoryStore()
    elif request.param == "sqlite":
        made = SQLiteStore(tmp_path / "fence.db")
    else:
        made = open_store(request.getfixturevalue("fresh_postgres"))
    yield made
    await made.aclose()


def _entry(key: str) -> JournalEntry:
    return JournalEntry(key=key, kind="model", value={"text": key})


def _writes(
    store: Store, record: RunRecord, holder: str
) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Every fenced write the store declares, as a session of ``holder`` makes it."""
    caps = store.capabilities()
    ask = question("req_w")
    writes: dict[str, Callable[[], Awaitable[Any]]] = {
        "journal_put": lambda: store.journal_put(RUN, _entry("one")),
        "add_request": lambda: store.add_request(ask),
        "put_run": lambda: store.put_run(record),
    }
    if caps.write_now is not None:
        now = caps.write_now

        async def put_now() -> bool:
            return now.journal_put_nowait(RUN, _entry("now"))

        writes["journal_put_nowait"] = put_now
    if caps.batches is not None:
        batches = caps.batches
        pair = [_entry("many1"), _entry("many2")]

        async def put_many_now() -> bool:
            return batches.journal_put_many_nowait(RUN, pair)

        writes["journal_put_many"] = lambda: batches.journal_put_many(RUN, pair)
        writes["journal_put_many_nowait"] = put_many_now
        writes["add_request with entries"] = lambda: batches.add_request(
            question("req_b"), journal=[_entry("held1"), _entry("held2")]
        )
    if caps.leases is not None:
        leases = caps.leases
        done = dataclasses.replace(record, status="completed", output="done")
        writes["close_run with entries"] = lambda: leases.close_run(
            done, holder, [_entry("last1"), _entry("last2")]
        )
        writes["close_run"] = lambda: leases.close_run(done, holder)
    return writes


async def _state(store: Store) -> tuple[Any, ...]:
    requests = await store.list_requests(run_id=RUN, status=None)
    return (
        await store.journal(RUN),
        await store.get_run(RUN),
        sorted(r.request_id for r in requests),
        await store.get_lease(RUN),
    )


async def test_a_stale_session_writes_nothing_and_the_new_holder_writes(store: Store) -> None:
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
        for name, write in _writes(store, record, "old:1:a").items():
            with pytest.raises(RunLeasedError) as refused:
                await write()
            assert refused.value.lost, name
            assert await _state(store) == before, f"{name} wrote for a stale holder"
    with fencing(Fence(RUN, new.fence)):
        for write in _writes(store, record, "new:2:b").values():
            await write()
    caps = store.capabilities()
    wanted = {"one"} | ({"now"} if caps.write_now is not None else set())
    if caps.batches is not None:
        wanted |= {"many1", "many2", "held1", "held2"}
    if caps.leases is not None:
        wanted |= {"last1", "last2"}
    assert set(await store.journal(RUN)) == wanted
    final = await store.get_run(RUN)
    assert final is not None
    if caps.leases is not None:
        assert final.status == "completed"  # close_run wrote the end
        assert await store.get_lease(RUN) is None  # and gave the lease up


async def test_a_runs_token_grows_from_take_to_take(store: Store) -> None:
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
