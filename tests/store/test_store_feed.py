"""The request feed (``RequestFeed``) across processes: a request another process opens, and
its answer from a third, reach a listener within a second of their writes, through the
store's own wake-up (SQLite's sockets, PostgreSQL's LISTEN/NOTIFY), not through its looks;
a change no wake-up told (a lost datagram) is found by the next look.

Each listener here looks only once a minute, so a change told within the second came by the
wake-up.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

import hpd_agent.store.sqlite as sqlite_module
from hpd_agent.store import RequestRecord, SQLiteStore, Store
from hpd_agent.testing.store_contract import question

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

_ADD = """
import sys, time, anyio
from hpd_agent.store import open_store
from hpd_agent.testing.store_contract import question

async def main(location, request_id):
    store = open_store(location)
    await store.add_request(question(request_id, run_id="run_child"))
    print(time.time(), flush=True)
    await store.aclose()

anyio.run(main, sys.argv[1], sys.argv[2])
"""


@pytest.fixture(params=["sqlite", "postgres"])
async def store_at(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Store, str]]:
    if request.param == "sqlite":
        monkeypatch.setattr(sqlite_module, "_FEED_LOOK", 60.0)
        location = str(tmp_path / "runs.db")
        store: Store = SQLiteStore(location)
    else:
        from hpd_agent.store import PostgresStore

        location = str(request.getfixturevalue("fresh_postgres"))
        store = PostgresStore(location, recheck_interval=60.0)
    yield store, location
    await store.aclose()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


async def _seen(
    changes: AsyncIterator[RequestRecord], match: Callable[[RequestRecord], bool]
) -> tuple[RequestRecord, float]:
    with anyio.fail_after(30):
        async for record in changes:
            if match(record):
                return record, time.time()
    raise AssertionError("the feed ended")


async def test_requests_opened_and_answered_elsewhere_are_told_within_a_second(
    store_at: tuple[Store, str],
) -> None:
    store, location = store_at
    feed = store.capabilities().feed
    assert feed is not None
    told: list[tuple[RequestRecord, float]] = []
    arrived = anyio.Event()

    async def listen(changes: AsyncIterator[RequestRecord]) -> None:
        nonlocal arrived
        async for record in changes:  # read as it comes, while the writers run
            told.append((record, time.time()))
            arrived.set()

    async def next_told(count: int) -> tuple[RequestRecord, float]:
        nonlocal arrived
        with anyio.fail_after(30):
            while len(told) < count:
                await arrived.wait()
                arrived = anyio.Event()
        return told[count - 1]

    async with feed.request_changes() as changes, anyio.create_task_group() as tg:
        tg.start_soon(listen, changes)
        added = await anyio.run_process(
            [sys.executable, "-c", _ADD, location, "req_child"], env=_env()
        )
        written = float(added.stdout.decode().split()[0])
        record, heard = await next_told(1)
        assert (record.request_id, record.status, record.run_id) == (
            "req_child",
            "pending",
            "run_child",
        )
        assert heard - written < 1.0
        answer = ["answer", "req_child", "Express", "--db", location]
        started = time.time()
        answered = await anyio.run_process(
            [sys.executable, "-m", "hpd_agent.cli", *answer], env=_env()
        )
        assert answered.returncode == 0
        record, heard = await next_told(2)
        assert (record.request_id, record.status, record.answer) == (
            "req_child",
            "answered",
            "Express",
        )
        assert record.answered_at is not None and started < record.answered_at < heard
        assert heard - record.answered_at < 1.0  # the answering process's clock: this one's
        tg.cancel_scope.cancel()


async def test_a_change_no_wake_up_told_is_found_by_the_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_FEED_LOOK", 0.2)
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    feed = store.capabilities().feed
    assert feed is not None
    looks: list[float] = []
    looked = anyio.Event()
    recent = store._feed_recent  # pyright: ignore[reportPrivateUsage]

    async def counted(since: float) -> list[tuple[str, str]]:
        looks.append(since)
        if len(looks) >= 3:
            looked.set()
        return await recent(since)

    monkeypatch.setattr(store, "_feed_recent", counted)
    try:
        async with feed.request_changes() as changes:
            await store.add_request(question("req_told"))
            record, _ = await _seen(changes, lambda r: True)
            assert record.request_id == "req_told"
            # Written behind the store's back: no datagram goes out, a look finds it.
            with sqlite3.connect(path) as conn:
                conn.execute(
                    "UPDATE hpd_requests SET status = 'expired', answered_at = ? WHERE id = ?",
                    (time.time(), "req_told"),
                )
            record, _ = await _seen(changes, lambda r: True)
            assert (record.request_id, record.status) == ("req_told", "expired")
            # The looks that find it again tell nothing twice: the next one told is new.
            looks.clear()
            told: list[RequestRecord] = []

            async def next_told() -> None:
                told.append((await _seen(changes, lambda r: True))[0])

            async with anyio.create_task_group() as tg:
                tg.start_soon(next_told)
                with anyio.fail_after(30):
                    await looked.wait()  # a few looks, each reaching back past the change
                assert told == []
                await store.add_request(question("req_after"))
            assert [r.request_id for r in told] == ["req_after"]
    finally:
        await store.aclose()
