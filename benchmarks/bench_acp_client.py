"""What using an ACP agent as a sub-agent costs: one call with a permission round trip through
``ACPAgent(...).as_tool()`` against the same call through the ACP Python SDK's client alone.

    python benchmarks/bench_acp_client.py [--calls 100] [--rounds 7]

Both clients drive the same agent in a child process on stdio: the minimal SDK agent of
``bench_acp.py`` (``--serve-sdk``), whose turn is a ``tool_call`` update, a
``session/request_permission``, the tool's ``tool_call_update``, an ``agent_message_chunk``,
then ``end_turn``. A call is a fresh session and one prompt on it, the permission approved at
once:

- ``sdk``: ``acp.spawn_agent_process`` with a ``Client`` that approves with the first option;
  a call is ``new_session`` then ``prompt`` (the floor: no run around it);
- ``hpd``: a root run whose scripted model calls the ``ACPAgent`` tool once per turn; the
  permission reaches the run's stream as a ``PermissionRequest`` and the stream's reader
  answers it with ``Approve()`` (the ``allow_once`` option goes back). A call is the tool
  call, ``ToolCallStarted`` to ``ToolCallFinished`` as the reader sees them: ``session/new``,
  ``session/prompt``, the question raised, answered and mapped to the agent's option.

Per call: wall time, calls 2..N of a process (the first starts it), the median of a round;
rounds interleaved (each client going first in turn) so that drift on a shared machine hits
both alike. The figures: each client's median over rounds, and the ratio, the median of the
rounds' hpd / sdk. Prints a table and one ``RESULT_JSON`` line; the target is a ratio <= 1.2.
``--cpus`` as in ``bench_acp.py`` (one CPU by default: the processes' work, not where the
scheduler puts them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's hpd_agent

import acp
import anyio
from acp import schema
from bench_acp import pin

from hpd_agent import Agent, Approve, PermissionRequest, ToolCallFinished, ToolCallStarted
from hpd_agent.acp import ACPAgent
from hpd_agent.testing import ScriptedModel, text, tool_call

HERE = Path(__file__).resolve().parent
TARGET = 1.2
AGENT = [sys.executable, str(HERE / "bench_acp.py"), "--serve-sdk"]
"""The agent both clients drive: bench_acp.py's minimal SDK agent."""


class Approver:
    """The SDK's client: approves each permission with its first option (``allow_once``)."""

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        picked = schema.AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        return schema.RequestPermissionResponse(outcome=picked)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None


async def sdk_round(calls: int) -> float:
    """Median seconds per call of calls 2..N through the SDK's client."""
    spawned = acp.spawn_agent_process(Approver(), AGENT[0], *AGENT[1:], cwd=HERE)
    async with spawned as (conn, _process):
        await conn.initialize(protocol_version=1)
        times: list[float] = []
        for _ in range(calls):
            start = time.perf_counter()
            session = (await conn.new_session(cwd=str(HERE))).session_id
            answer = await conn.prompt(session_id=session, prompt=[acp.text_block("go")])
            times.append(time.perf_counter() - start)
            assert answer.stop_reason == "end_turn"
        return statistics.median(times[1:])


async def hpd_round(calls: int) -> float:
    """Median seconds per call of calls 2..N through ``ACPAgent`` in a root run."""
    tool = ACPAgent(AGENT[0], AGENT[1:], name="Bench", cwd=HERE).as_tool()
    script: list[Any] = [tool_call("Bench", query="go") for _ in range(calls)]
    model = ScriptedModel([*script, text("done")])
    root = Agent("Root", model=model, tools=[tool], max_turns=calls + 1)
    times: list[float] = []
    start = 0.0
    async with root.stream("go") as run:
        async for event in run:
            if isinstance(event, ToolCallStarted) and event.tool_name == "Bench":
                start = time.perf_counter()
            elif isinstance(event, PermissionRequest):
                await run.respond(event.request_id, Approve())
            elif isinstance(event, ToolCallFinished) and event.tool_name == "Bench":
                times.append(time.perf_counter() - start)
                assert not event.is_error and event.result == "done", event.result
    assert run.result.status == "completed" and len(times) == calls
    return statistics.median(times[1:])


async def measure(calls: int, rounds: int) -> dict[str, Any]:
    got: dict[str, list[float]] = {"sdk": [], "hpd": []}
    for r in range(rounds):
        pair = [("sdk", sdk_round), ("hpd", hpd_round)]
        for name, one_round in pair if r % 2 == 0 else reversed(pair):
            got[name].append(await one_round(calls))
    s, h = statistics.median(got["sdk"]), statistics.median(got["hpd"])
    # Each round's pair ran back to back: the median of their ratios resists the machine's
    # drift better than the ratio of the medians.
    ratios = [hr / sr for sr, hr in zip(got["sdk"], got["hpd"], strict=True)]
    return {
        "sdk_ms": round(s * 1e3, 4),
        "hpd_ms": round(h * 1e3, 4),
        "added_ms": round((h - s) * 1e3, 4),
        "ratio": round(statistics.median(ratios), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cpus", choices=("one", "all"), default="one")
    a = ap.parse_args()
    if a.calls < 2 or a.rounds < 1:
        ap.error("--calls must be at least 2 (the first starts the process), --rounds at least 1")
    print(f"cpus: {pin(a.cpus)}")
    row = anyio.run(measure, a.calls, a.rounds, backend="asyncio")
    print(f"{'sdk ms':>10}{'hpd ms':>10}{'added ms':>10}{'ratio':>8}")
    print(
        f"{row['sdk_ms']:>10.3f}{row['hpd_ms']:>10.3f}{row['added_ms']:>10.3f}{row['ratio']:>8.3f}"
    )
    met = "met" if row["ratio"] <= TARGET else "not met"
    print(f"ratio {row['ratio']:.3f} (target <= {TARGET}: {met})")
    print("RESULT_JSON " + json.dumps({**row, "cpus": a.cpus, "target": TARGET}))


if __name__ == "__main__":
    main()
