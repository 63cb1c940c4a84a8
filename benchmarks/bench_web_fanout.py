"""AG-UI events per second from one ``hpd-agent serve`` process to one client, for a run
whose root fans out to many sub-agents streaming text.

Workload (``--agents`` A, ``--tokens`` T): the root's model calls the ``speaker`` sub-agent A
times in one turn (the calls run in parallel); each call's model streams T single-token text
deltas (``"tok "``), then the root answers ``done``. Over AG-UI that is, per call,
SUBAGENT_STARTED, TEXT_MESSAGE_START, T TEXT_MESSAGE_CONTENT, TEXT_MESSAGE_END,
SUBAGENT_FINISHED, plus the root's TOOL_CALL_* events: A x (T + 8) + about 10 events.

The in-process run and the SSE one alternate, ``--repeat`` rounds after a warm-up of each;
the figures are medians, and ``ratio`` is the SSE rate over the in-process rate (per round
in ``ratio_rounds``): the machine's load moves both sides alike. ``cpu_ratio`` compares
CPU time per event instead (the engine's in process, the server's from ``/proc``; not the
client's), which load moves less. Three measurements:

- in process: ``agent.stream(...)``, every hpd_agent event iterated (what the engine makes);
- SSE: a real ``hpd-agent serve`` child process (journaled in SQLite, as it always is), the
  whole ``POST /agent`` response read by an httpx client; events/s = AG-UI events / seconds
  from sending the request to the last byte;
- pydantic-ai: the same tree with pydantic-ai 2.68 (FunctionModels streaming the same pieces;
  the speaker tool runs the sub-agent with ``run_stream_events`` and forwards its text to the
  client through ``ctx.emit``, pydantic-ai's way to send a tool's own AG-UI events) through
  its AG-UI adapter (``AGUIAdapter.dispatch_request``) served by uvicorn in a child process.
  Skipped when ``pydantic-ai-slim[ag-ui]`` is not installed (the ``bench`` extra pins it).

Usage: ``python benchmarks/bench_web_fanout.py [--agents 100] [--tokens 200] [--repeat 5]
[--no-peer] [--profile PATH]``; prints a table, the ratio line and one ``RESULT_JSON {...}``
line. ``--profile PATH``: the server runs under cProfile (its stats in PATH; the top
functions printed per AG-UI event; startup included). Served by hand:
``hpd-agent serve benchmarks/bench_web_fanout.py:agent`` with the prompt ``fanout 100 200``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from hpd_agent import Agent  # noqa: E402
from hpd_agent.messages import Message, ToolResultMessage, UserMessage  # noqa: E402
from hpd_agent.models import ModelRequestParams, ModelResponse  # noqa: E402
from hpd_agent.testing import FunctionModel, text, tool_call  # noqa: E402

TOKEN = "tok "


def _speaker_turn(messages: Sequence[Message], info: ModelRequestParams) -> ModelResponse:
    query = next(m.content for m in messages if isinstance(m, UserMessage))
    return text(TOKEN * int(query))


def _root_turn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
    if any(isinstance(m, ToolResultMessage) for m in messages):
        return text("done")
    prompt = next(m.content for m in messages if isinstance(m, UserMessage))
    _, agents, tokens = prompt.split()
    return [tool_call("speaker", _id=f"c{i}", query=tokens) for i in range(int(agents))]


def agent() -> Agent:
    """The served tree: ``fanout A T`` calls the speaker A times, each streaming T tokens."""
    speaker = Agent(
        "speaker",
        description="Says its query's number of tokens.",
        model=FunctionModel(_speaker_turn, name="speaker", chunk_size=len(TOKEN)),
    )
    return Agent("root", model=FunctionModel(_root_turn, name="root"), tools=[speaker.as_tool()])


def in_process(agents: int, tokens: int) -> Callable[[], tuple[float, int, float]]:
    """One streamed run per call (no store: the engine alone): its seconds, events and CPU
    seconds."""
    import anyio

    root = agent()

    async def once() -> tuple[float, int, float]:
        count = 0
        start, cpu = time.perf_counter(), time.process_time()
        async with root.stream(f"fanout {agents} {tokens}") as run:
            async for _ in run:
                count += 1
        assert run.result.output == "done", run.result
        return time.perf_counter() - start, count, time.process_time() - cpu

    return lambda: anyio.run(once)


def read_sse(url: str, body: dict[str, Any], deltas: int) -> tuple[float, int]:
    """Seconds to read one whole ``POST /agent`` response, and its AG-UI events (checked:
    ``deltas`` TEXT_MESSAGE_CONTENT, ending with RUN_FINISHED)."""
    import httpx

    with httpx.Client(timeout=300) as client:
        start = time.perf_counter()
        with client.stream("POST", f"{url}/agent", json=body) as response:
            raw = b"".join(response.iter_bytes())
        elapsed = time.perf_counter() - start
    blocks = [b for b in raw.decode().split("\n\n") if b.startswith("data: ")]
    events = [json.loads(b[6:]) for b in blocks]
    contents = sum(1 for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert contents >= deltas, (contents, deltas)
    return elapsed, len(events)


def _cpu_seconds(pid: int) -> float | None:
    """A process's CPU time so far (user + system; Linux ``/proc``), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """A server in a child process (``command``, ``--port 0`` already in it), for ``with``."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.url = ""
        self.proc: Any = None

    def __enter__(self) -> Server:
        from bench_web import _start  # pyright: ignore[reportMissingImports, reportUnknownVariableType]

        env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'benchmarks'}"}
        self.proc, self.url = _start(self.command, env)
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGINT)  # a clean exit: a profile (--profile) is written
        self.proc.wait(60)

    def read(self, thread: str, prompt: str, deltas: int) -> tuple[float, int, float | None]:
        """One ``POST /agent``: seconds, AG-UI events, the server's CPU seconds (or None)."""
        from bench_web import _body  # pyright: ignore[reportMissingImports, reportUnknownVariableType]

        before = _cpu_seconds(self.proc.pid)
        elapsed, events = read_sse(self.url, _body(thread, prompt), deltas)
        after = _cpu_seconds(self.proc.pid)
        cpu = None if before is None or after is None else after - before
        return elapsed, events, cpu


def _median_rate(times: list[float], events: int) -> tuple[float, int]:
    median = statistics.median(times)
    return median, round(events / median)


def measure(args: argparse.Namespace, folder: str) -> dict[str, Any]:
    """In process and over SSE, alternately, ``repeat`` rounds after a warm-up of each:
    the figures and the ratio of the rates (SSE / in process), per round and overall."""
    a, t, repeat = args.agents, args.tokens, args.repeat
    prompt, deltas = f"fanout {a} {t}", a * t
    serve = [sys.executable, "-m", "hpd_agent.cli", "serve", f"{__file__}:agent", "--quiet"]
    if args.profile:
        serve[1:1] = ["-m", "cProfile", "-o", args.profile]
    engine = in_process(a, t)
    local: list[float] = []
    sse: list[float] = []
    cpu: list[float] = []
    local_cpu: list[float] = []
    local_events = sse_events = 0
    with Server([*serve, "--port", "0", "--store", f"{folder}/web.db"]) as server:
        engine()
        server.read("warm", prompt, deltas)  # warm-ups
        for i in range(repeat):
            seconds, local_events, used = engine()
            local.append(seconds)
            local_cpu.append(used)
            seconds, sse_events, used = server.read(f"t{i}", prompt, deltas)
            sse.append(seconds)
            cpu += [] if used is None else [used]
    median, rate = _median_rate(local, local_events)
    result: dict[str, Any] = {"agents": a, "tokens": t, "repeat": repeat}
    result.update(in_process_s=round(median, 4), in_process_events=local_events)
    result.update(in_process_events_per_s=rate)
    median, sse_rate = _median_rate(sse, sse_events)
    result.update(sse_s=round(median, 4), sse_events=sse_events, sse_events_per_s=sse_rate)
    result.update(sse_s_all=[round(x, 4) for x in sse])
    local_us = statistics.median(local_cpu) / local_events * 1e6
    result.update(in_process_cpu_us_per_event=round(local_us, 2))
    # The server's CPU (Linux): a ratio that the machine's other load moves less; none when
    # a tiny run took less than a clock tick (the smoke test's).
    if cpu and statistics.median(cpu) > 0:
        server_us = statistics.median(cpu) / sse_events * 1e6
        result.update(sse_server_cpu_s=round(statistics.median(cpu), 4))
        result.update(sse_server_cpu_us_per_event=round(server_us, 2))
        result.update(cpu_ratio=round(local_us / server_us, 3))
    rounds = [(sse_events / s) / (local_events / x) for s, x in zip(sse, local, strict=True)]
    result.update(ratio=round(sse_rate / rate, 3), ratio_rounds=[round(r, 3) for r in rounds])
    return result


def pydantic_ai(args: argparse.Namespace) -> dict[str, Any]:
    """The same tree through pydantic-ai's AG-UI adapter (skipped when not installed)."""
    try:
        import pydantic_ai  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return {"pydantic_ai": "skipped: pydantic-ai-slim[ag-ui] not installed"}
    a, t = args.agents, args.tokens
    prompt, deltas = f"fanout {a} {t}", a * t
    me = [sys.executable, str(Path(__file__).with_name("bench_web_fanout_pydantic_ai.py"))]
    with Server(me) as server:
        server.read("warm", prompt, deltas)
        runs = [server.read(f"t{i}", prompt, deltas) for i in range(args.repeat)]
    median, rate = _median_rate([r[0] for r in runs], runs[0][1])
    return {
        "pydantic_ai_sse_s": round(median, 4),
        "pydantic_ai_sse_events": runs[0][1],
        "pydantic_ai_events_per_s": rate,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--profile", metavar="PATH", help="run the server under cProfile, its stats to PATH"
    )
    parser.add_argument("--no-peer", action="store_true", help="skip pydantic-ai")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        result = measure(args, folder)
    if args.profile:
        _print_profile(args.profile, args.repeat + 1, result["sse_events"])
    if not args.no_peer:
        result.update(pydantic_ai(args))
    for key, value in result.items():
        print(f"{key:>28}: {value}")
    rounds = result["ratio_rounds"]
    line = f"ratio SSE / in process: {result['ratio']:.3f} "
    line += f"(rounds {min(rounds):.3f}-{max(rounds):.3f}; "
    line += f"{result['sse_events_per_s']:,} vs {result['in_process_events_per_s']:,} events/s)"
    if "cpu_ratio" in result:
        line += f"; CPU per event {result['cpu_ratio']:.3f}"
    print(line)
    print("RESULT_JSON " + json.dumps(result))
    return 0


def _print_profile(path: str, requests: int, events: int) -> None:
    """The server's profile: the top functions by own time, in µs per AG-UI event."""
    import pstats

    stats = pstats.Stats(path)
    rows: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = vars(stats)["stats"]
    top = sorted(rows.items(), key=lambda kv: kv[1][2], reverse=True)[:30]
    per = 1e6 / (requests * events)
    print(f"server profile ({requests} requests, µs per AG-UI event): own / cumulative")
    for (file, line, name), (_, calls, own, cum, _) in top:
        where = f"{Path(file).name}:{line}({name})"
        print(f"  {own * per:7.2f} {cum * per:8.2f}  {calls:>8}  {where}")


if __name__ == "__main__":
    raise SystemExit(main())
