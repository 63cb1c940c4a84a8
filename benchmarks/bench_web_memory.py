"""What a web server keeps in memory per thread: finished threads and refused inputs.

Runs ``create_app`` in process (httpx's ASGI transport, the app's lifespan entered), a
SQLite store in a temporary folder, the test tree of tests/web/agents.py. After a warm-up,
``tracemalloc`` traces the Python heap while ``--threads`` threads each run one ``hello``
(a streamed text answer) to the end, then ``--refused`` inputs on fresh thread ids are
refused (a resume with nothing to resume). Printed: the Python heap still held afterwards
per finished thread and per refused input (after a full garbage collection), the threads the
server keeps, and the process's resident memory before and after.

Usage: ``python benchmarks/bench_web_memory.py [--threads 10000] [--refused 1000]``; prints
a table and one ``RESULT_JSON {...}`` line. Not a timed test: a measurement to compare.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _body(thread: str, **extra: Any) -> dict[str, Any]:
    messages = [{"id": "u1", "role": "user", "content": "hello"}] if not extra else []
    return {"threadId": thread, "runId": "r1", "messages": messages, **extra}


def _held(app: Any) -> int:
    threads = app.state.threads
    return int(getattr(threads, "active", len(getattr(threads, "_threads", {}))))


async def measure(count: int, refused: int) -> dict[str, Any]:
    import httpx

    from hpd_agent.web import create_app
    from tests.web.agents import build

    with tempfile.TemporaryDirectory() as folder:
        app = create_app(build(), store=Path(folder) / "web.db")
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c,
        ):

            async def run(thread: str, **extra: Any) -> str:
                response = await c.post("/agent", json=_body(thread, **extra))
                assert response.status_code == 200, response.text
                return response.text

            for i in range(50):  # warm-up: imports, caches, the store's statements
                await run(f"warm-{i}")
            gc.collect()
            rss_before = _rss_mb()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            for i in range(count):
                assert "Hello! You said: hello" in await run(f"t{i}")
            gc.collect()
            after_runs = tracemalloc.get_traced_memory()[0]
            resume = [{"interruptId": "req_x", "status": "resolved", "payload": "x"}]
            for i in range(refused):
                assert "not_interrupted" in await run(f"fresh-{i}", resume=resume)
            gc.collect()
            after_refused = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            held = _held(app)
    return {
        "threads": count,
        "held_threads": held,
        "heap_per_thread_bytes": round((after_runs - base) / count),
        "heap_per_10000_threads_mb": round((after_runs - base) / count * 10_000 / 1e6, 2),
        "refused": refused,
        "heap_per_refused_bytes": round((after_refused - after_runs) / max(refused, 1)),
        "rss_before_mb": round(rss_before, 1),
        "rss_after_mb": round(_rss_mb(), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--refused", type=int, default=1_000)
    args = parser.parse_args()
    import anyio

    result = anyio.run(measure, args.threads, args.refused)
    for key, value in result.items():
        print(f"{key:>26}: {value}")
    print("RESULT_JSON " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
