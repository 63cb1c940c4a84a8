"""What 1,000 interleaved runs hold while they wait mid-run (issue 26's memory per run).

``python benchmarks/bench_run_memory.py --store sqlite --runs 1000 [--durability async]`` starts ``--runs`` runs of
the W5 loop agent (5 tool-call turns, each model call yields once), holds every one inside
its fourth model call (in durability mode ``--durability`` with a store), and prints the Python heap they hold (``tracemalloc``, a snapshot
diff) per run, grouped by file and by line, and the objects per run by type
(``gc.get_objects()``). Then it lets them finish. Not a timing: tracemalloc slows the runs.
"""

from __future__ import annotations

import argparse
import collections
import gc
import tempfile
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import anyio

from hpd_agent import Agent, tool
from hpd_agent.messages import Message, ToolCall
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.store import MemoryStore, SQLiteStore, Store


@tool
async def noop() -> str:
    """Trivial tool returning a constant."""
    return "ok"


async def main(kind: str, runs: int, top: int, durability: str = "sync") -> None:
    gate = anyio.Event()
    all_waiting = anyio.Event()
    waiting = 0

    async def loop(messages: Sequence[Message], info: ModelRequestParams) -> ModelResponse:
        nonlocal waiting
        await anyio.lowlevel.checkpoint()
        n = sum(1 for m in messages if m.kind == "tool")
        if n == 3 and not gate.is_set():
            waiting += 1
            if waiting == runs:
                all_waiting.set()
            await gate.wait()
        if n >= 5:
            return ModelResponse(text="done")
        return ModelResponse(tool_calls=(ToolCall(id=f"c{n + 1}", name="noop", arguments="{}"),))

    from hpd_agent.testing import FunctionModel

    agent = Agent("loop", model=FunctionModel(loop), tools=[noop], max_turns=6)
    tmp = tempfile.TemporaryDirectory(prefix="hpd-mem-")
    store: Store | None = {
        "none": lambda: None,
        "memory": MemoryStore,
        "sqlite": lambda: SQLiteStore(Path(tmp.name) / "runs.db"),
    }[kind]()
    outputs: list[str | None] = []
    options = {} if store is None else {"durability": durability}

    async def one() -> None:
        outputs.append((await agent.run("go", store=store, **options)).output)  # type: ignore[arg-type]

    gate.set()
    await one()  # warm: imports, caches, the store's tables
    gate = anyio.Event()
    gc.collect()
    tracemalloc.start(1)
    s0 = tracemalloc.take_snapshot()
    types0 = collections.Counter(type(o).__name__ for o in gc.get_objects())
    async with anyio.create_task_group() as tg:
        for _ in range(runs):
            tg.start_soon(one)
        await all_waiting.wait()
        gc.collect()
        s1 = tracemalloc.take_snapshot()
        types1 = collections.Counter(type(o).__name__ for o in gc.get_objects())
        tracemalloc.stop()
        _report(kind, runs, top, s0, s1, types1 - types0)
        gate.set()
    assert outputs.count("done") == runs + 1, outputs
    if store is not None:
        await store.aclose()
    tmp.cleanup()


def _report(
    kind: str,
    runs: int,
    top: int,
    s0: tracemalloc.Snapshot,
    s1: tracemalloc.Snapshot,
    types: collections.Counter[str],
) -> None:
    by_file = s1.compare_to(s0, "filename")
    print(f"store={kind} runs={runs}: {sum(s.size_diff for s in by_file) / runs:.0f} B per run")
    for group in ("filename", "lineno"):
        print(f"-- by {group}")
        for s in s1.compare_to(s0, group)[:top]:
            frame = s.traceback[0]
            where = frame.filename if group == "filename" else f"{frame.filename}:{frame.lineno}"
            print(f"{s.size_diff / runs:8.0f} B {s.count_diff / runs:5.1f} blocks  {where}")
    print("-- objects per run by type")
    for name, count in types.most_common(top):
        print(f"{count / runs:6.2f} {name}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", choices=("none", "memory", "sqlite"), default="sqlite")
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--durability", choices=("sync", "async", "exit"), default="sync")
    a = p.parse_args()
    anyio.run(main, a.store, a.runs, a.top, a.durability)
