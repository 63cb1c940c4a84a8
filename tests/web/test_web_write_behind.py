"""A run's frames are written to the thread tables behind it, a write's frames in one item:
the run goes on while a write is under way; its closing frames are written after that
write, before anyone sees them; a thread written one frame per item (as before) loads."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import httpx
import pytest
from agents import build_fanout
from conftest import run_input, sse_events

from hpd_agent.store import (
    MemoryStore,
    RequestRecord,
    StoreCapabilities,
    ThreadData,
    ThreadTables,
)
from hpd_agent.web import create_app

pytestmark = pytest.mark.anyio


class HeldTables:
    """Thread tables whose first write of frames alone (no run row: a write while the run
    goes) waits for ``release``; ``held`` is set when it starts waiting."""

    def __init__(self, tables: ThreadTables) -> None:
        self._tables = tables
        self.held = anyio.Event()
        self.release = anyio.Event()

    async def write_thread(
        self,
        space: str,
        thread_id: str,
        *,
        rows: Mapping[str, str] | None = None,
        items: Sequence[str] = (),
        first: int = 0,
    ) -> None:
        if items and rows is None and not self.held.is_set():
            self.held.set()
            await self.release.wait()
        await self._tables.write_thread(space, thread_id, rows=rows, items=items, first=first)

    async def read_thread(self, space: str, thread_id: str) -> ThreadData | None:
        return await self._tables.read_thread(space, thread_id)

    async def thread_of(self, space: str, key: str) -> str | None:
        return await self._tables.thread_of(space, key)


class HeldStore(MemoryStore):
    """A ``MemoryStore`` offering ``HeldTables``; ``closing`` is set when, a write being
    held, the server asks for the run's pending requests (it makes its closing frames)."""

    def __init__(self) -> None:
        super().__init__()
        offered = super().capabilities()
        assert offered.threads is not None
        self.tables = HeldTables(offered.threads)
        self._offered = StoreCapabilities(
            write_now=offered.write_now, leases=offered.leases, threads=self.tables
        )
        self.closing = anyio.Event()

    def capabilities(self) -> StoreCapabilities:
        return self._offered

    async def list_requests(self, **kwargs: Any) -> list[RequestRecord]:
        if self.tables.held.is_set():
            self.closing.set()
        return await super().list_requests(**kwargs)


async def test_a_run_goes_on_while_its_frames_are_written() -> None:
    store = HeldStore()
    app = create_app(build_fanout(), store=store)
    transport = httpx.ASGITransport(app=app)
    texts: list[str] = []
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client,
    ):

        async def post() -> None:
            response = await client.post("/agent", json=run_input("t", "r", "fanout 8 200"))
            texts.append(response.text)

        async with anyio.create_task_group() as tg:
            tg.start_soon(post)
            with anyio.fail_after(20):
                await store.tables.held.wait()
                # 1,600 pieces: the run reaches its end while its first write (of 1,024 or so
                # frames) is held; it used to wait for that write.
                await store.closing.wait()
            store.tables.release.set()
        events = sse_events(texts[0])
        assert events[-1]["type"] == "RUN_FINISHED"
        assert sum(e["type"] == "TEXT_MESSAGE_CONTENT" for e in events) > 1600  # and "done"
        # Every frame sent is in the thread tables, in order, none twice, a few items (one
        # per write: 1,700 frames were 1,700 rows).
        found = await store.tables.read_thread("web", "t")
        assert found is not None
        assert sse_events("".join(found.items)) == events
        assert 2 <= len(found.items) <= 10
    await store.aclose()


async def test_a_thread_written_one_frame_per_item_loads() -> None:
    store = MemoryStore()
    app = create_app(build_fanout(), store=store)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client,
    ):
        response = await client.post("/agent", json=run_input("t", "r", "fanout 2 3"))
        events = sse_events(response.text)
        tables = store.capabilities().threads
        assert tables is not None
        found = await tables.read_thread("web", "t")
        assert found is not None
        # The same thread as an earlier version wrote it: one frame per item.
        frames = [f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events]
        await tables.write_thread("web", "old", rows=found.rows, items=frames)
        replayed = await client.get("/threads/old/events")
        assert sse_events(replayed.text) == events
        messages = await client.get("/threads/old/messages")
        assert messages.json() == (await client.get("/threads/t/messages")).json()
    await store.aclose()
