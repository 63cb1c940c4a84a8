"""A ``PostgresStore`` whose statement gave up, failed or lost its connection goes on.

On a loaded machine a statement on the event loop's connection exceeds its few milliseconds
(``statement_timeout``, ``lock_timeout``) and gives up; so does one that meets a lock held
elsewhere, which is how these tests make it happen, on purpose and every time: another
connection holds a table's lock while the store works. The work then waits in the worker
thread; nothing fails, and the same store object answers and resumes afterwards. A
connection whose server process is gone fails the statement on it once; the next
statement gets a new connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import durable_agents
import psycopg
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)
from psycopg import sql

from hpd_agent import RunResult
from hpd_agent.exceptions import StoreUnavailableError
from hpd_agent.store import JournalEntry, PostgresStore, respond
from hpd_agent.testing.store_contract import question

pytestmark = pytest.mark.anyio

DONE = "Orchestrator: built with Flask"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def other(fresh_postgres: str) -> Iterator[psycopg.Connection[Any]]:  # noqa: F811
    """Another session (a transaction of its own, like another process's)."""
    conn = psycopg.connect(fresh_postgres)
    yield conn
    conn.close()


def _waiting_for_a_lock(conn: psycopg.Connection[Any]) -> bool:
    found = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
    return bool(found and found[0])


async def _while_locked(
    other: psycopg.Connection[Any], table: str, work: Callable[[], Awaitable[Any]]
) -> Any:
    """Run ``work`` while ``other`` holds ``table`` locked; release the lock once ``work``
    waits for it (or has ended: it must not have failed)."""
    other.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(table)))
    done: list[Any] = []

    async def run() -> None:
        done.append(await work())

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            while not done and not _waiting_for_a_lock(other):
                await anyio.wait_all_tasks_blocked()
            other.commit()
    return done[0]


async def test_a_lease_taken_while_its_table_is_locked_waits_then_the_store_goes_on(
    fresh_postgres: str,  # noqa: F811
    other: psycopg.Connection[Any],
    workdir: Path,
) -> None:
    # The take's statements are prepared inside its transaction, where a PREPARE that gives
    # up fails the transaction: it must be done again, not go on in the failed one.
    store = PostgresStore(fresh_postgres)
    try:
        lease = await _while_locked(other, "hpd_leases", lambda: store.take_lease("r", "me", 30))
        assert (lease.run_id, lease.holder) == ("r", "me")
        # The same store object: a durable run asks, is answered, and resumed.
        first = await durable_agents.build().run("Build", store=store, on_unhandled="interrupt")
        (pending,) = first.pending
        await respond(store, pending.request_id, "Flask")
        resumed = await durable_agents.build().resume(first.run_id, store=store)
        assert (resumed.status, resumed.output) == ("completed", DONE)
    finally:
        await store.aclose()


async def test_a_run_whose_journal_table_is_locked_waits_then_is_resumed(
    fresh_postgres: str,  # noqa: F811
    other: psycopg.Connection[Any],
    workdir: Path,
) -> None:
    # The first journal write of a store object on the event loop's connection meets the
    # lock: it waits in the worker thread; it neither fails the run nor is lost.
    store = PostgresStore(fresh_postgres)
    try:

        async def run() -> RunResult:
            return await durable_agents.build().run("Build", store=store, on_unhandled="interrupt")

        first: RunResult = await _while_locked(other, "hpd_journal", run)
        assert first.status == "interrupted"
        (pending,) = first.pending
        resumed = await durable_agents.build().resume(
            first.run_id, store=store, answers={pending.request_id: "Flask"}
        )
        assert (resumed.status, resumed.output) == ("completed", DONE)
        assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]  # once
    finally:
        await store.aclose()


def _kill(other: psycopg.Connection[Any], conn: psycopg.Connection[Any]) -> None:
    """End ``conn``'s server process (as a server restart or an administrator would), and
    wait until it has ended."""
    other.execute("SELECT pg_terminate_backend(%s, 60000)", (conn.info.backend_pid,))
    other.commit()


async def test_a_connection_whose_server_process_ended_is_replaced(
    fresh_postgres: str,  # noqa: F811
    other: psycopg.Connection[Any],
) -> None:
    store = PostgresStore(fresh_postgres)
    try:
        await store.add_request(question("req_1"))
        # The worker thread's connection (listing runs there).
        _kill(other, store._conn)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
        with pytest.raises(psycopg.OperationalError):
            await store.list_requests()
        assert [r.request_id for r in await store.list_requests()] == ["req_1"]
        # The event loop's connection (a point statement runs there, prepared already).
        assert await store.get_request("req_1") is not None
        fast = store._fast.conn  # pyright: ignore[reportPrivateUsage]
        assert fast is not None
        _kill(other, fast)
        with pytest.raises(psycopg.OperationalError):
            await store.get_request("req_1")
        for _ in range(2):  # in the worker thread, then on a new event loop's connection
            found = await store.get_request("req_1")
            assert found is not None and found.status == "pending"
        assert store._fast.conn not in (None, fast)  # pyright: ignore[reportPrivateUsage]
    finally:
        await store.aclose()


async def test_a_lost_listening_connection_is_opened_again(
    fresh_postgres: str,  # noqa: F811
    other: psycopg.Connection[Any],
) -> None:
    store, answering = PostgresStore(fresh_postgres), PostgresStore(fresh_postgres)
    listener = store._listener  # pyright: ignore[reportPrivateUsage]
    try:
        await store.add_request(question("req_1"))
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:

                async def lose_it() -> None:
                    while not listener.listening:
                        await anyio.wait_all_tasks_blocked()
                    _kill(other, listener._conn)  # pyright: ignore[reportPrivateUsage, reportArgumentType]

                tg.start_soon(lose_it)
                with pytest.raises(StoreUnavailableError, match="listening connection"):
                    await store.wait_resolved("req_1")
            # The next wait listens again, and hears the answer from the other store object.
            async with anyio.create_task_group() as tg:
                tg.start_soon(answering.resolve, "req_1", "answered", "Flask")
                record = await store.wait_resolved("req_1")
                assert (record.status, record.answer) == ("answered", "Flask")
    finally:
        await store.aclose()
        await answering.aclose()


async def test_a_group_commit_chunk_that_gave_up_leaves_the_chunks_before_it_done(
    fresh_postgres: str,  # noqa: F811
    other: psycopg.Connection[Any],
) -> None:
    # A batch larger than one pipelined transaction commits chunk by chunk; when a later
    # chunk gives up, the worker thread writes what is left, not again what committed (a
    # run's start written twice would find the run there already).
    from hpd_agent.store._group import GroupOp
    from hpd_agent.store._pg_journal import _CHUNK  # pyright: ignore[reportPrivateUsage]

    store = PostgresStore(fresh_postgres)
    insert = "INSERT INTO hpd_journal (run_id, key, kind, value) VALUES (%s, %s, 'step', '1') "
    insert += "ON CONFLICT (run_id, key) DO NOTHING"

    def once(key: str) -> GroupOp:
        args = ("r", key)

        def apply(conn: Any) -> int:
            return store._query(conn, insert, args).rowcount  # pyright: ignore[reportPrivateUsage]

        return GroupOp(apply, statement=(insert, args), read=lambda rows: rows.rowcount)

    try:
        await store.journal_put("r", JournalEntry(key="locked", kind="tool", value=0))
        ops = [once(f"k{i}") for i in range(_CHUNK)]
        ops.append(GroupOp(None, rows=[("r", "locked", "tool", "1")]))
        other.execute("SELECT 1 FROM hpd_journal WHERE key = 'locked' FOR UPDATE")
        done: list[bool] = []

        async def commit() -> None:
            await store._commit_group(ops)  # pyright: ignore[reportPrivateUsage]
            done.append(True)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(commit)
                while not done and not _waiting_for_a_lock(other):
                    await anyio.wait_all_tasks_blocked()
                other.commit()
        assert [op.result for op in ops[:-1]] == [1] * _CHUNK  # each inserted its row once
        assert all(op.error is None for op in ops)
        assert (await store.journal("r"))["locked"].value == 1
    finally:
        await store.aclose()
