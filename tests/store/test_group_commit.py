"""Group commit (``hpd_agent.store._group``): many runs' writes due at once, one commit.

On SQLite and PostgreSQL: a lone run never waits for a batch; concurrent runs' writes are
committed together, each writer released when its own write is durable; a batch holding a
stale run's writes refuses exactly those and commits the others; and a process that dies
at a batch's commit points (``group_crash.py``, a real child process) leaves exactly the
batches committed before, or up to, that one (a run whose start was not committed does not
exist, and has done nothing), and resuming the runs (starting anew those that do not
exist) neither loses nor repeats anything.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent import RunLeasedError
from hpd_agent.store import JournalEntry, SQLiteStore, Store
from hpd_agent.store._fence import Fence, fencing

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import group_crash  # noqa: E402


@pytest.fixture(params=["sqlite", "sqlite-os", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param.startswith("sqlite"):  # ``open_grouping``: "-os" is durability="os"
        return str(tmp_path / f"runs{request.param.removeprefix('sqlite')}.db")
    return str(request.getfixturevalue("fresh_postgres"))


def _group(store: Store) -> object:
    return getattr(store, "_group", None)


async def _four_runs_at_once(agent: Any, store: Store) -> None:
    """Four runs at once, each of which must complete with its whole journal."""
    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(lambda i=i: agent.run(f"c{i}", store=store, run_id=f"c{i}"))
    for i in range(4):
        record = await store.get_run(f"c{i}")
        assert record is not None and record.status == "completed"
        journal = await store.journal(f"c{i}")
        assert sorted(e.kind for e in journal.values()).count("tool") == group_crash.TURNS


async def test_a_lone_run_commits_at_once_and_concurrent_runs_commit_together(
    location: str, tmp_path: Path
) -> None:
    store = group_crash.open_grouping(location)
    try:
        agent = group_crash.build(str(tmp_path))
        result = await agent.run("alone", store=store, run_id="alone")
        assert result.output == "done"
        assert _group(store) is None  # no batch was ever made for it

        await _four_runs_at_once(agent, store)
        group = _group(store)
        assert group is not None
        # 4 runs x (open, 3 model responses, 3 tool results, ...) in far fewer commits.
        assert group.batches > 0 and group.ops >= 2 * group.batches  # type: ignore[attr-defined]
    finally:
        await store.aclose()


async def test_sqlite_on_the_event_loop_untuned_commits_every_write_at_once(
    tmp_path: Path,
) -> None:
    """With the default durability a SQLite commit is made at once on the event loop:
    without the collector tuned (``gc_tuning=False``) a batch would only make each write
    wait, so concurrent runs never make one, and each run's journal is whole."""
    store = SQLiteStore(tmp_path / "runs.db", gc_tuning=False)
    try:
        assert store.capabilities().groups is None
        await _four_runs_at_once(group_crash.build(str(tmp_path)), store)
        assert _group(store) is None
    finally:
        await store.aclose()


async def test_a_stale_run_in_a_batch_is_refused_alone(location: str) -> None:
    """Three runs' writes in one batch; one run's lease was taken over meanwhile: its
    writes are refused (``RunLeasedError``, nothing written), the others commit."""
    store = group_crash.open_grouping(location)
    other = group_crash.open_grouping(location)  # another process's store object
    try:
        leases = {r: await store.take_lease(r, f"h-{r}", 30.0) for r in ("a", "b", "c")}
        # b's holder stalled past its lease: another holder took it over (a new token).
        await _expire(store, "b")
        await other.take_lease("b", "h-new", 30.0)
        outcome: dict[str, object] = {}

        async def write(run_id: str) -> None:
            fence = Fence(run_id, leases[run_id].fence)
            entries = [
                JournalEntry(key=f"{run_id}@0", kind="model", value={"text": run_id}),
                JournalEntry(key=f"{run_id}@1", kind="tool", value={"result": run_id}),
            ]
            with fencing(fence):
                waiter = store.journal_group(run_id, entries)  # type: ignore[attr-defined]
                assert waiter is not None  # the store drives three runs: it groups
                try:
                    await waiter
                    outcome[run_id] = "written"
                except RunLeasedError as e:
                    outcome[run_id] = e

        async with anyio.create_task_group() as tg:
            for run_id in ("a", "b", "c"):
                tg.start_soon(write, run_id)
        assert outcome["a"] == outcome["c"] == "written"
        assert isinstance(outcome["b"], RunLeasedError) and outcome["b"].lost
        assert _group(store).batches == 1  # type: ignore[union-attr]  # one commit for all
        assert set(await store.journal("a")) == {"a@0", "a@1"}
        assert set(await store.journal("c")) == {"c@0", "c@1"}
        assert await store.journal("b") == {}  # nothing of the stale run, not even its first
    finally:
        await other.aclose()
        await store.aclose()


async def _expire(store: Store, run_id: str) -> None:
    """Make ``run_id``'s lease lapse (its holder stalled past it)."""
    sql = "UPDATE hpd_leases SET expires_at = 1 WHERE run_id = " + store.dialect.mark  # type: ignore[attr-defined]
    await store._point(lambda conn: store._query(conn, sql, (run_id,)))  # type: ignore[attr-defined]


def _env(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE), str(HERE.parent)]),
        "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
    }


@pytest.mark.parametrize("point", ["before", "after"])
@pytest.mark.parametrize("batch", [1, 2, 3])
async def test_a_crash_at_a_batch_commit_loses_and_repeats_nothing(
    location: str, point: str, batch: int, tmp_path: Path
) -> None:
    """Batch 1 always holds a run's start (the first write grouped is the start of the
    second run to start), the next ones mostly journal rows. Which batch holds what depends
    on the scheduling: on a loaded machine a run's start may commit (alone or in a batch)
    after several batches, and a run may not exist when the process dies."""
    if location.endswith(".db"):
        await group_crash.open_grouping(location).aclose()  # the file exists before the child
    child = await anyio.run_process(
        [sys.executable, str(HERE / "group_crash.py"), location, point, str(batch), str(tmp_path)],
        env=_env(tmp_path),
        check=False,
    )
    assert child.returncode == group_crash.CRASHED, child.stderr.decode()[-2000:]
    batches = [json.loads(line) for line in (tmp_path / "batches.txt").read_text().splitlines()]
    assert batches[-1]["batch"] == batch
    committed = [b for b in batches if b["batch"] < batch or point == "after"]
    lost = [] if point == "after" else batches[-1:]
    runs = [f"r{i}" for i in range(group_crash.RUNS)]

    store = group_crash.open_grouping(location)
    try:
        # Exactly what is durable: every row, start and end of the batches committed, none
        # of the other's.
        durable: set[tuple[str, str]] = set()
        for run_id in runs:
            durable |= {(run_id, key) for key in await store.journal(run_id)}
        assert {(r[0], r[1]) for b in committed for r in b["rows"]} <= durable
        assert not {(r[0], r[1]) for b in lost for r in b["rows"]} & durable
        records = {run_id: await store.get_run(run_id) for run_id in runs}
        started = {run_id for run_id, record in records.items() if record is not None}
        ended = {r for r, record in records.items() if record and record.status == "completed"}
        assert {run_id for b in committed for run_id in b["starts"]} <= started
        assert not {run_id for b in lost for run_id in b["starts"]} & started
        assert {run_id for b in committed for run_id in b["ends"]} <= ended
        assert not {run_id for b in lost for run_id in b["ends"]} & ended
        assert not {run_id for run_id, _ in durable} - started
        effects_file = tmp_path / "effects.txt"  # none when the crash came before any step
        effects_before = Counter(effects_file.read_text().split() if effects_file.exists() else ())
        done_before = _work_done(committed)  # steps whose result was durable at the crash
        assert done_before <= set(effects_before)
        # A run that does not exist did nothing (its start came before all its work).
        assert not {key.split(":")[0] for key in effects_before} - started
        # Nobody went on before the batch it waited for was released: no step asked for
        # by a model response of the last batch ran (committed or not).
        asked = _steps_asked(batches[-1]["rows"])
        assert not asked & set(effects_before)

        # Resume every run (start anew one that does not exist): all finish, each tool call
        # journaled once, and a step whose result was durable at the crash does not run
        # again.
        agent = group_crash.build(str(tmp_path))
        for run_id in runs:
            if run_id in started:
                result = await agent.resume(run_id, store=store)
            else:
                result = await agent.run(run_id, store=store, run_id=run_id)
            assert result.output == "done", result
        effects = Counter((tmp_path / "effects.txt").read_text().split())
        keys = {f"r{i}:{t}" for i in range(group_crash.RUNS) for t in range(group_crash.TURNS)}
        assert set(effects) == keys  # nothing lost: every step was done
        for key in done_before:
            assert effects[key] == 1, key  # durable: not redone
        for key, count in effects.items():
            assert count - effects_before.get(key, 0) <= 1  # redone at most once, if lost
        for i in range(group_crash.RUNS):
            journal = await store.journal(f"r{i}")
            assert sum(e.kind == "tool" for e in journal.values()) == group_crash.TURNS
    finally:
        await store.aclose()


def _work_done(batches: list[dict[str, Any]]) -> set[str]:
    """The steps ("r0:1") whose tool result is among ``batches``' rows."""
    return {
        json.loads(value)["result"].removeprefix("did ")
        for b in batches
        for _, _, kind, value in b["rows"]
        if kind == "tool"
    }


def _steps_asked(rows: list[list[str]]) -> set[str]:
    """The steps ("r0:1") the model responses among ``rows`` call for."""
    asked: set[str] = set()
    for _, _, kind, value in rows:
        if kind == "model":
            for call in json.loads(value)["tool_calls"]:
                arguments = call["arguments"]
                if isinstance(arguments, str):
                    arguments = json.loads(arguments)
                asked.add(arguments["key"])
    return asked
