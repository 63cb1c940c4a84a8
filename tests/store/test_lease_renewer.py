"""The cheap run lifecycle: one renewer thread per store, a run opened and closed in one commit.

Every store here renews leases from its renewer thread (``hpd_agent.store._renewer``) and
writes a new run's record with its lease, and its final record with the lease's release,
atomically. A store without those capabilities (a third-party ``Store``) still works, with a
renewing task per run.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)
from test_lease import asking, changed, stolen_while_asking

from hpd_agent import ClarificationRequest, UserError
from hpd_agent.store import (
    JournalEntry,
    MemoryStore,
    RequestRecord,
    SQLiteStore,
    Store,
    StoreCapabilities,
    open_store,
)
from hpd_agent.store._session import Sessions

pytestmark = pytest.mark.anyio

RENEWER = "hpd-agent lease renewer"


class LegacyStore(Sessions):
    """A third-party store: every ``Store`` method (its inner store's), declaring nothing
    beyond them; the methods of every capability are hidden, so a use would fail."""

    BEYOND = frozenset(
        {
            "lease_renewer",
            "open_run",
            "close_run",
            "journal_put_nowait",
            "journal_put_many_nowait",
            "journal_put_many",
            "journal_send_nowait",
            "journal_confirm",
        }
    )

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.journal_puts: list[str] = []  # the keys written through ``journal_put``

    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities()

    async def add_request(self, record: RequestRecord) -> RequestRecord:
        return await self._inner.add_request(record)  # no ``journal=``: nothing is held

    async def journal_put(self, run_id: str, entry: JournalEntry) -> None:
        self.journal_puts.append(entry.key)
        await self._inner.journal_put(run_id, entry)

    def __getattr__(self, name: str) -> Any:
        if name in self.BEYOND:
            raise AttributeError(name)
        return getattr(self._inner, name)


def _make(kind: str, tmp_path: Path, request: pytest.FixtureRequest, ttl: float) -> Store:
    if kind == "memory":
        return MemoryStore(lease_ttl=ttl)
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "runs.db", lease_ttl=ttl)
    return open_store(request.getfixturevalue("fresh_postgres"), lease_ttl=ttl)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made = _make(request.param, tmp_path, request, 0.3)
    yield made
    await made.aclose()


async def _run_renewed(store: Store, run_id: str, on_ask: Callable[[], object] = lambda: None):
    """Run the asking agent; at its question, wait for a renewal of its lease, then answer."""
    async with asking().stream("go", store=store, run_id=run_id) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                held = await store.get_lease(run_id)
                assert held is not None
                on_ask()
                renewed = await changed(store, run_id, held)
                assert renewed is not None and renewed.holder == held.holder
                await run.respond(event.request_id, "yes")
    assert run.result.output == "went"
    assert await store.get_lease(run_id) is None
    record = await store.get_run(run_id)
    assert record is not None and record.status == "completed" and record.output == "went"


def _renewers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(RENEWER)]


# -- a store without the cheap lease methods ----------------------------------------------


async def test_a_store_without_a_renewer_renews_with_a_task(store: Store) -> None:
    legacy: Store = LegacyStore(store)  # type: ignore[assignment]
    assert legacy.capabilities() == StoreCapabilities()
    assert not hasattr(legacy, "lease_renewer") and not hasattr(legacy, "open_run")
    await _run_renewed(legacy, "old1")
    with pytest.raises(UserError, match="already in"):  # the old sequence refuses it too
        await asking().run("go", store=legacy, run_id="old1")


async def test_a_store_without_a_renewer_still_loses_a_stolen_lease(store: Store) -> None:
    legacy: Store = LegacyStore(store)  # type: ignore[assignment]
    lost = await stolen_while_asking(legacy, store, "old2")
    assert lost.holder == "thief:9:z"
    record = await store.get_run("old2")
    assert record is not None and record.status == "running"


# -- the renewer thread -------------------------------------------------------------------


async def test_the_renewer_is_a_daemon_thread_that_stops_with_the_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    for kind in ("memory", "sqlite", "postgres"):
        made = _make(kind, tmp_path, request, 0.3)
        before = set(_renewers())
        seen: list[threading.Thread] = []

        def look(seen: list[threading.Thread] = seen, before: set[threading.Thread] = before):
            seen.extend(set(_renewers()) - before)

        await _run_renewed(made, f"d-{kind}", look)
        assert len(seen) == 1 and seen[0].daemon  # never keeps the interpreter alive
        await _run_renewed(made, f"d2-{kind}")  # later runs share it
        assert set(_renewers()) - before == {seen[0]}
        await made.aclose()
        assert not seen[0].is_alive()


async def test_the_renewer_thread_ends_when_no_run_holds_a_lease(store: Store) -> None:
    before = set(_renewers())
    seen: list[threading.Thread] = []

    def look() -> None:
        seen.extend(set(_renewers()) - before)

    await _run_renewed(store, "idle1", look)
    (first,) = seen
    await anyio.to_thread.run_sync(first.join, 10)  # ends by itself, the store still open
    assert not first.is_alive()
    seen.clear()
    await _run_renewed(store, "idle2", look)  # the next run starts another
    assert len(seen) == 1 and seen[0] is not first


def test_one_store_serves_runs_on_two_event_loops_at_once(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db", lease_ttl=0.3)
    both_asked = threading.Barrier(2, timeout=30)
    failures: list[BaseException] = []

    def drive(backend: str) -> None:
        async def main() -> None:
            # Both runs wait on their questions together, so one renewal keeps both.
            await _run_renewed(store, f"loop-{backend}", lambda: both_asked.wait())

        try:
            anyio.run(main, backend=backend)
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=drive, args=(b,)) for b in ("asyncio", "trio")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures
    assert not any(t.is_alive() for t in threads)
    anyio.run(store.aclose)


async def test_a_renewer_whose_connection_drops_reconnects(
    request: pytest.FixtureRequest,
) -> None:
    import psycopg

    dsn: str = request.getfixturevalue("fresh_postgres")
    store = open_store(dsn, lease_ttl=0.6)
    # Synchronous (in a thread): psycopg's async API needs asyncio, these tests run on trio too.
    admin = psycopg.connect(dsn, autocommit=True)

    def count() -> int:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (RENEWER,)
        ).fetchone()
        assert row is not None
        return int(row[0])

    def kill() -> None:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (RENEWER,),
        )

    try:
        async with asking().stream("go", store=store, run_id="drop") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    held = await changed(store, "drop", None)  # taken
                    held = await changed(store, "drop", held)  # renewed once: connected
                    assert await anyio.to_thread.run_sync(count) == 1
                    await anyio.to_thread.run_sync(kill)
                    # Renewed again through a new connection, well before the lease lapsed.
                    for _ in range(3):
                        renewed = await changed(store, "drop", held)
                        assert renewed is not None and held is not None
                        assert renewed.holder == held.holder
                        held = renewed
                    await run.respond(event.request_id, "yes")
        assert run.result.output == "went"
        assert await store.get_lease("drop") is None
    finally:
        admin.close()
        await store.aclose()


# -- a run opened and closed in one commit -------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_racing_openers_of_one_new_run_one_wins(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    stores = [_make(kind, tmp_path, request, 60) for _ in range(4)]  # as four processes
    won: list[int] = []
    refused: list[BaseException] = []

    async def open_one(i: int, store: Store) -> None:
        try:
            await store.open_session(run_id="race", agent_name="A", prompt=f"p{i}", history=None)
            won.append(i)
        except UserError as e:  # RunLeasedError is one
            refused.append(e)

    async with anyio.create_task_group() as tg:
        for i, s in enumerate(stores):
            for j in range(3):
                tg.start_soon(open_one, i * 3 + j, s)
    assert len(won) == 1 and len(refused) == 11
    record = await stores[0].get_run("race")
    assert record is not None and record.prompt == f"p{won[0]}"
    for s in stores:
        await s.aclose()
