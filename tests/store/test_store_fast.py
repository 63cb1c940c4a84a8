"""The stores' fast paths: durability levels, statements on the event loop that yield to a
lock held elsewhere, and wake-ups through the SQLite store's sockets."""

from __future__ import annotations

import os
import socket
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)
from anyio import wait_all_tasks_blocked

from hpd_agent import Agent, RunResult
from hpd_agent.exceptions import UserError
from hpd_agent.messages import Message, ToolCall
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.store import JournalEntry, RequestRecord, SQLiteStore, open_store
from hpd_agent.store._sqlite_io import notify_all
from hpd_agent.testing import FunctionModel
from hpd_agent.testing.store_contract import question

pytestmark = pytest.mark.anyio


def _in_wal_mode(path: Path) -> bool:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


async def test_durability_levels_set_the_sync_mode(tmp_path: Path) -> None:
    for level, expected in (("process", 1), ("os", 2)):  # NORMAL, FULL
        store = SQLiteStore(tmp_path / f"{level}.db", durability=level)  # type: ignore[arg-type]
        try:
            mode = await store._run(  # pyright: ignore[reportPrivateUsage]
                lambda conn: conn.execute("PRAGMA synchronous").fetchone()[0]
            )
            assert mode == expected
            await store.journal_put("run_1", JournalEntry(key="k", kind="tool", value={"a": 1}))
            assert (await store.journal("run_1"))["k"].value == {"a": 1}
        finally:
            await store.aclose()
        assert _in_wal_mode(tmp_path / f"{level}.db")
    store = open_store(tmp_path / "via_open.db", durability="os")
    assert isinstance(store, SQLiteStore) and store.durability == "os"
    await store.aclose()


def test_bad_durability_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="durability"):
        SQLiteStore(tmp_path / "x.db", durability="disk")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="SQLite store option"):
        open_store("postgresql://127.0.0.1:1/none", durability="os")


async def test_sqlite_write_waits_for_another_writers_lock(tmp_path: Path) -> None:
    """A journal write on the event loop meets a file locked by another process's
    transaction: it neither fails nor writes early; it lands after that commit."""
    store = SQLiteStore(tmp_path / "runs.db")
    other = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO hpd_journal VALUES ('run_1', 'first', 'tool', '{}')")
    done = anyio.Event()

    async def write() -> None:
        await store.journal_put("run_1", JournalEntry(key="second", kind="tool", value={}))
        done.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            await wait_all_tasks_blocked()
            assert not done.is_set()  # waiting for the lock in the worker thread
            other.execute("COMMIT")
            with anyio.fail_after(10):
                await done.wait()
        assert set(await store.journal("run_1")) == {"first", "second"}
    finally:
        other.close()
        await store.aclose()


async def test_postgres_resolve_waits_for_a_row_lock(fresh_postgres: str) -> None:  # noqa: F811
    """A resolve on the event loop meets a row locked by another transaction: it gives up
    after a few milliseconds, goes to the worker thread, and resolves after that commit."""
    import psycopg

    from hpd_agent.store import PostgresStore

    store = PostgresStore(fresh_postgres)
    await store.add_request(question("req_lock"))
    other = psycopg.connect(fresh_postgres)
    other.execute("SELECT id FROM hpd_requests WHERE id = 'req_lock' FOR UPDATE")
    resolved: list[RequestRecord] = []

    async def answer() -> None:
        resolved.append(await store.resolve("req_lock", "answered", "FastAPI"))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(answer)
            await wait_all_tasks_blocked()
            assert not resolved
            other.commit()
        assert resolved[0].status == "answered"
        stored = await store.get_request("req_lock")
        assert stored is not None and stored.answer == "FastAPI"
    finally:
        other.close()
        await store.aclose()


@pytest.mark.parametrize("depth", ["near", "deep"])
async def test_sqlite_answer_from_another_store_wakes_by_socket(tmp_path: Path, depth: str) -> None:
    """With polling all but off, an answer written through another store object on the file
    (as another process would) wakes the waiter through the wake-up socket, also where the
    socket's full name would be too long for ``sun_path`` (a store deep in a folder tree)."""
    if depth == "deep":
        tmp_path = tmp_path / ("d" * 60) / ("e" * 60)
        tmp_path.mkdir(parents=True)
    waiting = SQLiteStore(tmp_path / "runs.db", poll_interval=3600)
    answering = SQLiteStore(tmp_path / "runs.db")
    await waiting.add_request(question("req_w"))
    got: list[RequestRecord] = []
    woken = anyio.Event()

    async def wait() -> None:
        got.append(await waiting.wait_resolved("req_w"))
        woken.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await wait_all_tasks_blocked()
            assert len(os.listdir(tmp_path / "runs.db.wake")) == 1
            # Well under the full look every second: only the datagram can wake it now.
            with anyio.fail_after(0.5):
                await answering.resolve("req_w", "answered", "FastAPI")
                await woken.wait()
        assert got[0].answer == "FastAPI"
    finally:
        await waiting.aclose()
        await answering.aclose()
    assert not (tmp_path / "runs.db.wake").exists()  # the socket went with its store


async def test_sqlite_without_a_socket_falls_back_to_polling(tmp_path: Path) -> None:
    deep = tmp_path
    (deep / "runs.db.wake").write_text("not a folder")  # no socket can be bound there
    waiting = SQLiteStore(deep / "runs.db", poll_interval=0.01)
    answering = SQLiteStore(deep / "runs.db")
    await waiting.add_request(question("req_p"))
    got: list[RequestRecord] = []

    async def wait() -> None:
        got.append(await waiting.wait_resolved("req_p"))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await wait_all_tasks_blocked()
            await answering.resolve("req_p", "answered", "Express")
        assert got[0].answer == "Express"
        assert (deep / "runs.db.wake").read_text() == "not a folder"
    finally:
        await waiting.aclose()
        await answering.aclose()


def test_a_dead_processes_socket_is_removed(tmp_path: Path) -> None:
    folder = tmp_path / "runs.db.wake"
    folder.mkdir()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(str(folder / "1-dead"))
    dead.close()  # bound, then gone without removing its file: a killed process
    live = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    live.bind(str(folder / "2-live"))
    try:
        notify_all(str(folder), "req_x")
        assert os.listdir(folder) == ["2-live"]
        assert live.recv(100) == b"req_x"
    finally:
        live.close()


async def test_postgres_journal_write_waits_for_a_row_lock(fresh_postgres: str) -> None:  # noqa: F811
    """The journal write on the event loop (libpq's prepared statement) meets a row another
    transaction is writing: it gives up, goes to the worker thread, and lands after."""
    import psycopg

    from hpd_agent.store import PostgresStore

    store = PostgresStore(fresh_postgres)
    await store.journal_put("run_1", JournalEntry(key="warm", kind="tool", value={}))
    other = psycopg.connect(fresh_postgres)
    other.execute("INSERT INTO hpd_journal VALUES ('run_1', 'k', 'tool', '\"theirs\"')")
    done = anyio.Event()

    async def write() -> None:
        await store.journal_put("run_1", JournalEntry(key="k", kind="tool", value="ours"))
        done.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            await wait_all_tasks_blocked()
            assert not done.is_set()
            other.commit()
            with anyio.fail_after(10):
                await done.wait()
        assert (await store.journal("run_1"))["k"].value == "ours"
    finally:
        other.close()
        await store.aclose()


async def test_postgres_resolve_in_one_statement_keeps_its_promises(
    fresh_postgres: str,  # noqa: F811
) -> None:
    """The one-statement resolve merges the context, refuses a second answer, keeps text
    jsonb would refuse, and names a request whose stored context is not JSON."""
    import psycopg

    from hpd_agent.exceptions import RequestAlreadyAnsweredError, StoreCorruptError
    from hpd_agent.store import PostgresStore

    first, second = PostgresStore(fresh_postgres), PostgresStore(fresh_postgres)
    try:
        await first.add_request(question("req_a"))
        results = await _race(first, second, "req_a")
        assert sorted(type(r).__name__ for r in results) == [
            "RequestAlreadyAnsweredError",
            "RequestRecord",
        ]
        won = next(r for r in results if isinstance(r, RequestRecord))
        assert won.context == {"channel": "test", "by": won.answer}
        stored = await second.get_request("req_a")
        assert stored is not None and stored == won
        with pytest.raises(RequestAlreadyAnsweredError):
            await first.resolve("req_a", "answered", "again")

        await first.add_request(question("req_nul"))
        done = await first.resolve("req_nul", "answered", "x", context={"note": "a\x00b"})
        assert done.context["note"] == "a\x00b"

        await first.add_request(question("req_bad"))
        with psycopg.connect(fresh_postgres, autocommit=True) as conn:
            conn.execute("UPDATE hpd_requests SET context = 'not json' WHERE id = 'req_bad'")
        with pytest.raises(StoreCorruptError, match="req_bad"):
            await first.resolve("req_bad", "answered", "x")
    finally:
        await first.aclose()
        await second.aclose()


async def _race(a: Any, b: Any, request_id: str) -> list[Any]:
    results: list[Any] = []

    async def answer(store: Any, text: str) -> None:
        try:
            results.append(await store.resolve(request_id, "answered", text, context={"by": text}))
        except Exception as e:  # the loser's refusal is the point
            results.append(e)

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer, a, "from a")
        tg.start_soon(answer, b, "from b")
    return results


async def test_postgres_write_sent_ahead_is_confirmed_before_the_next_statement(
    fresh_postgres: str,  # noqa: F811
) -> None:
    """A tool result sent without waiting for its reply is committed by the time the store's
    next statement returns, and a failed one fails that statement, naming the entry; the
    store stays usable."""
    import psycopg

    from hpd_agent.exceptions import StoreUnavailableError
    from hpd_agent.store import PostgresStore

    store = PostgresStore(fresh_postgres)
    try:
        assert store.journal_send_nowait("run_1", JournalEntry(key="t1", kind="tool", value="a"))
        assert store.journal_send_nowait("run_1", JournalEntry(key="t2", kind="tool", value="b"))
        await store.add_request(question("req_1"))  # the next statement: reads both replies
        with psycopg.connect(fresh_postgres, autocommit=True) as other:
            rows = other.execute(
                "SELECT key, value FROM hpd_journal WHERE run_id = 'run_1' ORDER BY key"
            ).fetchall()
            assert rows == [("t1", '"a"'), ("t2", '"b"')]
            other.execute("ALTER TABLE hpd_journal ADD CONSTRAINT no_bad CHECK (key <> 'bad_key')")
        assert store.journal_send_nowait("run_1", JournalEntry(key="bad_key", kind="tool", value=1))
        assert store.journal_send_nowait("run_1", JournalEntry(key="t3", kind="tool", value="c"))
        with pytest.raises(StoreUnavailableError, match="'bad_key' of run 'run_1'"):
            await store.get_request("req_1")
        assert (await store.get_request("req_1")) is not None
        journal = await store.journal("run_1")
        assert sorted(journal) == ["t1", "t2", "t3"]
    finally:
        await store.aclose()


async def test_postgres_write_sent_ahead_that_meets_a_row_lock_lands_after_it(
    fresh_postgres: str,  # noqa: F811
) -> None:
    """A write sent ahead meets a row another transaction is writing: it gives up on the
    event loop and is written again in the worker thread, after the lock, before the next
    statement goes on."""
    import psycopg

    from hpd_agent.store import PostgresStore

    store = PostgresStore(fresh_postgres)
    other = psycopg.connect(fresh_postgres)
    try:
        await store.journal_put("run_1", JournalEntry(key="warm", kind="tool", value={}))
        other.execute("INSERT INTO hpd_journal VALUES ('run_1', 'k', 'tool', '\"theirs\"')")
        assert store.journal_send_nowait("run_1", JournalEntry(key="k", kind="tool", value="ours"))
        done = anyio.Event()

        async def next_statement() -> None:
            await store.add_request(question("req_1"))
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(next_statement)
            await wait_all_tasks_blocked()
            assert not done.is_set()  # waits for the rewrite, which waits for the lock
            other.commit()
            with anyio.fail_after(10):
                await done.wait()
        assert (await store.journal("run_1"))["k"].value == "ours"
        assert (await store.get_request("req_1")) is not None
    finally:
        other.close()
        await store.aclose()


def _steady_agent(turns: int, look: Callable[[], None] | None = None) -> Agent:
    """``turns`` tool calls, then "done"; each model call lets the other runs go first (and
    calls ``look`` first)."""

    async def model(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        if look is not None:
            look()
        await anyio.lowlevel.checkpoint()  # a model's round trip: the runs interleave
        done = sum(1 for m in messages if m.kind == "tool")
        if done == turns:
            return ModelResponse(text="done")
        return ModelResponse(tool_calls=(ToolCall(id=f"c{done}", name="step", arguments="{}"),))

    async def step() -> str:
        """One step."""
        return "ok"

    return Agent("steady", model=FunctionModel(model), tools=[step], max_turns=turns + 1)


class _WalWatch:
    """What a store's WAL file does while runs commit, looked at before each model call:
    how often it starts again from its beginning (its header's salts change each time, and
    only then), and its size: the largest, and the smallest once it has started again."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(f"{path}-wal", os.O_RDONLY)
        self._salts = self._read_salts()
        self.restarts = 0
        self.largest = self.size = os.fstat(self._fd).st_size
        self.after_restart: int | None = None

    def _read_salts(self) -> bytes:
        return os.pread(self._fd, 8, 16)  # the WAL header's salt-1 and salt-2

    def look(self) -> None:
        salts = self._read_salts()
        if salts != self._salts:
            self._salts = salts
            self.restarts += 1
        self.size = size = os.fstat(self._fd).st_size
        self.largest = max(self.largest, size)
        if self.restarts:
            self.after_restart = min(size, self.after_restart or size)

    def close(self) -> None:
        os.close(self._fd)


async def test_wal_stays_bounded_under_a_steady_stream_of_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs committing without a pause: a PASSIVE checkpoint never catches up with the last
    frame, so without a restart no writer ever starts the WAL again and the file grows with
    every commit (about 8 KB each: a GB for 10,000 runs). The checkpointer restarts a WAL
    grown past ``RESTART_FRAMES``: while the commits go on, the WAL starts again from its
    beginning, over and over, and the file is cut back to ``journal_size_limit``; every
    run's journal is whole.

    Counted, not timed: runs keep starting until the WAL has started again five times,
    however late the checkpointer's thread gets to run on a loaded machine. It does about
    every 30 runs here; without the restart, only in a rare lull (0 to 2 times in 400 runs
    measured on a loaded machine), and the WAL would reach ~80 MB in the 600 runs allowed.
    The runs have different lengths, so they do not all end (a lull) together."""
    from hpd_agent.store import _sqlite_io, sqlite

    monkeypatch.setattr(_sqlite_io, "RESTART_FRAMES", 64)  # 256 KiB
    limit = 1 << 20
    monkeypatch.setattr(sqlite, "WAL_SIZE_LIMIT", limit)
    most, restarts = 600, 5
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    await store.journal_put("first", JournalEntry(key="k", kind="step", value=0))  # the WAL
    wal = _WalWatch(path)
    results: list[tuple[RunResult, int]] = []
    started = 0

    async def runs(turns: int) -> None:
        nonlocal started
        agent = _steady_agent(turns, wal.look)
        while wal.restarts < restarts and started < most:
            started += 1
            results.append((await agent.run("go", store=store), turns))

    try:
        async with anyio.create_task_group() as tg:
            for k in range(50):
                tg.start_soon(runs, 4 + k % 9)
        commits = sum(2 * turns + 2 for _, turns in results)
        assert wal.restarts >= restarts, f"{wal.restarts} restarts in {commits} commits"
        assert [r.output for r, _ in results] == ["done"] * len(results)
        for r, turns in results:
            assert len(await store.journal(r.run_id)) == 2 * turns + 1
        # Between two restarts the WAL outgrew the limit, and was cut back to it.
        assert wal.largest > limit
        assert wal.after_restart is not None and wal.after_restart <= limit
    finally:
        wal.close()
        await store.aclose()


async def test_a_reader_holding_the_wal_does_not_hold_writers_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's long read keeps the WAL from starting again. The checkpointer's
    RESTART, which holds writers off while it waits for readers, gives up after a moment
    and tries again at its next nudge: the runs all finish meanwhile, their writes going
    through the worker thread while a RESTART holds the lock, and every journal is whole."""
    from hpd_agent.store import _sqlite_io

    monkeypatch.setattr(_sqlite_io, "RESTART_FRAMES", 16)
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    reader = sqlite3.connect(path, isolation_level=None)
    results: list[RunResult] = []

    async def one() -> None:
        results.append(await _steady_agent(6).run("go", store=store))

    try:
        await store.journal("run_0")  # the tables exist
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM hpd_journal").fetchone()  # a snapshot held
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(60):
                    tg.start_soon(one)
        assert [r.output for r in results] == ["done"] * 60
        for r in results:
            assert len(await store.journal(r.run_id)) == 2 * 6 + 1
    finally:
        reader.close()
        await store.aclose()
