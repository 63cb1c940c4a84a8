"""What a remembered grant costs a permission request: ``python benchmarks/bench_grants.py``.

Every permission request looks for a live grant first (``GrantBook.find_grant``). Timed:

- ``find_*``: the lookup alone, per call, finding nothing (the common case): this
  process's ``MemoryGrants`` empty and holding ``--grants`` grants of other tools, a SQLite
  file's ``hpd_grants`` empty and holding as many (an index on tool and path).
- ``asked_memory`` / ``asked_sqlite``: a whole run whose one tool call is asked and approved
  (a ``ScriptedHuman``), in memory and on a SQLite file: the lookup is part of it where the
  code has grants. The same script runs against an older checkout (``python /old/checkout/
  benchmarks/bench_grants.py``: it imports the code beside it), so the two medians compare a
  permission request with the lookup to one without.
- ``granted_memory`` / ``granted_sqlite``: the same run with a grant covering the call
  (nobody asked; the request kept and answered by ``grant:<id>``), where the code has grants.

Medians of ``--rounds`` rounds; prints ``RESULT_JSON {...}``.
"""

from __future__ import annotations

import argparse
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

from hpd_agent import Agent, tool  # noqa: E402
from hpd_agent import permissions as _permissions  # noqa: E402
from hpd_agent.store import SQLiteStore  # noqa: E402
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call  # noqa: E402

GRANTS = hasattr(_permissions, "PROCESS_GRANTS")
"""Whether the code beside this script has remembered grants."""

PATH = ("Deployer",)


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy."""
    return f"deployed {env}"


def _agent() -> Agent:
    model = ScriptedModel([tool_call("deploy", env="staging"), text("done")])
    return Agent("Deployer", model=model, tools=[deploy])


def _grant(grant_id: str, tool_name: str) -> Any:
    return _permissions.Grant(  # type: ignore[attr-defined]
        grant_id=grant_id, tool_name=tool_name, agent_path=PATH, created_at=time.time()
    )


async def _fill(book: Any, n: int) -> None:
    for i in range(n):
        await book.add_grant(_grant(f"other-{i}", f"tool_{i}"))


async def _find_round(book: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        found = await book.find_grant("deploy", {"env": "staging"}, PATH)
        assert found is None
    return (time.perf_counter() - start) / n


async def _runs(store: Any, n: int, human: ScriptedHuman) -> float:
    agent = _agent()
    kw: dict[str, Any] = {} if store is None else {"store": store}
    start = time.perf_counter()
    for _ in range(n):
        result = await agent.run("go", handler=human, **kw)
        assert result.output == "done"
        agent.model.reset()  # type: ignore[attr-defined]
    return (time.perf_counter() - start) / n


async def _sqlite(folder: Path, args: argparse.Namespace) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}
    store = SQLiteStore(folder / "grants.db")
    try:
        asking = ScriptedHuman().approve("deploy")
        times["asked_sqlite"] = [await _runs(store, args.runs, asking) for _ in range(args.rounds)]
        book = store.capabilities().grants if GRANTS else None
        if book is not None:
            times["find_sqlite_empty"] = [
                await _find_round(book, args.lookups) for _ in range(args.rounds)
            ]
            await _fill(book, args.grants)
            times["find_sqlite_full"] = [
                await _find_round(book, args.lookups) for _ in range(args.rounds)
            ]
            await book.add_grant(_grant("cover", "deploy"))
            nobody = ScriptedHuman()
            times["granted_sqlite"] = [
                await _runs(store, args.runs, nobody) for _ in range(args.rounds)
            ]
            assert nobody.asked == []
    finally:
        await store.aclose()
    return times


async def _memory(args: argparse.Namespace) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {
        "asked_memory": [
            await _runs(None, args.runs, ScriptedHuman().approve("deploy"))
            for _ in range(args.rounds)
        ]
    }
    if not GRANTS:
        return times
    book = _permissions.PROCESS_GRANTS  # type: ignore[attr-defined]
    book.clear()
    times["find_memory_empty"] = [await _find_round(book, args.lookups) for _ in range(args.rounds)]
    await _fill(book, args.grants)
    times["find_memory_full"] = [await _find_round(book, args.lookups) for _ in range(args.rounds)]
    book.clear()
    await book.add_grant(_grant("cover", "deploy"))
    nobody = ScriptedHuman()
    times["granted_memory"] = [await _runs(None, args.runs, nobody) for _ in range(args.rounds)]
    assert nobody.asked == []
    book.clear()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9, help="rounds per measure")
    parser.add_argument("--runs", type=int, default=100, help="runs per round")
    parser.add_argument("--lookups", type=int, default=2000, help="lookups per round")
    parser.add_argument("--grants", type=int, default=1000, help="grants of other tools")
    args = parser.parse_args(argv)
    times = anyio.run(_memory, args)
    with tempfile.TemporaryDirectory() as folder:
        times.update(anyio.run(_sqlite, Path(folder), args))
    result: dict[str, Any] = {"grants": GRANTS}
    for name, values in times.items():
        result[f"{name}_us"] = round(statistics.median(values) * 1e6, 2)
    for name, value in result.items():
        if name != "grants":
            print(f"{name[:-3]:>20}: {value:10.2f} µs")
    print("RESULT_JSON " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
