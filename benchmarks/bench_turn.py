"""Per-turn cost of the agent loop with no store (the hot path the journal hooks touch).

Run it against two trees to compare: ``PYTHONPATH=<tree> python benchmarks/bench_turn.py``.
Prints the median per-turn time of 15 runs of 300 one-tool turns.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import anyio

os.environ.setdefault("HPD_AGENT_ALLOW_MODEL_REQUESTS", "0")

from hpd_agent import Agent, tool
from hpd_agent.messages import Message
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, text, tool_call

TURNS = 300


@tool
def echo(value: int) -> int:
    """Echo.

    Args:
        value: A number.
    """
    return value


def model(messages: Sequence[Message], info: ModelRequestParams) -> Any:
    return tool_call("echo", value=info.turn) if info.turn < TURNS else text("end")


async def main() -> None:
    agent = Agent("Looper", model=FunctionModel(model), tools=[echo], max_turns=TURNS + 1)
    await agent.run("warm-up")
    times: list[float] = []
    for _ in range(15):
        start = time.perf_counter()
        await agent.run("go")
        times.append((time.perf_counter() - start) / (TURNS + 1))
    import hpd_agent

    print(
        f"{os.path.dirname(hpd_agent.__file__)}: median {statistics.median(times) * 1e6:.1f} us "
        f"per turn (min {min(times) * 1e6:.1f})"
    )


if __name__ == "__main__":
    anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio")
