"""What an answer costs with its author (who answered, on which channel): ``python
benchmarks/bench_answer.py``.

Two paths, each the answer alone (the requests are opened beforehand, untimed):

- ``memory``: ``Coordinator.respond_nowait`` on a run in memory, its resolved event built
  and emitted; with an author (``Author("alice", "web")``) where the code has one.
- ``sqlite``: ``hpd_agent.store.respond`` on a SQLite file (``durability="process"``, the
  default), one conditional update; with ``by="alice", channel="web"`` where it takes them.

The same script runs against an older checkout (``python /old/checkout/benchmarks/
bench_answer.py``: it imports the code beside it) and answers there as that code can, so
the two medians compare an answer with its audit fields to one without. Per-answer medians
of ``--rounds`` rounds of ``--answers`` answers each; prints ``RESULT_JSON {...}``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hpd_agent.coordinator import Coordinator  # noqa: E402
from hpd_agent.events import ClarificationRequest  # noqa: E402
from hpd_agent.questions import TextQuestion  # noqa: E402
from hpd_agent.store import RequestRecord, SQLiteStore, respond  # noqa: E402


class _Asker:
    run_id = "run"
    agent_path = ("Orchestrator", "Writer")
    depth = 1
    tool_name = "ask_user"
    tool_call_id = "call"
    invocation_id = "inv"
    deadlines = ()


def _memory_round(n: int, authored: bool) -> float:
    """Seconds per answer of ``n`` answers to requests open in memory."""
    events: list[Any] = []
    coordinator = Coordinator("run", sink=events.append, listening=True)
    spec = TextQuestion(question="Which colour?")
    asker = _Asker()
    table = coordinator.requests
    for i in range(n):
        table.announce(table.track(spec.build(request_id=f"r{i}", asker=asker), spec))
    kw: dict[str, Any] = {}
    if authored:
        from hpd_agent.backend import Author  # only where the code has authors

        kw["author"] = Author("alice", "web")
    answer = coordinator.respond_nowait
    start = time.perf_counter()
    for i in range(n):
        answer(f"r{i}", "red", **kw)
    return (time.perf_counter() - start) / n


async def _sqlite_round(folder: Path, n: int, authored: bool, number: int) -> float:
    store = SQLiteStore(folder / f"answers-{number}.db")
    try:
        for i in range(n):
            event = ClarificationRequest(
                run_id="run", agent_path=("A",), depth=0, request_id=f"r{i}", question="Which?"
            )
            await store.add_request(RequestRecord.from_event(event))
        kw: dict[str, Any] = {"by": "alice", "channel": "web"} if authored else {}
        start = time.perf_counter()
        for i in range(n):
            await respond(store, f"r{i}", "red", **kw)
        return (time.perf_counter() - start) / n
    finally:
        await store.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--answers", type=int, default=2000, help="answers per round")
    parser.add_argument("--rounds", type=int, default=15, help="rounds per path")
    args = parser.parse_args(argv)
    authored = "author" in inspect.signature(Coordinator.respond_nowait).parameters
    memory = [_memory_round(args.answers, authored) for _ in range(args.rounds)]
    with tempfile.TemporaryDirectory() as folder:
        sqlite = [
            anyio.run(_sqlite_round, Path(folder), args.answers // 4 or 1, authored, r)
            for r in range(args.rounds)
        ]
    result = {
        "authored": authored,
        "memory_us": round(statistics.median(memory) * 1e6, 2),
        "sqlite_us": round(statistics.median(sqlite) * 1e6, 2),
    }
    print(
        f"an answer ({'with' if authored else 'without'} its author), median per answer: "
        f"in memory {result['memory_us']:.2f} µs, SQLite store.respond {result['sqlite_us']:.2f} µs"
    )
    print("RESULT_JSON " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
