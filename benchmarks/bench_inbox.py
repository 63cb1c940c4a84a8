"""What the inbox's listing costs: ``GET /inbox/requests`` over 10,000 pending requests.

    python benchmarks/bench_inbox.py [--requests 10000] [--rounds 15] [--store LOCATION]

The workload: a store (a new SQLite file unless ``--store`` names an empty one, e.g. a
``postgresql://`` DSN) holding ``--requests`` pending requests of 100 runs, as runs store
them: text questions with options, multiple choices, yes/no questions with a timeout and
permissions with arguments, asked at depths 0 to 2. ``hpd-agent inbox`` serves it in a
child process on 127.0.0.1; this process lists them over HTTP (httpx), ``--rounds`` times
after a first listing, and keeps the median (and the lowest) wall-clock time from the
request sent to the last byte of the body read, and the body's size. The inbox holds the
pending requests encoded (read once when it starts, kept current by the store's request
feed), so a listing joins them; the first one, sent as soon as the server listens, waits
for that first read (``first_ms``). For comparison, the median of ``store.list_requests()``
alone in this process (the query and the records read from their rows: what every listing
would cost without the held set).

Prints one line per measure and one ``RESULT_JSON`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's hpd_agent

import anyio  # noqa: E402
import httpx  # noqa: E402

from hpd_agent.events import ClarificationRequest, PermissionRequest, RequestEvent  # noqa: E402
from hpd_agent.store import RequestRecord, Store, open_store  # noqa: E402

_SERVING = re.compile(r"Serving the inbox on (http://\S+)")
_PATHS = (("Desk",), ("Desk", "Writer"), ("Desk", "Writer", "Editor"))


def _event(i: int) -> tuple[RequestEvent, float | None]:
    """The ``i``-th request and its timeout: four kinds in turn."""
    run_id = f"run_bench_{i % 100:03d}"
    path = _PATHS[i % 3]
    common: dict[str, Any] = {
        "run_id": run_id,
        "agent_path": path,
        "depth": len(path) - 1,
        "request_id": f"req_{i:05d}",
    }
    kind = i % 4
    if kind == 3:
        return PermissionRequest(
            **common,
            tool_name="deploy",
            arguments={"env": "prod", "version": f"1.{i}", "note": "ship the release"},
            tool_call_id=f"call_{i}",
        ), None
    if kind == 2:
        return ClarificationRequest(
            **common, question=f"Go ahead with step {i}?", question_kind="confirm"
        ), 3600.0
    if kind == 1:
        return ClarificationRequest(
            **common,
            question=f"Which checks for change {i}?",
            question_kind="choice",
            options=("lint", "types", "tests", "docs"),
            data={"multiple": True},
        ), None
    return ClarificationRequest(
        **common, question=f"Which framework for service {i}?", options=("FastAPI", "Django")
    ), None


async def fill(store: Store, count: int) -> None:
    """``count`` pending requests in the store, a millisecond apart (oldest first)."""
    start = time.time() - count / 1000
    for i in range(count):
        event, timeout = _event(i)
        record = RequestRecord.from_event(event, timeout=timeout, now=start + i / 1000)
        await store.add_request(record)


def _serve(location: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("HPD_AGENT_TOKEN", None)
    command = [sys.executable, "-m", "hpd_agent.cli", "inbox", "--store", location, "--port", "0"]
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = _SERVING.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(60) or not found:
        proc.kill()
        raise SystemExit("hpd-agent inbox did not start")
    return proc, found[0]


def _listings(url: str, rounds: int) -> tuple[list[float], int, int]:
    """Wall-clock milliseconds of each listing (the first one's first), the body's bytes
    and its request count."""
    times: list[float] = []
    size = count = 0
    with httpx.Client(base_url=url, timeout=120) as client:
        for _ in range(rounds + 1):
            started = time.perf_counter()
            response = client.get("inbox/requests")
            body = response.content
            elapsed = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            times.append(elapsed)
            size, count = len(body), len(json.loads(body)["requests"])
    return times, size, count


async def _store_listings(store: Store, rounds: int) -> list[float]:
    times: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        await store.list_requests()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--store", default=None, help="an empty store (default: a new file)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="hpd-bench-inbox-")
    location = args.store or os.path.join(folder, "inbox.db")

    async def prepare() -> list[float]:
        store = open_store(location)
        try:
            await fill(store, args.requests)
            return await _store_listings(store, args.rounds)
        finally:
            await store.aclose()

    store_times = anyio.run(prepare)
    proc, url = _serve(location)
    try:
        times, size, count = _listings(url, args.rounds)
    finally:
        proc.terminate()
        proc.wait(30)
    assert count == args.requests, (count, args.requests)
    first, times = times[0], times[1:]
    result = {
        "requests": args.requests,
        "rounds": args.rounds,
        "store": "postgresql" if "://" in location else "sqlite",
        "median_ms": round(statistics.median(times), 1),
        "min_ms": round(min(times), 1),
        "first_ms": round(first, 1),
        "body_bytes": size,
        "store_list_median_ms": round(statistics.median(store_times), 1),
    }
    print(
        f"GET /inbox/requests, {count:,} pending ({size:,} bytes): "
        f"median {result['median_ms']} ms, lowest {result['min_ms']} ms"
    )
    print(f"the first listing (the inbox reading the store once): {result['first_ms']} ms")
    print(f"store.list_requests() alone: median {result['store_list_median_ms']} ms")
    print("RESULT_JSON " + json.dumps(result))


if __name__ == "__main__":
    main()
