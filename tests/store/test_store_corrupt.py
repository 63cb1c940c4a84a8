"""Stores holding rows this version cannot read, and files made by an older version.

The row mapping is shared by SQLite and PostgreSQL (``store/_sql.py``), so every case runs on
a real SQLite file and on a real PostgreSQL server (``tests/_pg.py``): the data is damaged with
plain SQL, as a crash, a bad migration or another program would damage it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent import StoreCorruptError
from hpd_agent.events import ClarificationRequest
from hpd_agent.store import JournalEntry, RequestRecord, RunRecord, SQLiteStore
from hpd_agent.store._sql import SQLStore

pytestmark = pytest.mark.anyio

Execute = Callable[[str], None]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(kind, where): a SQLite file path or a fresh PostgreSQL DSN."""
    if request.param == "sqlite":
        yield "sqlite", tmp_path / "store.db"
    else:
        yield "postgres", request.getfixturevalue("fresh_postgres")


def _open(backend: tuple[str, Any]) -> SQLStore[Any]:
    kind, where = backend
    if kind == "sqlite":
        return SQLiteStore(where)
    from hpd_agent.store import PostgresStore

    return PostgresStore(where)


def _execute(backend: tuple[str, Any], sql: str) -> None:
    """Run raw SQL behind the store's back (``?`` placeholders are not used)."""
    kind, where = backend
    if kind == "sqlite":
        import sqlite3

        with sqlite3.connect(where) as conn:
            conn.executescript(sql)
    else:
        import psycopg

        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]


def _request(rid: str, created: float) -> RequestRecord:
    event = ClarificationRequest(
        run_id="run_1", agent_path=("A",), depth=0, request_id=rid, question="Which?"
    )
    return RequestRecord.from_event(event, now=created)


async def test_one_bad_request_row_is_named_and_hides_no_other(
    backend: tuple[str, Any],
) -> None:
    store = _open(backend)
    try:
        await store.add_request(_request("req_bad", 1.0))
        await store.add_request(_request("req_good", 2.0))
        _execute(backend, "UPDATE hpd_requests SET context = 'oops' WHERE id = 'req_bad'")
        errors: list[StoreCorruptError] = []
        records = await store.list_requests(errors=errors)
        assert [r.request_id for r in records] == ["req_good"]
        (error,) = errors
        assert str(error).startswith("request req_bad (run run_1): column context is not JSON")
        with pytest.raises(StoreCorruptError, match="request req_bad"):
            await store.list_requests()  # without errors=, the bad row raises, named
        with pytest.raises(StoreCorruptError, match="request req_bad"):
            await store.get_request("req_bad")
        nested = "[" * 100_000 + "]" * 100_000
        _execute(backend, f"UPDATE hpd_requests SET payload = '{nested}' WHERE id = 'req_bad'")
        _execute(backend, "UPDATE hpd_requests SET context = '{}' WHERE id = 'req_bad'")
        with pytest.raises(StoreCorruptError, match="column payload is not JSON"):
            await store.get_request("req_bad")
    finally:
        await store.aclose()


async def test_garbage_journal_and_run_rows_are_named(backend: tuple[str, Any]) -> None:
    store = _open(backend)
    try:
        await store.journal_put("run_1", JournalEntry(key="run_1@0", kind="model", value={}))
        _execute(backend, "UPDATE hpd_journal SET value = 'not json' WHERE key = 'run_1@0'")
        with pytest.raises(StoreCorruptError, match="journal entry 'run_1@0' of run run_1"):
            await store.journal("run_1")
        await store.put_run(RunRecord(run_id="run_1", agent_name="A", prompt="p"))
        _execute(backend, "UPDATE hpd_runs SET history = '{' WHERE run_id = 'run_1'")
        with pytest.raises(StoreCorruptError, match="run run_1: column history is not JSON"):
            await store.get_run("run_1")
    finally:
        await store.aclose()


_OLD_RUNS = """CREATE TABLE hpd_runs (
    run_id TEXT PRIMARY KEY, agent_name TEXT NOT NULL, prompt TEXT NOT NULL,
    history TEXT NOT NULL, status TEXT NOT NULL, output TEXT, error TEXT,
    created_at {real} NOT NULL, updated_at {real} NOT NULL
);
INSERT INTO hpd_runs VALUES ('run_old', 'A', 'p', '[]', 'interrupted', NULL, NULL, 1.0, 1.0);"""


async def test_a_store_made_before_agent_ref_is_migrated(backend: tuple[str, Any]) -> None:
    real = "REAL" if backend[0] == "sqlite" else "DOUBLE PRECISION"
    _execute(backend, _OLD_RUNS.format(real=real))
    for _ in range(2):  # opening twice migrates once
        store = _open(backend)
        try:
            old = await store.get_run("run_old")
            assert old is not None and old.status == "interrupted" and old.agent_ref is None
            await store.put_run(RunRecord(run_id="run_new", agent_name="A", prompt="q"))
            await store.put_run(
                RunRecord(run_id="run_new", agent_name="A", prompt="q", agent_ref="m:AGENT")
            )
            new = await store.get_run("run_new")
            assert new is not None and new.agent_ref == "m:AGENT"
        finally:
            await store.aclose()


def test_sqlite_refuses_a_missing_file_without_create(tmp_path: Path) -> None:
    from hpd_agent import StoreUnavailableError

    with pytest.raises(StoreUnavailableError, match="does not exist"):
        SQLiteStore(tmp_path / "typo.db", create=False)
    assert not (tmp_path / "typo.db").exists()
    anyio.run(SQLiteStore(tmp_path / "real.db").aclose)
    anyio.run(SQLiteStore(tmp_path / "real.db", create=False).aclose)
