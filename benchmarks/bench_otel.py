"""What tracing costs: hpd_agent.otel off, installed with no SDK, and with an SDK.

    python benchmarks/bench_otel.py [--turns 200] [--trees 200] [--rounds 15]

Two workloads with scripted models (no network), the shapes of bench_hpd_agent.py's W1 and W3:

- loop: one agent, ``--turns`` model turns with one noop tool call each (2 spans a turn:
  ``chat`` and ``execute_tool``); reported per turn.
- tree: agents as tools, depth 3 (root -> child -> grandchild; 11 spans a run); per run.

Three modes, interleaved round by round in one process so drift on a shared machine hits
them alike:

- ``off``: ``instrument()`` never called, no SDK set globally: the default tracing looks
  once per root run whether an SDK is set, and sits the run out (``off2``: the same
  again, a control: the gap between the two is the noise floor of the machine at that
  moment);
- ``noop``: ``instrument()`` with the global providers while no SDK is set (the API's
  no-ops): the hook sits the runs out, so this must cost what ``off`` costs;
- ``sdk``: ``instrument()`` with an SDK ``TracerProvider`` whose processor hands every span
  to an exporter that drops it, and an SDK ``MeterProvider`` with an in-memory reader
  (aggregation done, never collected). ``(sdk - off) / spans`` is the cost of one span,
  its metrics included.

Times are CPU seconds of the process (``time.process_time``), not wall time: see ``timed``.
Prints a table of medians (and minimums) and one ``RESULT_JSON`` line.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's hpd_agent

import anyio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from hpd_agent import Agent, tool
from hpd_agent.messages import Message, ToolCall, ToolResultMessage, Usage
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.otel import instrument, restore_default
from hpd_agent.testing import FunctionModel

U = Usage(requests=1, input_tokens=1, output_tokens=1)
TREE_SPANS = 11  # 3 invoke_agent + 6 chat + 2 execute_tool


class DropExporter(SpanExporter):
    """An exporter that drops every span (the SDK's own cost, no I/O)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


@tool
async def noop() -> str:
    """Trivial tool returning a constant."""
    return "ok"


def _last_result(messages: Sequence[Message]) -> ToolResultMessage | None:
    last = messages[-1]
    return last if isinstance(last, ToolResultMessage) else None


def loop_agent(turns: int) -> Agent:
    async def loop(messages: Sequence[Message], info: ModelRequestParams) -> ModelResponse:
        last = _last_result(messages)
        n = 0 if last is None else int(last.tool_call_id[1:])
        if n >= turns:
            return ModelResponse(text="done", usage=U)
        call = ToolCall(id=f"c{n + 1}", name="noop", arguments="{}")
        return ModelResponse(tool_calls=(call,), usage=U)

    return Agent("loop", model=FunctionModel(loop), tools=[noop], max_turns=turns + 1)


def delegating(tool_name: str | None) -> FunctionModel:
    async def step(messages: Sequence[Message], info: ModelRequestParams) -> ModelResponse:
        last = _last_result(messages)
        if tool_name is None or last is not None:
            return ModelResponse(text="done", usage=U)
        call = ToolCall(id="d1", name=tool_name, arguments='{"query": "go"}')
        return ModelResponse(tool_calls=(call,), usage=U)

    return FunctionModel(step)


def tree_agent() -> Agent:
    grandchild = Agent("grandchild", model=delegating(None))
    child = Agent("child", model=delegating("grandchild"), tools=[grandchild.as_tool()])
    return Agent("root", model=delegating("child"), tools=[child.as_tool()])


def set_mode(mode: str, sdk: tuple[TracerProvider, MeterProvider]) -> None:
    restore_default()
    if mode == "noop":
        instrument()
    elif mode == "sdk":
        instrument(tracer_provider=sdk[0], meter_provider=sdk[1])


async def timed(fn: Callable[[], Awaitable[Any]], n: int) -> float:
    # CPU time of this process: on a machine shared with other jobs, wall time mostly
    # measures how often the scheduler let us run; the work is all on this one thread.
    gc.collect()
    t0 = time.process_time()
    await fn()
    return (time.process_time() - t0) / n * 1e6


async def measure(
    turns: int, trees: int, rounds: int, modes: tuple[str, ...]
) -> dict[str, dict[str, list[float]]]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(DropExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    sdk = (tracer_provider, meter_provider)
    loop, tree = loop_agent(turns), tree_agent()

    async def loop_run() -> None:
        assert (await loop.run("go")).output == "done"

    async def tree_runs() -> None:
        for _ in range(trees):
            await tree.run("go")

    samples: dict[str, dict[str, list[float]]] = {
        w: {m: [] for m in modes} for w in ("loop", "tree")
    }
    for mode in modes:  # warm-up
        set_mode(mode, sdk)
        await loop_run()
        await tree_runs()
    for r in range(rounds):
        order = modes if r % 2 == 0 else modes[::-1]
        for mode in order:
            set_mode(mode, sdk)
            samples["loop"][mode].append(await timed(loop_run, turns))
            samples["tree"][mode].append(await timed(tree_runs, trees))
    restore_default()
    return samples


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=200, help="loop: model turns per run")
    p.add_argument("--trees", type=int, default=200, help="tree: runs per sample")
    p.add_argument("--rounds", type=int, default=15, help="samples per mode")
    p.add_argument(
        "--modes",
        default="off,off2,noop,sdk",
        help="comma-separated, from off,off2,noop,sdk (off first)",
    )
    args = p.parse_args()
    modes = tuple(args.modes.split(","))
    if modes[0] != "off" or not set(modes) <= {"off", "off2", "noop", "sdk"}:
        p.error("--modes: a comma-separated list of off, off2, noop, sdk starting with off")
    samples = anyio.run(measure, args.turns, args.trees, args.rounds, modes)
    result: dict[str, Any] = {}
    spans = {"loop": 2, "tree": TREE_SPANS}
    unit = {"loop": "us/turn", "tree": "us/run"}
    for workload, by_mode in samples.items():
        med = {m: statistics.median(v) for m, v in by_mode.items()}
        low = {m: min(v) for m, v in by_mode.items()}
        result[workload] = {"median": med, "min": low}
        print(f"{workload} ({unit[workload]}, {args.rounds} samples per mode)")
        for m in med:
            print(f"  {m:5} median {med[m]:8.2f}  min {low[m]:8.2f}")
        for other in ("off2", "noop"):
            if other in med:
                delta = (med[other] - med["off"]) / med["off"] * 100
                result[workload][f"{other}_vs_off_percent"] = delta
                print(f"  {other} vs off: {delta:+.1f} % (medians)")
        if "sdk" in med:
            per_span = (med["sdk"] - med["off"]) / spans[workload]
            result[workload]["us_per_span_sdk"] = per_span
            print(f"  sdk: {per_span:.2f} us per span, its metrics included")
    print("RESULT_JSON " + json.dumps(result))


if __name__ == "__main__":
    main()
