"""What a durable run's Python machinery costs, counted: function calls per run beyond the
same run in memory (issue 37; ``benchmarks/bench_durable_ratio.py --profile`` prints the
figure for W5).

A count, not a time: the machine is shared and a time would be noise, while the calls a run
makes are the same at every run. Each bound sits between what the durable run made before
the seventh pass (docs/performance.md) and what it makes now, so one of the per-run costs
that pass cut coming back (a frame per fact, a shielded scope and a coroutine at the run's
end, a frame per statement, a generator per transaction) fails here.
"""

from __future__ import annotations

import cProfile
import dataclasses
import pstats
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from hpd_agent import Agent, tool
from hpd_agent.messages import Message, ToolCall, Usage
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.run import RunResult
from hpd_agent.store import RunRecord, SQLiteStore, Store
from hpd_agent.store._session import ended
from hpd_agent.testing import FunctionModel

pytestmark = pytest.mark.anyio

RUNS = 30
TURNS = 5

# Calls per run beyond the run in memory (asyncio; W5's agent, runs one after the other).
# Before the seventh pass: sync 686, async 627, exit 596; after: 557, 445, 402.
BOUNDS = {"sync": 620, "async": 535, "exit": 500}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the count is the event loop's too: one loop, one figure


@pytest.fixture(autouse=True)
def _no_process_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs' own calls: no process-wide hook (in a test worker that ran others first, a
    hook left installed or the OpenTelemetry default hook added ~1,460 calls per run)."""
    monkeypatch.setattr("hpd_agent._core.root.process_hooks", list)


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


def _agent() -> Agent:
    def reply(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        usage = Usage(requests=1, input_tokens=10, output_tokens=5)
        if params.turn >= TURNS:
            return ModelResponse(text="done", usage=usage)
        call = ToolCall(id=f"c{params.turn}", name="noop", arguments="{}")
        return ModelResponse(tool_calls=(call,), usage=usage)

    return Agent("loop", model=FunctionModel(reply), tools=[noop], max_turns=TURNS + 1)


async def _calls_per_run(store: Store | None, durability: str = "sync") -> float:
    agent = _agent()
    options = {} if store is None else {"durability": durability}
    await agent.run("go", store=store, **options)  # type: ignore[arg-type]  # warm

    async def runs() -> None:
        for _ in range(RUNS):
            result = await agent.run("go", store=store, **options)  # type: ignore[arg-type]
            assert result.output == "done"

    profile = cProfile.Profile()
    profile.enable()
    await runs()
    profile.disable()
    calls: int = pstats.Stats(profile).total_calls  # pyright: ignore[reportAttributeAccessIssue]
    return calls / RUNS


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_a_durable_run_makes_few_calls_beyond_the_run_in_memory(
    tmp_path: Path, durability: str
) -> None:
    in_memory = await _calls_per_run(None)
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        durable = await _calls_per_run(store, durability)
        journal = await store.journal((await store.list_runs())[-1].run_id)
    finally:
        await store.aclose()
    assert len(journal) == 2 * TURNS + 1  # every fact of the run, whatever the mode
    assert durable - in_memory <= BOUNDS[durability], (durable, in_memory)


def test_a_run_s_end_keeps_every_field_of_its_record_but_what_ended() -> None:
    """``ended`` spells ``dataclasses.replace`` out: a field added to ``RunRecord`` must be
    carried over there too."""
    start = RunRecord(
        run_id="run_1",
        agent_name="a",
        prompt="go",
        history=[{"kind": "user", "content": "hi"}],
        agent_ref="m:a",
        created_at=1.0,
        updated_at=1.0,
    )
    end = ended(start, "completed", "done", None)
    assert end.updated_at > start.updated_at
    changed = {"status": "completed", "output": "done", "error": None}
    for field in dataclasses.fields(RunRecord):
        if field.name in changed:
            assert getattr(end, field.name) == changed[field.name], field.name
        elif field.name != "updated_at":
            assert getattr(end, field.name) == getattr(start, field.name), field.name


async def test_a_question_s_facts_still_go_first_in_mode_async(tmp_path: Path) -> None:
    """The run's end settles at once when nothing of it is in flight, and waits for a batch
    of its own when one is: either way every fact is committed with or before its end."""
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        agent = _agent()
        results = []

        async def one() -> None:
            results.append(await agent.run("go", store=store, durability="async"))

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(one)
        for result in results:
            assert result.output == "done"
            assert len(await store.journal(result.run_id)) == 2 * TURNS + 1
            record = await store.get_run(result.run_id)
            assert record is not None and record.status == "completed"
    finally:
        await store.aclose()


def _rowid(path: Path, run_id: str) -> int | None:
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT rowid FROM hpd_runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else int(row[0])


async def test_sqlite_writes_a_run_s_end_over_the_row_its_start_made(tmp_path: Path) -> None:
    """In place (an UPDATE): ``INSERT OR REPLACE`` deleted the row and inserted it again
    under a new rowid, rewriting the page of the key's index too."""
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        first = await store.open_session(run_id="run_a", agent_name="a", prompt="go", history=None)
        second = await store.open_session(run_id="run_b", agent_name="a", prompt="go", history=None)
        started = _rowid(path, "run_a")
        async with first.held():
            await first.finish(RunResult(run_id="run_a", status="completed", output="done"))
        assert _rowid(path, "run_a") == started  # before: a new rowid, after run_b's
        record = await store.get_run("run_a")
        assert record is not None and (record.status, record.output) == ("completed", "done")
        async with second.held():
            await second.finish(RunResult(run_id="run_b", status="completed", output="done"))
    finally:
        await store.aclose()


async def test_sqlite_writes_a_run_s_end_when_its_row_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        session = await store.open_session(
            run_id="run_a", agent_name="a", prompt="go", history=None
        )
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM hpd_runs WHERE run_id = 'run_a'")
        async with session.held():
            await session.finish(RunResult(run_id="run_a", status="failed", output=None))
        record = await store.get_run("run_a")
        assert record is not None and (record.status, record.prompt) == ("failed", "go")
    finally:
        await store.aclose()
