"""The web server keeps its threads in the thread tables its store offers
(``StoreCapabilities.threads``), whatever the store's class: a ``MemoryStore``, a store
written from scratch (examples/dict_store.py), or a store of a scheme an installed package
registers. A store that offers none still serves (its threads in the server's memory)."""

from __future__ import annotations

import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from _scheme_plugin import installed_plugin
from agents import build
from conftest import REPO, post_run, run_input, sse_events, start_server

from hpd_agent.store import MemoryStore, SQLiteStore, Store, StoreCapabilities
from hpd_agent.web import create_app

sys.path.insert(0, str(REPO / "examples"))  # the store written from scratch
from dict_store import DictStore

pytestmark = pytest.mark.anyio


class NoThreads(MemoryStore):
    """A store that offers no thread tables."""

    def capabilities(self) -> StoreCapabilities:
        offered = super().capabilities()
        return StoreCapabilities(write_now=offered.write_now, leases=offered.leases)


async def _messages_after_a_run(store: Store, thread: str) -> tuple[list[Any], list[Any]]:
    """Run ``hello`` on ``thread`` through one app, then read the thread's messages
    through a second app on the same store (as a restarted server would)."""
    seen: list[list[Any]] = []
    for app in (create_app(build(), store=store), create_app(build(), store=store)):
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c,
        ):
            if not seen:
                response = await c.post("/agent", json=run_input(thread, "r1", "hello"))
                assert sse_events(response.text)[-1]["type"] == "RUN_FINISHED"
            found = await c.get(f"/threads/{thread}/messages")
            seen.append(found.json()["messages"] if found.status_code == 200 else [])
    return seen[0], seen[1]


@pytest.mark.parametrize("kind", ["memory", "dict"])
async def test_a_second_server_on_the_store_finds_the_thread(kind: str) -> None:
    store: Store = MemoryStore() if kind == "memory" else DictStore()
    try:
        first, second = await _messages_after_a_run(store, "t1")
        assert len(first) == 2 and second == first
        tables = store.capabilities().threads
        assert tables is not None
        data = await tables.read_thread("web", "t1")
        assert data is not None and len(data.rows) == 1 and data.items
    finally:
        await store.aclose()


async def test_a_store_without_thread_tables_serves_from_memory() -> None:
    store = NoThreads()
    try:
        first, second = await _messages_after_a_run(store, "t1")
        assert len(first) == 2 and second == []  # gone with the first server
    finally:
        await store.aclose()


async def test_the_sql_tables_write_rows_and_items_in_one_transaction(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    tables = store.capabilities().threads
    assert tables is not None
    try:
        bad: Any = [None]  # a text the table refuses: the row written first is rolled back
        with pytest.raises(Exception, match="NOT NULL"):
            await tables.write_thread("web", "t", rows={"run": "x"}, items=bad)
        assert await tables.read_thread("web", "t") is None
    finally:
        await store.aclose()


def test_a_server_on_a_scheme_an_installed_package_registers_keeps_its_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", installed_plugin(tmp_path))
    location = f"lite://{tmp_path / 'runs.db'}"
    first = start_server(tmp_path, "--store", location)
    try:
        with first.client() as c:
            _, events = post_run(c, run_input("t", "r1", "hello"))
        assert events[-1]["type"] == "RUN_FINISHED"
    finally:
        first.stop()
    assert not (tmp_path / "web.db").exists()
    second = start_server(tmp_path, "--store", location)
    try:
        with second.client() as c:
            assert len(c.get("/threads/t/messages").json()["messages"]) == 2
    finally:
        second.stop()


class _Held:
    """An item whose encoding (in the writing worker thread, within its transaction) waits
    until the test lets it go: a write under way, as a commit waiting for the disk is."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.go = threading.Event()
        self.let_go: bool | None = None

    def __conform__(self, protocol: object) -> str:
        self.entered.set()
        self.let_go = self.go.wait(10)  # False: nobody let it go (the loop was blocked)
        return "held"


async def test_a_thread_read_on_sqlite_waits_for_no_write_under_way(tmp_path: Path) -> None:
    # Every input's start reads its thread: it waited on the event loop for any write of the
    # thread tables under way (its commit, an fsync), the whole server with it.
    store = SQLiteStore(tmp_path / "runs.db")
    tables = store.capabilities().threads
    assert tables is not None
    held = _Held()
    items: Any = [held]
    try:
        await tables.write_thread("web", "t", rows={"run": "x"})
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(tables.write_thread, "web", "t", items=items))
            await anyio.to_thread.run_sync(held.entered.wait)
            data = await tables.read_thread("web", "t")  # the last commit's snapshot
            held.go.set()
            assert data is not None and data.rows == {"run": "x"} and data.items == []
        assert held.let_go is True
    finally:
        await store.aclose()


async def test_a_thread_read_on_a_sqlite_file_takes_no_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every input's start reads its thread: a worker thread's hop cost the event loop more
    # than the read.
    store = SQLiteStore(tmp_path / "runs.db")
    tables = store.capabilities().threads
    assert tables is not None
    try:
        await tables.write_thread("web", "t", rows={"run": "x"}, items=["a"])
        assert await tables.read_thread("web", "new") is None  # opens what a read uses
        hops: list[object] = []
        run_sync = anyio.to_thread.run_sync

        async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
            hops.append(fn)
            return await run_sync(fn, *args, **kwargs)

        monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
        data = await tables.read_thread("web", "t")
        assert data is not None and data.rows == {"run": "x"} and data.items == ["a"]
        assert await tables.read_thread("web", "other") is None
        assert hops == []
    finally:
        await store.aclose()
