"""One SQL store object serving waiters on two event loops at once (two threads, asyncio
and trio): a wake-up from one loop reaches a waiter on the other (``_waiters``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent.store import RequestRecord, SQLiteStore, Store, open_store
from hpd_agent.testing.store_contract import question


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        made: Store = SQLiteStore(tmp_path / "loops.db")
    else:
        made = open_store(request.getfixturevalue("fresh_postgres"))
    yield made
    anyio.run(made.aclose)


class _Loop:
    """``main`` run on its own event loop in a thread of its own; its result or error."""

    def __init__(self, main: Callable[[], Awaitable[Any]], backend: str) -> None:
        self.result: list[Any] = []
        self.thread = threading.Thread(target=self._run, args=(main, backend), daemon=True)
        self.thread.start()

    def _run(self, main: Callable[[], Awaitable[Any]], backend: str) -> None:
        try:
            self.result.append(anyio.run(main, backend=backend))
        except BaseException as e:
            self.result.append(e)

    def outcome(self) -> Any:
        self.thread.join(30)
        assert not self.thread.is_alive(), "the loop's waiter was never woken"
        (got,) = self.result
        assert not isinstance(got, BaseException), repr(got)
        return got


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded) until ``condition`` holds: another thread's loop makes it so."""
    deadline = time.monotonic() + 15
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def _fetched(store: Store) -> dict[str, int]:
    """Counts, per request id, the looks the store's waiters took after registering. The
    first waiter to find its request pending leads (watches for all), at once after it."""
    waiters: Any = store._waiters  # type: ignore[attr-defined]
    counts: dict[str, int] = {}
    fetch = waiters._fetch

    async def counting(request_id: str) -> RequestRecord | None:
        record = await fetch(request_id)
        counts[request_id] = counts.get(request_id, 0) + 1
        return record

    waiters._fetch = counting
    return counts


def test_a_leader_on_one_loop_hands_the_watch_to_a_waiter_on_another(store: Store) -> None:
    anyio.run(store.add_request, question("req_a"))
    anyio.run(store.add_request, question("req_b"))
    fetched = _fetched(store)
    answer_a = threading.Event()

    async def asyncio_side() -> RequestRecord:
        got: list[RequestRecord] = []
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:

                async def wait() -> None:
                    got.append(await store.wait_resolved("req_a"))

                tg.start_soon(wait)
                await anyio.to_thread.run_sync(answer_a.wait)
                # Answered on its own loop: the leader stops watching and hands the watch
                # to the waiter on the other loop.
                await store.resolve("req_a", "answered", "A")
        return got[0]

    async def trio_side() -> RequestRecord:
        with anyio.fail_after(20):
            return await store.wait_resolved("req_b")

    first = _Loop(asyncio_side, "asyncio")
    _until(lambda: fetched.get("req_a") == 1, "the asyncio waiter leads")
    second = _Loop(trio_side, "trio")
    _until(lambda: fetched.get("req_b") == 1, "the trio waiter waits")
    answer_a.set()
    assert first.outcome().answer == "A"
    # Woken to take the watch over, it looks again (and, its request pending, leads).
    _until(lambda: fetched.get("req_b", 0) >= 2, "the trio waiter took the watch over")
    anyio.run(store.resolve, "req_b", "answered", "B")  # from a third loop
    assert second.outcome().answer == "B"


def test_waiters_of_one_request_on_two_loops_are_all_woken(store: Store) -> None:
    anyio.run(store.add_request, question("req_q"))
    fetched = _fetched(store)

    async def wait() -> RequestRecord:
        with anyio.fail_after(20):
            return await store.wait_resolved("req_q")

    first = _Loop(wait, "asyncio")
    _until(lambda: fetched.get("req_q") == 1, "the asyncio waiter leads")
    second = _Loop(wait, "trio")
    _until(lambda: fetched.get("req_q") == 2, "the trio waiter waits too")
    anyio.run(store.resolve, "req_q", "answered", "Q")  # from a third loop
    assert first.outcome().answer == "Q"
    assert second.outcome().answer == "Q"
