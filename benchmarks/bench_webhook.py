"""What a webhook whose receiver is down costs a run: nothing measurable.

    python benchmarks/bench_webhook.py [--runs 200] [--rounds 15]

The workload: a root run whose tool asks one yes/no question, answered by the stream's
consumer the moment it is asked (two notifications a run: ``opened`` and ``resolved``), with
a scripted model (no network). Three modes, interleaved round by round in one process so
drift on a shared machine hits them alike (in each round the modes take turns run by run,
and the round's median run of each mode is kept):

- ``none``: no hook (``none2``: the same again, a control: the gap between the two is the
  noise floor of the machine at that moment);
- ``observer``: a hook whose request observers do nothing (what any observer costs);
- ``down``: ``hpd_agent.governance.Webhook`` to 127.0.0.1 on a port where nothing listens:
  every notification is handed to the delivery worker, whose tries are refused and
  retried with backoff on its own thread while the runs go on (past ``QUEUE_SIZE`` held,
  they are dropped).

Times are wall-clock microseconds per run (``time.perf_counter``): the worker's thread
competes with the run's for the interpreter, which CPU time of the process would not show.
Prints the median (and the lowest) of the rounds' medians and one ``RESULT_JSON`` line.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import socket
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's hpd_agent

import anyio

from hpd_agent import Agent, ClarificationRequest, RequestEvent, ToolContext, tool
from hpd_agent.events import RequestStatus
from hpd_agent.governance import Webhook
from hpd_agent.governance._deliveries import deliveries
from hpd_agent.hooks import Hook
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, text, tool_call

MODES = ("none", "none2", "observer", "down")


class Observer(Hook):
    """A hook observing requests and doing nothing: what any observer costs a run."""

    def request_opened(self, event: RequestEvent) -> None:
        return None

    def request_resolved(self, event: RequestEvent, status: RequestStatus, answer: Any) -> None:
        return None


@tool
async def go_ahead(ctx: ToolContext) -> str:
    """Ask before going ahead."""
    return "yes" if await ctx.confirm("Go ahead?") else "no"


def _script(messages: Sequence[Message], info: ModelRequestParams) -> Any:
    if isinstance(messages[-1], ToolResultMessage):
        return text("done")
    return tool_call("go_ahead")


ROOT = Agent("Root", model=FunctionModel(_script), tools=[go_ahead])


def down_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


async def one(hooks: list[Hook]) -> float:
    """Wall-clock microseconds of one run answering its question."""
    t0 = time.perf_counter()
    async with ROOT.stream("go", hooks=hooks) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                await run.respond(event.request_id, True)
    took = time.perf_counter() - t0
    assert run.result.output == "done"
    return took * 1e6


async def measure(runs: int, rounds: int) -> dict[str, list[float]]:
    """Per round, the median run of each mode, the modes taking turns run by run."""
    hooks: dict[str, list[Hook]] = {
        "none": [],
        "none2": [],
        "observer": [Observer()],
        "down": [Webhook(down_url())],
    }
    for mode in MODES:  # warm-up
        for _ in range(20):
            await one(hooks[mode])
    medians: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(rounds):
        gc.collect()
        took: dict[str, list[float]] = {m: [] for m in MODES}
        for i in range(runs):
            for mode in MODES if i % 2 == 0 else MODES[::-1]:
                took[mode].append(await one(hooks[mode]))
        for mode in MODES:
            medians[mode].append(statistics.median(took[mode]))
    return medians


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=200, help="runs of each mode per round")
    p.add_argument("--rounds", type=int, default=15, help="rounds (a median of each)")
    args = p.parse_args()
    # One warning a failed try: the point is what the run pays, not the log's cost here.
    logging.getLogger("hpd_agent.governance").setLevel(logging.CRITICAL)
    samples = anyio.run(measure, args.runs, args.rounds)
    med = {m: statistics.median(v) for m, v in samples.items()}
    low = {m: min(v) for m, v in samples.items()}
    result: dict[str, Any] = {"median_us_per_run": med, "min_us_per_run": low}
    print(
        f"one question a run, answered at once (us/run: medians of {args.rounds} rounds' medians)"
    )
    for m in MODES:
        print(f"  {m:8} median {med[m]:8.1f}  min {low[m]:8.1f}")
    for other, base in (("none2", "none"), ("down", "none"), ("down", "observer")):
        delta = (med[other] - med[base]) / med[base] * 100
        result[f"{other}_vs_{base}_percent"] = delta
        gap = med[other] - med[base]
        print(f"  {other} vs {base}: {delta:+.1f} % ({gap:+.1f} us, medians)")
    deliveries().flush(0)  # not waited for: the receiver is down, retries go on a while
    print("RESULT_JSON " + json.dumps(result))


if __name__ == "__main__":
    main()
