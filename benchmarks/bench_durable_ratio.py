"""W5 with a store against W5 in memory, in one process: the ratios of issue 37's first target.

    python benchmarks/bench_durable_ratio.py [--rounds 7] [--runs 1000] [--turns 5]
        [--stores none,sqlite,postgres] [--modes sync,async,exit] [--dsn DSN]
        [--profile none|memory|sqlite|postgres]

Each round runs W5 (``--runs`` concurrent ``agent.run()`` of ``--turns`` tool turns each,
``bench_hpd_agent.py W5``) once per store, in a shuffled order, each on fresh storage (a new
SQLite file, a new PostgreSQL database on one private server started for the process unless
``--dsn`` names one). The machine's load drifts between rounds, so each round's durable
time is divided by the same round's in-memory time; the line printed is the median of
those ratios (wall clock and the process's CPU time), with the medians of the times.
``--modes`` runs each store once per durability mode (``Agent.run(..., durability=)``),
one line each (default: ``sync``, the default mode).
``--profile KIND`` instead runs W5 once on that store under cProfile and prints its top
functions by own time and by cumulative time.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE / "peers"), str(_HERE.parent)]

import bench_hpd_agent as bench  # noqa: E402  (imports the harness first: env, network guard)

# isort: split
import argparse  # noqa: E402
import contextlib  # noqa: E402
import cProfile  # noqa: E402
import gc  # noqa: E402
import io  # noqa: E402
import pstats  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import anyio  # noqa: E402

NAMES = {"none": "in memory", "memory": "MemoryStore", "sqlite": "SQLite", "postgres": "PostgreSQL"}


async def w5_once(
    kind: str, dsn: str | None, runs: int, turns: int, mode: str = "sync"
) -> tuple[float, float]:
    """One W5 on fresh storage of ``kind`` in durability ``mode``: (wall seconds, CPU
    seconds) of its runs."""
    agent = bench.loop_agent(turns)
    outputs: list[str | None] = [None] * runs
    options: dict[str, Any] = {} if kind == "none" else {"durability": mode}
    async with bench.open_store(kind, dsn) as store:
        await agent.run("go", store=store, **options)

        async def one(i: int) -> None:
            outputs[i] = (await agent.run("go", store=store, **options)).output

        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        async with anyio.create_task_group() as tg:
            for i in range(runs):
                tg.start_soon(one, i)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert all(o == "done" for o in outputs), outputs[:3]
    return wall, cpu


def profile(kind: str, dsn: str | None, runs: int, turns: int, top: int, mode: str) -> None:
    """Run W5 once on ``kind`` under cProfile; print the top functions."""
    anyio.run(w5_once, kind, dsn, 20, turns, mode)  # warm: imports, statements, caches
    prof = cProfile.Profile()
    prof.enable()
    anyio.run(w5_once, kind, dsn, runs, turns, mode)
    prof.disable()
    calls = pstats.Stats(prof).total_calls  # pyright: ignore[reportAttributeAccessIssue]
    print(f"--- W5 {NAMES[kind]} ({mode}): {calls / runs:.0f} Python function calls per run")
    for order in ("tottime", "cumtime"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).strip_dirs().sort_stats(order).print_stats(top)
        print(f"--- W5 {NAMES[kind]} ({mode}), {runs} runs, top {top} by {order}")
        print(out.getvalue().split("\n", 6)[-1].rstrip())


def measure(
    stores: Sequence[str], modes: Sequence[str], dsn: str | None, a: argparse.Namespace
) -> None:
    lines = [(k, "sync") if k == "none" else (k, m) for k in stores for m in modes]
    lines = list(dict.fromkeys(lines))
    walls: dict[tuple[str, str], list[float]] = {k: [] for k in lines}
    cpus: dict[tuple[str, str], list[float]] = {k: [] for k in lines}
    rng = random.Random(a.seed)
    for _ in range(a.rounds):
        order = list(lines)
        rng.shuffle(order)
        for kind, mode in order:
            wall, cpu = anyio.run(w5_once, kind, dsn, a.runs, a.turns, mode)
            walls[kind, mode].append(wall)
            cpus[kind, mode].append(cpu)
    base_w, base_c = walls["none", "sync"], cpus["none", "sync"]
    print(f"W5 {a.runs} runs x {a.turns} turns, {a.rounds} rounds (medians; ratio per round)")
    for kind, mode in lines:
        w, c = walls[kind, mode], cpus[kind, mode]
        name = NAMES[kind] if kind == "none" else f"{NAMES[kind]} {mode}"
        line = f"  {name:<18} wall {statistics.median(w) * 1e3:8.1f} ms"
        line += f"  cpu {statistics.median(c) * 1e3:8.1f} ms"
        if kind != "none":
            rw = [x / y for x, y in zip(w, base_w, strict=True)]
            rc = [x / y for x, y in zip(c, base_c, strict=True)]
            line += f"  ratio wall {statistics.median(rw):5.2f}x [{min(rw):.2f}-{max(rw):.2f}]"
            line += f"  cpu {statistics.median(rc):5.2f}x"
        print(line)


def main(argv: Sequence[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--runs", type=int, default=1000, help="concurrent runs per W5")
    p.add_argument("--turns", type=int, default=5, help="tool turns per run")
    p.add_argument("--stores", default="none,sqlite,postgres", help="comma-separated")
    p.add_argument("--dsn", default=None, help="a PostgreSQL server (default: start one)")
    p.add_argument("--profile", choices=("none", "memory", "sqlite", "postgres"), default=None)
    p.add_argument("--top", type=int, default=30, help="--profile: functions shown")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--modes", default="sync", help="durability modes, comma-separated")
    a = p.parse_args(argv)
    stores = [s.strip() for s in a.stores.split(",") if s.strip()]
    if "none" not in stores:
        stores.insert(0, "none")
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    wants_pg = "postgres" in stores if a.profile is None else a.profile == "postgres"
    with contextlib.ExitStack() as stack:
        dsn = a.dsn
        if wants_pg and dsn is None:
            import _postgres

            dsn = stack.enter_context(_postgres.server())
        if a.profile is not None:
            profile(a.profile, dsn, a.runs, a.turns, a.top, modes[0])
        else:
            measure(stores, modes, dsn, a)


if __name__ == "__main__":
    main(sys.argv[1:])
