"""Store capabilities are declared, not guessed: ``Store.capabilities()``.

Each shipped store declares what it implements (and pyright proves it: each field is typed
by its protocol); the journal and the session use what is declared, asked once per run; a
store that declares nothing (a third-party one) runs a durable run through the plain
``Store`` methods: a question, an interrupt and a resume, every journal entry written with
``journal_put``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import durable_agents
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)
from test_lease_renewer import LegacyStore

from hpd_agent.events import ClarificationRequest
from hpd_agent.store import (
    GrantBook,
    Journal,
    JournalBatches,
    JournalBehind,
    JournalGroups,
    JournalSendAhead,
    JournalWriteNow,
    MemoryStore,
    RequestFeed,
    RunLeases,
    SQLiteStore,
    Store,
    StoreCapabilities,
    ThreadTables,
    open_store,
)

pytestmark = pytest.mark.anyio

PROTOCOLS: dict[str, type] = {
    "write_now": JournalWriteNow,
    "batches": JournalBatches,
    "send_ahead": JournalSendAhead,
    "leases": RunLeases,
    "groups": JournalGroups,
    "behind": JournalBehind,
    "threads": ThreadTables,
    "feed": RequestFeed,
    "grants": GrantBook,
}

DECLARED = {
    "memory": {"write_now", "leases", "threads", "feed", "grants"},
    # A commit made at once on the event loop is grouped with the collector tuned (the
    # default; with ``gc_tuning=False`` it would only wait: ``test_gc_tuning``).
    "sqlite": {"write_now", "batches", "leases", "groups", "behind", "threads", "feed", "grants"},
    "sqlite-os": {
        "write_now",
        "batches",
        "leases",
        "groups",
        "behind",
        "threads",
        "feed",
        "grants",
    },
    "postgres": {
        "write_now",
        "batches",
        "send_ahead",
        "leases",
        "groups",
        "behind",
        "threads",
        "feed",
        "grants",
    },
}


def _methods(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


def _make(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "runs.db")
    if kind == "sqlite-os":
        return SQLiteStore(tmp_path / "runs.db", durability="os")
    return open_store(request.getfixturevalue("fresh_postgres"))


@pytest.fixture(params=["memory", "sqlite", "sqlite-os", "postgres"])
async def kind_and_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, Store]]:
    made = _make(request.param, tmp_path, request)
    yield request.param, made
    await made.aclose()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    return tmp_path


def test_the_protocols_group_the_methods_the_runs_use() -> None:
    assert {name: _methods(p) for name, p in PROTOCOLS.items()} == {
        "write_now": {"journal_put_nowait"},
        "batches": {"journal_put_many_nowait", "journal_put_many", "add_request"},
        "send_ahead": {"journal_send_nowait", "journal_confirm"},
        "leases": {"lease_renewer", "open_run", "close_run"},
        "groups": {"journal_group"},
        "behind": {"behind_writer"},
        "threads": {"write_thread", "read_thread", "thread_of"},
        "feed": {"request_changes"},
        "grants": {"find_grant", "add_grant", "list_grants", "revoke_grant"},
    }
    assert [f.name for f in dataclasses.fields(StoreCapabilities)] == list(PROTOCOLS)
    assert StoreCapabilities() == StoreCapabilities(
        write_now=None,
        batches=None,
        send_ahead=None,
        leases=None,
        groups=None,
        behind=None,
        threads=None,
        feed=None,
        grants=None,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        StoreCapabilities().leases = None  # type: ignore[misc]


async def test_each_store_declares_what_it_implements(kind_and_store: tuple[str, Store]) -> None:
    kind, store = kind_and_store
    capabilities = store.capabilities()
    declared = {f.name for f in dataclasses.fields(capabilities) if getattr(capabilities, f.name)}
    assert declared == DECLARED[kind]
    for name in declared:  # the store itself, or an object it holds, implements it
        offered = getattr(capabilities, name)
        assert all(callable(getattr(offered, m, None)) for m in _methods(PROTOCOLS[name])), name
    # ... and what it leaves out, it does not implement (beyond ``Store``'s own methods).
    plain = set(dir(Store))
    for name, protocol in PROTOCOLS.items():
        if name in declared:
            continue
        assert not all(hasattr(store, m) for m in _methods(protocol) - plain), name


async def test_the_journal_holds_entries_back_only_for_batches_not_sent_ahead(
    kind_and_store: tuple[str, Store],
) -> None:
    kind, store = kind_and_store
    journal = Journal(store, "run_1")
    assert journal.capabilities == store.capabilities()
    # PostgreSQL sends entries ahead rather than hold them back; memory writes at once.
    assert journal.holds_for is (store if kind.startswith("sqlite") else None)


async def test_capabilities_are_asked_once_per_session(workdir: Path) -> None:
    asked: list[StoreCapabilities] = []

    class Counting(MemoryStore):
        def capabilities(self) -> StoreCapabilities:
            asked.append(super().capabilities())
            return asked[-1]

    store = Counting()
    result = await durable_agents.build().run("Build", store=store, on_unhandled="interrupt")
    assert result.status == "interrupted" and len(asked) == 1  # not once per write
    (pending,) = result.pending
    resumed = await durable_agents.build().resume(
        result.run_id, store=store, answers={pending.request_id: "Django"}
    )
    assert resumed.status == "completed" and len(asked) == 2


async def test_a_store_declaring_nothing_runs_a_durable_run_through_the_plain_methods(
    kind_and_store: tuple[str, Store], workdir: Path
) -> None:
    _, inner = kind_and_store
    legacy = LegacyStore(inner)
    store: Store = legacy  # type: ignore[assignment]
    result = await durable_agents.build().run("Build", store=store, on_unhandled="interrupt")
    assert result.status == "interrupted"
    (pending,) = result.pending
    assert isinstance(pending, ClarificationRequest)
    assert [r.request_id for r in await inner.list_requests(run_id=result.run_id)] == [
        pending.request_id
    ]
    # Every journal entry went through ``journal_put``, one at a time, and is in the store.
    first_life = list(legacy.journal_puts)
    assert first_life and set(first_life) == set(await inner.journal(result.run_id))
    run = await inner.get_run(result.run_id)
    assert run is not None and run.status == "interrupted"
    assert await inner.get_lease(result.run_id) is None

    resumed = await durable_agents.build().resume(
        result.run_id, store=store, answers={pending.request_id: "FastAPI"}
    )
    assert resumed.status == "completed"
    assert resumed.output == "Orchestrator: built with FastAPI"
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]  # once
    assert len(durable_agents.read_lines("calls.txt")) == 4  # no model call twice
    assert len(legacy.journal_puts) > len(first_life)
    assert set(legacy.journal_puts) == set(await inner.journal(result.run_id))
    run = await inner.get_run(result.run_id)
    assert run is not None and run.status == "completed" and run.output == resumed.output
    assert await inner.get_lease(result.run_id) is None
