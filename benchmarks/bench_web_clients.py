"""Many clients at once on one ``hpd-agent serve``: the delay from an event to its client.

Workload: each client starts its own run with
``POST /agent`` and reading the SSE stream; each run's root calls ``--agents`` A sub-agents
in parallel, and each sub-agent's model streams ``--tokens`` T text pieces, one every
``--interval`` ms (what an LLM streaming at 1000/interval tokens per second looks like).
Every piece is the time it was due (the model's pieces are due at a fixed rate from the
moment its request starts, as a provider streams them), so a client measures, for every
TEXT_MESSAGE_CONTENT it reads, the delay from the piece being due to the client having it:
the engine taking it (late if the server is busy), journaling in SQLite, translation,
encoding, the write.

Three phases, each ``--repeat`` times, in turn:

- ``steady``: 2C clients, one starting every D/C s (D: a run's length, T x interval): from
  D on, about C runs go at once, starting and ending at a steady rate, as on a busy server.
  Counted: the pieces due between D and 2D after the first client started.
- ``steady_with_stalled``: the same, plus ``--stalled`` S clients that start a run the same
  way at the beginning, read the response head and then stop reading (their runs go on;
  docs/web.md says what a client that falls behind gets). Counted: the reading clients'.
- ``burst``: C clients connecting at the same moment (the server starts C runs at once).
  Counted: every piece.

Reported per phase: the delay's p50, p99 and max (the median over the repeats), the time
from a client sending its input to having RUN_STARTED (p50 and max over the clients), pieces/s
over all clients, the server's CPU use (1.0: one core busy all along) and that every client
got every piece and RUN_FINISHED. The clients run in this process on raw asyncio sockets (a
regex per read, no JSON parse), so they take as little of the two cores as can be.

Usage: ``python benchmarks/bench_web_clients.py [--clients 200] [--agents 1] [--tokens 50]
[--interval 40] [--stalled 20] [--repeat 3] [--phases burst]`` (the defaults: 200 runs at once, each
streaming 25 pieces a second for 2 s: 5,000 pieces a second in all); prints a table and one ``RESULT_JSON`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from hpd_agent import Agent  # noqa: E402
from hpd_agent.messages import Message, ToolResultMessage, UserMessage  # noqa: E402
from hpd_agent.models import Model, ModelRequestParams, ModelResponse  # noqa: E402
from hpd_agent.testing import FunctionModel, text, tool_call  # noqa: E402

_PIECE = re.compile(rb'"delta":"(\d+\.\d+) "')
Stats = dict[str, float | bool]


def _prompt(messages: Sequence[Message]) -> str:
    return next(m.content for m in messages if isinstance(m, UserMessage))


class PacedModel(Model):
    """Streams ``T`` pieces, one due every ``MS`` ms, for the query ``"T MS"``: each piece
    is the time it was due, then a space."""

    name = "paced"

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParams
    ) -> ModelResponse:
        tokens, interval = _prompt(messages).split()
        pieces: list[str] = []
        start, step = time.time(), int(interval) / 1000
        for k in range(1, int(tokens) + 1):
            # Due at a fixed rate, as from a provider's socket: a server too busy to take a
            # piece on time is late, and the lateness counts in the piece's delay.
            due = start + k * step
            await anyio.sleep(max(0.0, due - time.time()))
            piece = f"{due:.6f} "
            pieces.append(piece)
            if params.on_text is not None:
                params.on_text(piece)
        streamed = params.on_text is not None
        return ModelResponse(text="".join(pieces), streamed=streamed, finish_reason="stop")


def _root_turn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
    if any(isinstance(m, ToolResultMessage) for m in messages):
        return text("done")
    _, agents, tokens, interval = _prompt(messages).split()
    query = f"{tokens} {interval}"
    return [tool_call("speaker", _id=f"c{i}", query=query) for i in range(int(agents))]


def agent() -> Agent:
    """The served tree: ``paced A T MS`` calls the speaker A times in parallel."""
    speaker = Agent("speaker", description="Streams paced pieces.", model=PacedModel())
    return Agent("root", model=FunctionModel(_root_turn, name="root"), tools=[speaker.as_tool()])


def _request(thread: str, prompt: str) -> bytes:
    body = json.dumps(
        {
            "threadId": thread,
            "runId": thread,
            "messages": [{"id": "u1", "role": "user", "content": prompt}],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    ).encode()
    head = (
        "POST /agent HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _reader(
    port: int, thread: str, prompt: str, wait: float, delays: list[tuple[float, float]]
) -> tuple[int, bool, float]:
    """One reading client, starting after ``wait`` s: (pieces it got, whether its stream
    ended with RUN_FINISHED, seconds from sending its input to having RUN_STARTED); adds
    (due, delay) for each piece to ``delays``."""
    await asyncio.sleep(wait)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = time.perf_counter()
    writer.write(_request(thread, prompt))
    got, tail, finished, started = 0, b"", False, float("nan")
    while chunk := await reader.read(65536):
        now = time.time()
        data = tail + chunk
        cut = data.rfind(b"\n\n") + 2
        whole, tail = data[:cut], data[cut:]
        if started != started and b'"type":"RUN_STARTED"' in whole:  # NaN: not yet
            started = time.perf_counter() - sent
        for m in _PIECE.finditer(whole):
            due = float(m.group(1))
            delays.append((due, now - due))
            got += 1
        finished = finished or b'"type":"RUN_FINISHED"' in whole
    writer.close()
    return got, finished, started


async def _staller(port: int, thread: str, prompt: str, release: asyncio.Event) -> None:
    """A client that reads the response head, then nothing until ``release``."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills sooner
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(_request(thread, prompt))
    await reader.readuntil(b"\r\n\r\n")
    writer.transport.pause_reading()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    await release.wait()
    writer.transport.abort()  # pyright: ignore[reportUnknownMemberType]


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Phase:
    """How a phase's clients start: ``readers`` readers, one every ``gap`` s, ``stalled``
    stallers at once; delays counted for pieces due within ``window`` s of the start."""

    readers: int
    gap: float
    stalled: int
    window: tuple[float, float] | None


async def _phase(port: int, tag: str, plan: Phase, prompt: str, expect: int, pid: int) -> Stats:
    cpu = _cpu_s(pid)
    delays: list[tuple[float, float]] = []
    release = asyncio.Event()
    stallers = [
        asyncio.create_task(_staller(port, f"{tag}-s{i}", prompt, release))
        for i in range(plan.stalled)
    ]
    t0, start = time.time(), time.perf_counter()
    results = await asyncio.gather(
        *(_reader(port, f"{tag}-c{i}", prompt, i * plan.gap, delays) for i in range(plan.readers))
    )
    elapsed = time.perf_counter() - start
    cpu = _cpu_s(pid) - cpu
    release.set()
    await asyncio.gather(*stallers)
    complete = all(got == expect and finished for got, finished, _ in results)
    starts = sorted(started * 1000 for _, _, started in results)
    if plan.window is not None:
        low, high = t0 + plan.window[0], t0 + plan.window[1]
        counted = [d for due, d in delays if low <= due < high]
    else:
        counted = [d for _, d in delays]
    ms = sorted(d * 1000 for d in counted) or [float("nan")]  # none due in the window
    return {
        "p50_ms": statistics.median(ms),
        "p99_ms": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
        "max_ms": ms[-1],
        "pieces_counted": len(ms),
        "start_p50_ms": statistics.median(starts),
        "start_max_ms": starts[-1],
        "pieces_per_s": len(delays) / elapsed,
        "server_cpu": cpu / elapsed,
        "complete": complete,
    }


def _median(runs: list[Stats], key: str) -> float:
    return round(statistics.median(float(r[key]) for r in runs), 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--agents", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--interval", type=int, default=40, help="ms between pieces")
    parser.add_argument("--stalled", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--phases",
        default="steady,steady_with_stalled,burst",
        help="comma-separated phases to run (default: all three)",
    )
    args = parser.parse_args()
    from bench_web import _start  # pyright: ignore[reportMissingImports, reportUnknownVariableType]

    prompt = f"paced {args.agents} {args.tokens} {args.interval}"
    expect, c = args.agents * args.tokens, args.clients
    run_s = args.tokens * args.interval / 1000
    # Steady: 2C clients, one every run_s / C s: from run_s on, about C runs go at once,
    # starting and ending at a steady rate; counted: the pieces due in [run_s, 2 run_s).
    steady = Phase(2 * c, run_s / c, 0, (run_s, 2 * run_s))
    plans = {
        "steady": steady,
        "steady_with_stalled": Phase(2 * c, run_s / c, args.stalled, (run_s, 2 * run_s)),
        "burst": Phase(c, 0.0, 0, None),
    }
    unknown = set(args.phases.split(",")) - set(plans)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}")
    plans = {name: plan for name, plan in plans.items() if name in args.phases.split(",")}
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'benchmarks'}"}
    phases: dict[str, list[Stats]] = {name: [] for name in plans}
    with tempfile.TemporaryDirectory() as folder:
        serve = [sys.executable, "-m", "hpd_agent.cli", "serve", f"{__file__}:agent"]
        proc, url = _start([*serve, "--port", "0", "--store", f"{folder}/web.db"], env)
        port = int(url.rsplit(":", 1)[1])
        try:
            warm = Phase(10, 0.0, 0, None)
            asyncio.run(_phase(port, "warm", warm, prompt, expect, proc.pid))
            for r in range(args.repeat):
                for name, plan in plans.items():
                    phase = _phase(port, f"r{r}-{name}", plan, prompt, expect, proc.pid)
                    phases[name].append(asyncio.run(phase))
        finally:
            proc.terminate()
            proc.wait(30)
    result: dict[str, Any] = {
        "clients": c,
        "agents": args.agents,
        "tokens": args.tokens,
        "interval_ms": args.interval,
        "stalled": args.stalled,
        "repeat": args.repeat,
    }
    for name, runs in phases.items():
        metrics = ("p50_ms", "p99_ms", "max_ms", "start_p50_ms", "start_max_ms")
        for metric in (*metrics, "pieces_per_s", "server_cpu"):
            result[f"{name}_{metric}"] = _median(runs, metric)
        result[f"{name}_p99_ms_all"] = [round(float(r["p99_ms"]), 2) for r in runs]
        result[f"{name}_complete"] = all(r["complete"] for r in runs)
    for key, value in result.items():
        print(f"{key:>32}: {value}")
    print("RESULT_JSON " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
