"""AG-UI events per second from one ``hpd-agent serve`` process to one client, for a run
whose root fans out to many sub-agents streaming text.

Workload (``--agents`` A, ``--tokens`` T): the root's model calls the ``speaker`` sub-agent A
times in one turn (the calls run in parallel); each call's model streams T single-token text
deltas (``"tok "``), then the root answers ``done``. Over AG-UI that is, per call,
SUBAGENT_STARTED, TEXT_MESSAGE_START, T TEXT_MESSAGE_CONTENT, TEXT_MESSAGE_END,
SUBAGENT_FINISHED, plus the root's TOOL_CALL_* events: A x (T + 8) + about 10 events.

Three measurements, each the median of ``--repeat`` runs after one warm-up:

- in process: ``agent.stream(...)``, every hpd_agent event iterated (what the engine makes);
- SSE: a real ``hpd-agent serve`` child process (journaled in SQLite, as it always is), the
  whole ``POST /agent`` response read by an httpx client; events/s = AG-UI events / seconds
  from sending the request to the last byte;
- pydantic-ai: the same tree with pydantic-ai 2.68 (FunctionModels streaming the same pieces;
  the speaker tool runs the sub-agent with ``run_stream_events`` and forwards its text to the
  client through ``ctx.emit``, pydantic-ai's way to send a tool's own AG-UI events) through
  its AG-UI adapter (``AGUIAdapter.dispatch_request``) served by uvicorn in a child process.
  Skipped when ``pydantic-ai-slim[ag-ui]`` is not installed (the ``bench`` extra pins it).

Usage: ``python benchmarks/bench_web_fanout.py [--agents 100] [--tokens 200] [--repeat 5]``;
prints a table and one ``RESULT_JSON {...}`` line. Served by hand:
``hpd-agent serve benchmarks/bench_web_fanout.py:agent`` with the prompt ``fanout 100 200``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
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


def in_process(agents: int, tokens: int, repeat: int) -> tuple[list[float], int]:
    """Seconds per streamed run (no store: the engine alone), and its events."""
    import anyio

    root = agent()

    async def once() -> tuple[float, int]:
        count = 0
        start = time.perf_counter()
        async with root.stream(f"fanout {agents} {tokens}") as run:
            async for _ in run:
                count += 1
        assert run.result.output == "done", run.result
        return time.perf_counter() - start, count

    async def main() -> tuple[list[float], int]:
        await once()  # warm-up
        runs = [await once() for _ in range(repeat)]
        return [r[0] for r in runs], runs[0][1]

    return anyio.run(main)


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


def _median_rate(times: list[float], events: int) -> tuple[float, int]:
    median = statistics.median(times)
    return median, round(events / median)


def _through(command: list[str], prompt: str, deltas: int, repeat: int) -> tuple[list[float], int]:
    from bench_web import _body, _start  # pyright: ignore[reportMissingImports, reportUnknownVariableType]

    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'benchmarks'}"}
    proc, url = _start(command, env)
    try:
        read_sse(url, _body("warm", prompt), deltas)
        runs = [read_sse(url, _body(f"t{i}", prompt), deltas) for i in range(repeat)]
    finally:
        proc.terminate()
        proc.wait(30)
    return [r[0] for r in runs], runs[0][1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    a, t, repeat = args.agents, args.tokens, args.repeat
    prompt, deltas = f"fanout {a} {t}", a * t
    result: dict[str, Any] = {"agents": a, "tokens": t, "repeat": repeat}
    times, events = in_process(a, t, repeat)
    median, rate = _median_rate(times, events)
    result.update(in_process_s=round(median, 4), in_process_events=events)
    result.update(in_process_events_per_s=rate)
    with tempfile.TemporaryDirectory() as folder:
        serve = [sys.executable, "-m", "hpd_agent.cli", "serve", f"{__file__}:agent"]
        command = [*serve, "--port", "0", "--store", f"{folder}/web.db"]
        times, events = _through(command, prompt, deltas, repeat)
    median, rate = _median_rate(times, events)
    result.update(sse_s=round(median, 4), sse_events=events, sse_events_per_s=rate)
    result.update(sse_s_all=[round(x, 4) for x in times])
    try:
        import pydantic_ai  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        result["pydantic_ai"] = "skipped: pydantic-ai-slim[ag-ui] not installed"
    else:
        me = [sys.executable, str(Path(__file__).with_name("bench_web_fanout_pydantic_ai.py"))]
        times, events = _through(me, prompt, deltas, repeat)
        median, rate = _median_rate(times, events)
        result.update(pydantic_ai_sse_s=round(median, 4), pydantic_ai_sse_events=events)
        result.update(pydantic_ai_events_per_s=rate)
    for key, value in result.items():
        print(f"{key:>26}: {value}")
    print("RESULT_JSON " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
