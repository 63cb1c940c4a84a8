"""The fence's cost per journal write on SQLite. Run: ``python benchmarks/bench_fence.py``.

Writes small journal entries one at a time (``journal_put``) under a held lease, fenced (the
lease's token checked in the write's statement, as a run's writes are) and unfenced,
alternating blocks; prints the median per write of each and the difference.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from hpd_agent.store import SQLiteStore  # noqa: E402
from hpd_agent.store._base import JournalEntry  # noqa: E402
from hpd_agent.store._fence import Fence, fencing  # noqa: E402


async def block(store: SQLiteStore, fence: Fence | None, n: int, tag: str) -> float:
    """Seconds per write of ``n`` writes."""
    with fencing(fence) if fence is not None else contextlib.nullcontext():
        start = time.perf_counter()
        for i in range(n):
            entry = JournalEntry(key=f"{tag}-{i}", kind="tool", value={"result": i})
            await store.journal_put("r", entry)
        return (time.perf_counter() - start) / n


async def main(args: argparse.Namespace) -> None:
    store = SQLiteStore(Path(tempfile.mkdtemp(prefix="hpd-fence-")) / "f.db")
    lease = await store.take_lease("r", "bench:1:x", 3600)
    fence = Fence("r", lease.fence)
    fenced: list[float] = []
    plain: list[float] = []
    for b in range(args.blocks):
        plain.append(await block(store, None, args.writes, f"p{b}"))
        fenced.append(await block(store, fence, args.writes, f"f{b}"))
    await store.aclose()
    p, f = statistics.median(plain), statistics.median(fenced)
    print(f"journal write on SQLite ({args.blocks} blocks of {args.writes}, medians)")
    print(f"  unfenced {p * 1e6:7.2f} us   fenced {f * 1e6:7.2f} us   cost {(f - p) * 1e6:+.2f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--blocks", type=int, default=9)
    anyio.run(main, parser.parse_args())
