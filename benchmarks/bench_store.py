"""Store benchmarks (figures, not timed tests). Run: ``python benchmarks/bench_store.py``.

1. Answer-to-resume latency: from the moment an answer is given to the moment the asking
   tool has it, p50/p99 — in-process (no store, MemoryStore, SQLite), and across processes
   (SQLite polling, PostgreSQL LISTEN/NOTIFY; the answer comes from a child process).
2. Memory per pending request with 10,000 questions pending at once (tracemalloc).
3. Journal overhead per turn: a run of many one-tool turns with no store, MemoryStore,
   SQLite and PostgreSQL.

PostgreSQL figures need the server binaries (Debian's ``postgresql``); the script starts a
private cluster on 127.0.0.1 (``benchmarks/peers/_postgres.py``), or takes ``--pg DSN``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks" / "peers")]
os.environ.setdefault("HPD_AGENT_ALLOW_MODEL_REQUESTS", "0")

from hpd_agent import Agent, ClarificationRequest, ToolContext, tool  # noqa: E402
from hpd_agent.messages import Message  # noqa: E402
from hpd_agent.models import ModelRequestParams  # noqa: E402
from hpd_agent.store import MemoryStore, Store, open_store  # noqa: E402
from hpd_agent.testing import FunctionModel, text, tool_call  # noqa: E402


def pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def report(name: str, seconds: Sequence[float]) -> None:
    ms = [s * 1000 for s in seconds]
    print(
        f"  {name:<34} n={len(ms):<5} p50={pct(ms, 50):8.3f} ms  p99={pct(ms, 99):8.3f} ms"
        f"  max={max(ms):8.3f} ms"
    )


# -- 1. latency ------------------------------------------------------------------------------


def asking_agent(n: int, woke: dict[str, float]) -> Agent:
    """One tool call that asks ``n`` questions in a row, noting when each answer arrives."""

    @tool
    async def interview(ctx: ToolContext) -> str:
        """Ask many questions."""
        for i in range(n):
            await ctx.ask(f"Question {i}?")
            woke[f"Question {i}?"] = time.time()
        return "done"

    def model(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        return tool_call("interview") if info.turn == 0 else text("ok")

    return Agent("Asker", model=FunctionModel(model), tools=[interview])


async def latency_in_process(n: int, store: Store | None) -> list[float]:
    woke: dict[str, float] = {}
    answered: dict[str, float] = {}
    agent = asking_agent(n, woke)
    async with agent.stream("go", store=store) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                answered[event.question] = time.time()
                await run.respond(event.request_id, "yes")
    return [woke[q] - answered[q] for q in answered]


# The answerer waits a random 0-50 ms before each answer, as a human (or a web request)
# arrives at no particular moment of the waiter's polling cycle.
ANSWERER = """
import random, sys, time, anyio
from hpd_agent.store import open_store, respond
async def main():
    store = open_store(sys.argv[1]); want = int(sys.argv[2]); done = 0
    while done < want:
        for record in await store.list_requests(run_id="run_bench"):
            await anyio.sleep(random.uniform(0, 0.05))
            await respond(store, record.request_id, "yes", context={"t": time.time()})
            done += 1
        await anyio.sleep(0.001)
    await store.aclose()
anyio.run(main)
"""


async def latency_across_processes(n: int, location: str) -> list[float]:
    woke: dict[str, float] = {}
    store = open_store(location)
    child = await anyio.open_process(
        [sys.executable, "-c", ANSWERER, location, str(n)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=None,
        stderr=None,
    )
    async with child:
        await asking_agent(n, woke).run("go", store=store, run_id="run_bench")
        await child.wait()
    records = await store.list_requests(run_id="run_bench", status="answered")
    await store.aclose()
    return [woke[r.question] - r.context["t"] for r in records]


# -- 2. memory -------------------------------------------------------------------------------


async def memory_per_pending(n: int, store: Store | None) -> tuple[float, float, float]:
    """Memory per pending request with ``n`` pending at once, then the seconds to list them
    (from the store; from ``run.pending`` without one) and to answer them all until the run
    completes."""

    def model(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        if info.turn == 0:
            return [tool_call("ask_user", _id=f"c{i}", question=f"Q{i}?") for i in range(n)]
        return text("ok")

    from hpd_agent import ask_user

    agent = Agent("Wide", model=FunctionModel(model), tools=[ask_user()])
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    seen = 0
    used = listed = answered = 0.0
    async with agent.stream("go", store=store) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                seen += 1
                if seen == n:
                    gc.collect()
                    used = tracemalloc.get_traced_memory()[0] - base
                    tracemalloc.stop()
                    assert len(run.pending) == n
                    start = time.perf_counter()
                    if store is not None:
                        ids = [r.request_id for r in await store.list_requests(status="pending")]
                    else:
                        ids = [e.request_id for e in run.pending]
                    listed = time.perf_counter() - start
                    assert len(ids) == n
                    start = time.perf_counter()
                    for request_id in ids:
                        await run.respond(request_id, "yes")
        answered = time.perf_counter() - start
    assert run.result.status == "completed"
    return used / n, listed, answered


# -- 3. journal overhead ---------------------------------------------------------------------


async def per_turn(turns: int, store_factory: Any) -> float:
    @tool
    def echo(value: int) -> int:
        """Echo.

        Args:
            value: A number.
        """
        return value

    def model(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        return tool_call("echo", value=info.turn) if info.turn < turns else text("end")

    agent = Agent("Looper", model=FunctionModel(model), tools=[echo], max_turns=turns + 1)
    times: list[float] = []
    for _ in range(5):
        store = store_factory()
        start = time.perf_counter()
        await agent.run("go", store=store)
        times.append((time.perf_counter() - start) / (turns + 1))
        if store is not None:
            await store.aclose()
    return statistics.median(times)


@contextlib.contextmanager
def postgres(dsn: str | None) -> Iterator[str | None]:
    if dsn:
        yield dsn
        return
    try:
        from _postgres import ServerUnavailable, server
    except ImportError:
        yield None
        return
    try:
        with server() as started:
            yield started
    except ServerUnavailable as e:
        print(f"  (PostgreSQL skipped: {e})")
        yield None


def fresh_pg(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return dsn


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hpd-bench-"))
    with postgres(args.pg) as pg:
        print(f"answer-to-resume latency ({args.n} answers each)")
        report("in-process, no store", await latency_in_process(args.n, None))
        report("in-process, MemoryStore", await latency_in_process(args.n, MemoryStore()))
        report("in-process, SQLite", await latency_in_process(args.n, open_store(tmp / "a.db")))
        report(
            "other process, SQLite (wake socket)",
            await latency_across_processes(args.n, str(tmp / "b.db")),
        )
        if pg:
            report(
                "in-process, PostgreSQL", await latency_in_process(args.n, open_store(fresh_pg(pg)))
            )
            report(
                "other process, PostgreSQL NOTIFY",
                await latency_across_processes(args.n, fresh_pg(pg)),
            )

        print(f"memory per pending request ({args.pending} pending at once)")
        stores: list[tuple[str, Any]] = [
            ("no store", lambda: None),
            ("MemoryStore", MemoryStore),
            ("SQLite", lambda: open_store(tmp / f"m{time.time_ns()}.db")),
        ]
        if pg:
            stores.append(("PostgreSQL", lambda: open_store(fresh_pg(pg))))
        for name, factory in stores:
            per, listed, answered = await memory_per_pending(args.pending, factory())
            print(
                f"  {name:<34} {per / 1024:8.2f} KiB per pending request; list all "
                f"{listed * 1000:7.1f} ms, answer all until the run completes {answered:6.2f} s"
            )

        print(f"journal overhead per turn ({args.turns} one-tool turns, median of 5 runs)")
        base = await per_turn(args.turns, lambda: None)
        print(f"  {'no store':<34} {base * 1e6:9.1f} us per turn")
        factories: list[tuple[str, Any]] = [
            ("MemoryStore", MemoryStore),
            ("SQLite", lambda: open_store(tmp / f"j{time.time_ns()}.db")),
        ]
        if pg:
            factories.append(("PostgreSQL", lambda: open_store(fresh_pg(pg))))
        for name, factory in factories:
            t = await per_turn(args.turns, factory)
            print(f"  {name:<34} {t * 1e6:9.1f} us per turn (+{(t - base) * 1e6:.1f} us)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="answers per latency figure")
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--pg", help="PostgreSQL DSN (default: start a private server)")
    anyio.run(main, parser.parse_args())
