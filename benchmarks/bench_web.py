"""The web endpoint's cost: events per second through ``POST /agent`` (SSE) for a long run,
and the latency each event adds over the in-process stream.

Workload: the test tree's ``turns N`` prompt (tests/web/agents.py): N scripted model turns of
one ``count`` tool call each, then a text answer; journaled in a SQLite store as the server
does. Three measurements, each the best of ``--repeat``:

- in-process: ``agent.stream(...)`` with the same store, every event iterated;
- SSE: a real ``hpd-agent serve`` child process, the whole response read by an httpx client;
  the added latency per event is (SSE time - in-process time) / AG-UI events sent;
- pydantic-ai: the same workload (N turns of one tool call, then text, its FunctionModel)
  through pydantic-ai's own AG-UI adapter (``AGUIAdapter.dispatch_request``) served by
  uvicorn in a child process. Skipped when ``pydantic-ai-slim[ag-ui]`` is not installed
  (it is pinned in the ``bench`` extra).

Usage: ``python benchmarks/bench_web.py [--turns 200] [--repeat 3]``; prints a table and one
``RESULT_JSON {...}`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def in_process(turns: int) -> tuple[float, int]:
    """Seconds for one streamed run with a SQLite store, and the events it emitted."""
    import anyio

    from hpd_agent.store import SQLiteStore
    from tests.web.agents import build

    async def main() -> tuple[float, int]:
        with tempfile.TemporaryDirectory() as folder:
            store = SQLiteStore(os.path.join(folder, "bench.db"))
            agent = build()
            count = 0
            start = time.perf_counter()
            async with agent.stream(f"turns {turns}", store=store) as run:
                async for _ in run:
                    count += 1
            elapsed = time.perf_counter() - start
            assert run.result.output == f"counted {turns}", run.result
            await store.aclose()
            return elapsed, count

    return anyio.run(main)


def _start(command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """Start a server child process; it and the URL its ``Serving ... on URL`` line gives.
    Its later output (a line per run: its activity log) is read and dropped in a thread:
    a pipe nobody reads fills (64 KiB) and the server then blocks writing, its event loop
    with it, and the benchmark waits for ever."""
    proc = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"on (http://\S+)", line)
        if m:
            threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
            return proc, m.group(1)
    raise RuntimeError("the server did not start")


def _drain(output: IO[str]) -> None:
    for _ in output:
        pass


def through_sse(url: str, body: dict[str, Any], expect: str) -> tuple[float, int]:
    """Seconds to read one whole ``POST /agent`` response, and its AG-UI events."""
    import httpx

    with httpx.Client(timeout=300) as client:
        start = time.perf_counter()
        with client.stream("POST", f"{url}/agent", json=body) as response:
            text = "".join(response.iter_text())
        elapsed = time.perf_counter() - start
    events = [json.loads(x[6:]) for x in text.split("\n\n") if x.startswith("data: ")]
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED" and expect in text, finished
    return elapsed, len(events)


def _body(thread: str, prompt: str) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": thread,
        "messages": [{"id": "u1", "role": "user", "content": prompt}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def serve_pydantic_ai(turns: int) -> None:
    """Child process: pydantic-ai's AG-UI adapter over the same scripted workload."""
    import socket
    from collections.abc import AsyncIterator

    import uvicorn
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from pydantic_ai.usage import UsageLimits
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def step(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        # AG-UI streams, so the adapter needs a streamed model: one piece per turn, as ours.
        done = sum(1 for m in messages if isinstance(m, ModelResponse))
        if done < turns:
            yield {0: DeltaToolCall("count", json.dumps({"n": done + 1}), tool_call_id=f"c{done}")}
        else:
            yield f"counted {turns}"

    agent = Agent(FunctionModel(stream_function=step))

    @agent.tool_plain
    def count(n: int) -> str:
        """Count one step."""
        return str(n)

    async def endpoint(request: Request) -> Response:
        limits = UsageLimits(request_limit=turns + 10)
        return await AGUIAdapter.dispatch_request(request, agent=agent, usage_limits=limits)

    app = Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"Serving pydantic-ai on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def _best(fn: Any, repeat: int) -> tuple[float, int]:
    runs = [fn(i) for i in range(repeat)]
    return min(r[0] for r in runs), runs[0][1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--serve-pydantic-ai", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_pydantic_ai:
        serve_pydantic_ai(args.turns)
        return 0
    turns, result = args.turns, {}
    local_s, local_events = _best(lambda i: in_process(turns), args.repeat)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "hpd_agent.cli", "serve", "tests.web.agents:root"]
        proc, url = _start([*command, "--port", "0", "--store", f"{folder}/web.db"], env)
        try:
            sse_s, sse_events = _best(
                lambda i: through_sse(url, _body(f"t{i}", f"turns {turns}"), f"counted {turns}"),
                args.repeat,
            )
        finally:
            proc.terminate()
            proc.wait(30)
    result.update(
        turns=turns,
        in_process_s=round(local_s, 4),
        in_process_events=local_events,
        in_process_events_per_s=round(local_events / local_s),
        sse_s=round(sse_s, 4),
        sse_events=sse_events,
        sse_events_per_s=round(sse_events / sse_s),
        added_us_per_event=round((sse_s - local_s) / sse_events * 1e6, 1),
    )
    try:
        import pydantic_ai  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        result["pydantic_ai"] = "skipped: pydantic-ai-slim[ag-ui] not installed"
    else:
        me = [sys.executable, __file__, "--serve-pydantic-ai", "--turns", str(turns)]
        proc, url = _start(me, env)
        try:
            pa_s, pa_events = _best(
                lambda i: through_sse(url, _body(f"p{i}", "go"), f"counted {turns}"), args.repeat
            )
        finally:
            proc.terminate()
            proc.wait(30)
        result.update(
            pydantic_ai_sse_s=round(pa_s, 4),
            pydantic_ai_sse_events=pa_events,
            pydantic_ai_events_per_s=round(pa_events / pa_s),
        )
    for key, value in result.items():
        print(f"{key:>26}: {value}")
    print("RESULT_JSON " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
