"""A finished run is freed at once: it leaves no reference cycle for the cyclic GC.

A server driving thousands of runs (docs/performance.md, "Many durable runs at once") keeps
every finished run's objects alive until the next full collection if any of them point back
at their run (the request table at its coordinator, an agent's tool chain at its state): its
memory grows with the runs finished, and each full collection walks them all. Here runs
with hooks, tools and a question, in memory and in each store, must leave no unreachable
cycle behind.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent import Agent, ask_user, tool
from hpd_agent.messages import Message, ToolCall
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.store import MemoryStore, SQLiteStore, Store, open_store
from hpd_agent.testing import FunctionModel, ScriptedHuman

pytestmark = pytest.mark.anyio

RUNS = 20


@tool
async def noop() -> str:
    """Does nothing."""
    return "ok"


def _agent() -> Agent:
    """One agent for every run (building an agent builds its tools' schemas): its model
    answers from the conversation so far, so each run gets the same turns."""

    def turn(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        done = sum(1 for m in messages if m.kind == "tool")
        if done == 0:
            return ModelResponse(tool_calls=(ToolCall(id="c1", name="noop", arguments="{}"),))
        if done == 1:
            ask = '{"question": "Which one?"}'
            return ModelResponse(tool_calls=(ToolCall(id="c2", name="ask_user", arguments=ask),))
        return ModelResponse(text="done")

    return Agent("worker", model=FunctionModel(turn), tools=[noop, ask_user()])


@pytest.fixture
def no_automatic_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture(params=["none", "memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store | None]:
    if request.param == "none":
        yield None
        return
    made: Store
    if request.param == "memory":
        made = MemoryStore()
    elif request.param == "sqlite":
        made = SQLiteStore(tmp_path / "runs.db")
    else:
        made = open_store(request.getfixturevalue("fresh_postgres"))
    try:
        yield made
    finally:
        await made.aclose()


async def test_finished_runs_leave_no_cycle_behind(
    store: Store | None, no_automatic_gc: None
) -> None:
    agent = _agent()

    async def one(i: int) -> None:
        human = ScriptedHuman().answer("Which one?", "this one")
        result = await agent.run("go", store=store, handler=human, run_id=f"run_{i}")
        assert result.output == "done"

    await one(-1)  # warm: imports, caches, the store's tables and connections
    gc.collect()
    for i in range(RUNS):
        await one(i)
    # Fewer unreachable objects than runs: nothing per run (what is left is the event
    # loop's own, once).
    assert gc.collect() < RUNS
