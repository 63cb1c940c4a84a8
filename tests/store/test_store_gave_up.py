"""A ``PostgresStore`` whose statement gave up, failed or lost its connection goes on.

On a loaded machine a statement on the event loop's connection exceeds its few milliseconds
(``statement_timeout``, ``lock_timeout``) and gives up; so does one that meets a lock held
elsewhere, which is how these tests make it happen, on purpose and every time: another
connection holds a table's lock while the store works. The work then waits in the worker
thread; nothing fails, and the same store object answers and resumes afterwards. A
connection whose server process is gone fails the statement on it once; the next
statement gets a new connection.

A write's transaction can also fail as it commits, after its statement succeeded: a
statement timeout firing as the statement ends does that on a loaded machine; a deferred
constraint trigger does it here, every time. Such a write was not written: it is written
again (or, refused, fails the next statement naming it), and the writes around it are
not mistaken for it. A write sent ahead whose reply the lost connection took is written
again on another.
"""

from __future__ import annotations

import os
import socket
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


def _fail_at_commit(
    other: psycopg.Connection[Any], key: str, code: str, message: str, *, times: int = 1
) -> None:
    """Make the transactions that write journal entry ``key`` fail as they commit, the first
    ``times`` of them: the write's statement succeeds, then its transaction is rolled back
    (a deferred constraint trigger). A statement timeout that fires as the statement ends
    does the same on a loaded machine (the server reports it while reading the sync
    message), which is what ``57014`` stands for here."""
    other.execute("CREATE SEQUENCE hpd_test_fails")
    other.execute(
        "CREATE FUNCTION hpd_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.key = TG_ARGV[0] AND nextval('hpd_test_fails') <= TG_ARGV[3]::int THEN "
        "RAISE EXCEPTION USING ERRCODE = TG_ARGV[1], MESSAGE = TG_ARGV[2]; END IF; "
        "RETURN NULL; END $$"
    )
    trigger = sql.SQL(
        "CREATE CONSTRAINT TRIGGER hpd_test_fail AFTER INSERT OR UPDATE ON hpd_journal "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "
        "hpd_test_fail({}, {}, {}, {})"
    ).format(*(sql.Literal(arg) for arg in (key, code, message, str(times))))
    other.execute(trigger)
    other.commit()


async def _journal_rows(store: PostgresStore, run_id: str) -> dict[str, Any]:
    return {key: entry.value for key, entry in (await store.journal(run_id)).items()}


async def test_a_write_sent_ahead_rolled_back_at_its_commit_is_written_again(
    fresh_postgres: str,  # noqa: F811
    other: psycopg.Connection[Any],
) -> None:
    # Its statement succeeded, its transaction gave up as it committed: it was not written,
    # so it is written again; the write sent after it, which was, is not called failed.
    store = PostgresStore(fresh_postgres)
    try:
        _fail_at_commit(other, "late", "57014", "canceling statement due to statement timeout")
        assert store.journal_send_nowait("run_1", JournalEntry(key="late", kind="tool", value=1))
        assert store.journal_send_nowait("run_1", JournalEntry(key="next", kind="tool", value=2))
        await store.add_request(question("req_1"))  # the next statement: reads both replies
        assert await _journal_rows(store, "run_1") == {"late": 1, "next": 2}
        assert (await store.get_request("req_1")) is not None
    finally:
        await store.aclose()


async def test_a_write_sent_ahead_refused_at_its_commit_fails_the_next_statement_naming_it(
    fresh_postgres: str,  # noqa: F811
    other: psycopg.Connection[Any],
) -> None:
    store = PostgresStore(fresh_postgres)
    try:
        _fail_at_commit(other, "bad", "P0001", "refused at its commit", times=1000)
        assert store.journal_send_nowait("run_1", JournalEntry(key="bad", kind="tool", value=1))
        assert store.journal_send_nowait("run_1", JournalEntry(key="next", kind="tool", value=2))
        with pytest.raises(StoreUnavailableError) as failed:
            await store.add_request(question("req_1"))
        assert str(failed.value).startswith(
            "journal entry 'bad' of run 'run_1' was not written: ERROR: refused at its commit"
        )
        await store.add_request(question("req_1"))  # the store goes on
        assert await _journal_rows(store, "run_1") == {"next": 2}
    finally:
        await store.aclose()


async def test_a_connection_lost_before_the_reply_to_a_write_sent_ahead_writes_it_again(
    fresh_postgres: str,  # noqa: F811
) -> None:
    # Whether the server wrote it before the connection went, no one can tell: it is written
    # again on another connection (an upsert: the same row), and the statement goes on.
    store = PostgresStore(fresh_postgres)
    try:
        fast = store._fast.conn  # pyright: ignore[reportPrivateUsage]
        assert fast is not None
        assert store.journal_send_nowait("run_1", JournalEntry(key="k", kind="tool", value="v"))
        with socket.socket(fileno=os.dup(fast.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)  # the connection is lost, the reply with it
        await store.add_request(question("req_1"))
        assert await _journal_rows(store, "run_1") == {"k": "v"}
        assert (await store.get_request("req_1")) is not None
        assert store._fast.conn not in (None, fast)  # pyright: ignore[reportPrivateUsage]
    finally:
        await store.aclose()


async def test_a_group_commit_rolled_back_at_its_commit_is_written_again(
    fresh_postgres: str,  # noqa: F811
    other: psycopg.Connection[Any],
) -> None:
    # Every statement of the pipelined transaction succeeded, and it gave up as it
    # committed: it is not taken for committed, but written again in the worker thread.
    from hpd_agent.store._group import GroupOp

    store = PostgresStore(fresh_postgres)
    try:
        await store.journal_put("r", JournalEntry(key="warm", kind="tool", value=0))
        _fail_at_commit(other, "late", "57014", "canceling statement due to statement timeout")
        ops = [GroupOp(None, rows=[("r", key, "tool", "1")]) for key in ("a", "late", "b")]
        await store._commit_group(ops)  # pyright: ignore[reportPrivateUsage]
        assert all(op.error is None for op in ops)
        assert await _journal_rows(store, "r") == {"warm": 0, "a": 1, "late": 1, "b": 1}
    finally:
        await store.aclose()


async def test_a_write_sent_ahead_not_yet_written_when_the_store_closes_is_written(
    fresh_postgres: str,  # noqa: F811
    other: psycopg.Connection[Any],
) -> None:
    # Its run was cancelled before anything read its reply, and it had given up: the store
    # writes it as it closes, rather than drop it.
    store = PostgresStore(fresh_postgres)
    _fail_at_commit(other, "late", "57014", "canceling statement due to statement timeout")
    assert store.journal_send_nowait("run_1", JournalEntry(key="late", kind="tool", value=1))
    await store.aclose()
    again = PostgresStore(fresh_postgres)
    try:
        assert await _journal_rows(again, "run_1") == {"late": 1}
    finally:
        await again.aclose()
