"""What ``create_app`` costs on the server per A2A round trip, next to the a2a-sdk's own
minimal server, in figures that do not move with the machine's load.

``benchmarks/bench_a2a.py`` times whole round trips (both processes, wall clock). This one
looks inside the server: two child processes serve the same round trip (query ->
``input-required`` -> the answer in the same task -> ``completed``), one with the SDK's own
``DefaultRequestHandler`` and ``bench_a2a.AskOnce``, one with ``create_app(planner())``
(an hpd_agent run asking with ``ask_user``). The parent drives both with the SDK's streaming
client, alternating round trips. Each server stamps every JSON-RPC request from its arrival
to its second event (the query's ``input-required``, the answer's ``completed``: what the
client waits for) and reports, per round trip:

- ``cpu_ms``: its loop thread's CPU time in those two windows (medians: noise moves it);
- ``loop_iterations``: event-loop iterations in the two windows (deterministic);
- ``gc``: collections per round trip (generation 0, 1, 2) over the whole measure;
- with ``--calls``, a second pass under ``sys.setprofile``: Python and C calls made in the
  two windows, in all and per asyncio task (deterministic up to a call or two).

Usage: ``python benchmarks/bench_a2a_server.py [--repeat 200] [--warmup 20] [--calls]``;
prints a table and one ``RESULT_JSON {...}`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE.parent)]

import bench_a2a as base  # noqa: E402  (sets the environment the servers need)
import uvicorn  # noqa: E402
from a2a.client import ClientConfig, create_client  # noqa: E402

from hpd_agent.a2a import create_app  # noqa: E402

KINDS = ("sdk", "ours")


class Meter:
    """The serving loop's counters, reset by ``start`` and read by ``stop`` (both called on
    the loop's thread)."""

    def __init__(self, calls: bool) -> None:
        self.calls = calls
        self.iterations = 0
        self.windows: dict[str, list[float]] = {}
        self.per_task: dict[str, int] = {}
        self.gc = [0, 0, 0]
        self.requests = 0
        self.start()
        gc.callbacks.append(self._collected)

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            self.gc[info["generation"]] += 1

    def count_iterations(self, loop: asyncio.AbstractEventLoop) -> None:
        """Count the loop's iterations (asyncio's ``_run_once``: one per select)."""
        run_once = loop._run_once  # type: ignore[attr-defined]

        def counted() -> None:
            self.iterations += 1
            run_once()

        loop._run_once = counted  # type: ignore[attr-defined]

    def start(self) -> None:
        self.windows = {k: [] for k in ("q_ms", "a_ms", "q_cpu_ms", "a_cpu_ms", "q_it", "a_it")}
        self.per_task = {}
        self.gc = [0, 0, 0]
        self.requests = 0

    def stop(self) -> None:
        print(json.dumps({"windows": self.windows, "per_task": self.per_task, "gc": self.gc}))
        sys.stdout.flush()

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" or event == "c_call":
            task = asyncio.current_task()
            name = "(loop callbacks)" if task is None else _task_name(task)
            self.per_task[name] = self.per_task.get(name, 0) + 1

    def wrap(self, app: Any) -> Any:
        """``app``, each POST stamped from its arrival to its second non-empty body write."""

        async def stamped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["method"] != "POST":
                await app(scope, receive, send)
                return
            kind = "q" if self.requests % 2 == 0 else "a"
            self.requests += 1
            t0, c0, i0, bodies = time.perf_counter(), time.thread_time(), self.iterations, 0
            if self.calls:
                sys.setprofile(self._profile)

            async def timed(message: Any) -> None:
                nonlocal bodies
                if message["type"] == "http.response.body" and message.get("body"):
                    bodies += 1
                    if bodies == 2:
                        sys.setprofile(None)
                        self.windows[f"{kind}_ms"].append((time.perf_counter() - t0) * 1e3)
                        self.windows[f"{kind}_cpu_ms"].append((time.thread_time() - c0) * 1e3)
                        self.windows[f"{kind}_it"].append(self.iterations - i0)
                await send(message)

            await app(scope, receive, timed)

        return stamped


def _task_name(task: asyncio.Task[Any]) -> str:
    """A task by what it runs: its coroutine, and the anyio task it starts if any (ids cut)."""
    name = task.get_coro().__qualname__  # type: ignore[union-attr]
    if name == "TaskHandle._run_coro":
        name = re.sub(r"[:.]?[0-9a-f-]{36}$", "", task.get_name())
    return re.sub(r"[:-][0-9a-f-]{36}$", "", name)


def serve(kind: str, calls: bool) -> None:
    """The child: serve ``kind`` until stdin ends; ``start``/``stop`` lines reset/report."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    meter = Meter(calls)
    app = create_app(base.planner()) if kind == "ours" else base.sdk_app(url)
    config = uvicorn.Config(meter.wrap(app), log_level="warning", loop="asyncio")
    server = uvicorn.Server(config)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        meter.count_iterations(loop)

        def commands() -> None:
            for line in sys.stdin:
                step = meter.start if line.strip() == "start" else meter.stop
                loop.call_soon_threadsafe(step)
            server.should_exit = True

        threading.Thread(target=commands, daemon=True).start()
        print(url, flush=True)
        await server.serve(sockets=[sock])

    asyncio.run(main())


@contextmanager
def child(kind: str, calls: bool) -> Iterator[subprocess.Popen[str]]:
    command = [sys.executable, __file__, "--serve", kind]
    proc = subprocess.Popen(
        [*command, "--calls"] if calls else command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)


async def measure(procs: dict[str, subprocess.Popen[str]], repeat: int, warmup: int) -> Any:
    clients: dict[str, Any] = {}
    for kind, proc in procs.items():
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        clients[kind] = await create_client(url, client_config=ClientConfig(streaming=True))
    try:
        for i in range(warmup + repeat):
            if i == warmup:
                _tell(procs, "start")
                await asyncio.sleep(0.1)  # the warm-up's streams end meanwhile
            for kind in KINDS[i % 2 :] + KINDS[: i % 2]:
                out = await base.sdk_round_trip(clients[kind], stop=True)
                assert out == "to Rome", (kind, out)
        await asyncio.sleep(0.1)
        _tell(procs, "stop")
        reports: dict[str, Any] = {}
        for kind, proc in procs.items():
            assert proc.stdout is not None
            reports[kind] = json.loads(proc.stdout.readline())
        return reports
    finally:
        for client in clients.values():
            await client.close()


def _tell(procs: dict[str, subprocess.Popen[str]], line: str) -> None:
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()


def one_pass(repeat: int, warmup: int, calls: bool) -> dict[str, Any]:
    with child("sdk", calls) as sdk, child("ours", calls) as ours:
        return asyncio.run(measure({"sdk": sdk, "ours": ours}, repeat, warmup))


def summary(report: dict[str, Any], repeat: int) -> dict[str, Any]:
    w = report["windows"]
    med = {k: statistics.median(v) for k, v in w.items()}
    return {
        "query_ms": round(med["q_ms"], 4),
        "answer_ms": round(med["a_ms"], 4),
        "cpu_ms": round(med["q_cpu_ms"] + med["a_cpu_ms"], 4),
        "query_cpu_ms": round(med["q_cpu_ms"], 4),
        "answer_cpu_ms": round(med["a_cpu_ms"], 4),
        "loop_iterations": med["q_it"] + med["a_it"],
        "gc": [round(n / repeat, 3) for n in report["gc"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--calls", action="store_true", help="also count calls (a 2nd pass)")
    parser.add_argument("--serve", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.calls)
        return
    reports = one_pass(args.repeat, args.warmup, False)
    result: dict[str, Any] = {"repeat": args.repeat}
    for kind in KINDS:
        result[kind] = summary(reports[kind], args.repeat)
    if args.calls:
        counted = one_pass(args.repeat, args.warmup, True)
        for kind in KINDS:
            per_task = {k: round(v / args.repeat, 1) for k, v in counted[kind]["per_task"].items()}
            result[kind]["calls"] = round(sum(per_task.values()), 1)
            result[kind]["calls_per_task"] = dict(sorted(per_task.items(), key=lambda x: -x[1]))
    sdk, ours = result["sdk"], result["ours"]
    result["cpu_ratio"] = round(ours["cpu_ms"] / sdk["cpu_ms"], 4)
    print(f"server side of one round trip, medians of {args.repeat}:")
    print(f"{'':34}{'a2a-sdk':>12}{'create_app':>12}")
    for key in ("query_ms", "answer_ms", "query_cpu_ms", "answer_cpu_ms", "loop_iterations"):
        print(f"  {key:32}{sdk[key]:12.3f}{ours[key]:12.3f}")
    if args.calls:
        print(f"  {'calls':32}{sdk['calls']:12.1f}{ours['calls']:12.1f}")
        for kind in KINDS:
            print(f"  calls per task ({kind}):")
            for name, n in list(result[kind]["calls_per_task"].items())[:8]:
                print(f"    {n:9.1f}  {name}")
    print(f"  cpu ratio create_app / a2a-sdk  {result['cpu_ratio']:8.3f}")
    print("RESULT_JSON " + json.dumps(result))


if __name__ == "__main__":
    main()
