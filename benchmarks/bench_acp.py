"""What serving an agent over ACP costs: one permission round trip through ``hpd-agent acp``
against the same through a minimal agent written with the ACP Python SDK alone.

    python benchmarks/bench_acp.py [--calls 100] [--rounds 5]

Both agents run in a child process on stdio, driven by the SDK's client
(``acp.spawn_agent_process``), which approves every permission at once. A call is one
``session/prompt`` on a fresh session, answered after the same messages from both agents
(the same three options, the same ``_meta``): a ``tool_call`` update, a
``session/request_permission`` (approved), the tool's ``tool_call_update``, an
``agent_message_chunk``, then ``end_turn``.

- ``sdk``: an ``acp.Agent`` that sends those messages itself (no model, no tool: the floor);
- ``hpd``: ``hpd-agent acp bench_acp:agent``, an agent whose scripted model calls ``deploy``
  (needs approval) and then answers. Its figure includes the run: a model turn, the tool
  call, its permission on the run's stream, the second model turn, the turn's history kept.

Per call: the wall time of ``session/prompt`` (request to response), calls 2..N of a
process, rounds interleaved so that drift on a shared machine hits both alike; the ratio is
the median of the rounds' hpd / sdk. Prints a table and one ``RESULT_JSON`` line; the
target is hpd / sdk <= 1.2.

``--cpus one`` (the default) runs the client and the agent on one CPU: each call's time is
then the two processes' work on its path. With both CPUs of a 2-CPU machine (``--cpus
all``) where the scheduler places the two processes decides more than either's work does:
the same command gives ratios from 1.0 to 1.6 run after run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's hpd_agent

import acp  # noqa: E402
import anyio  # noqa: E402
from acp import schema  # noqa: E402

from hpd_agent import Agent, tool  # noqa: E402
from hpd_agent.messages import Message, ToolResultMessage  # noqa: E402
from hpd_agent.models import ModelRequestParams  # noqa: E402
from hpd_agent.testing import FunctionModel, Step, text, tool_call  # noqa: E402

TARGET = 1.2


# -- the hpd agent ------------------------------------------------------------------------------
@tool(requires_approval=True)
async def deploy(target: str) -> str:
    """Deploy (needs approval).

    Args:
        target: Where to.
    """
    return f"deployed to {target}"


def _step(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    if isinstance(messages[-1], ToolResultMessage):
        return text("done")
    return tool_call("deploy", target="prod")


agent = Agent("Bench", model=FunctionModel(_step), tools=[deploy])


# -- the SDK's minimal agent --------------------------------------------------------------------
META = {"hpd_agent": {"agent_path": ["Bench"], "tool_name": "deploy"}}
"""What ``hpd-agent acp`` puts in ``_meta``: the SDK agent sends it too (the same bytes)."""


class SDKAgent:
    """The same messages as the hpd agent's turn, sent by hand."""

    def on_connect(self, conn: Any) -> None:
        self.conn = conn
        self.sessions = 0

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(protocol_version=1)

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        self.sessions += 1
        return schema.NewSessionResponse(session_id=f"s{self.sessions}")

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        call = acp.start_tool_call(
            "call_1", "Bench: deploy", status="in_progress", raw_input={"target": "prod"}
        )
        call.field_meta = META
        await self.conn.session_update(session_id, call)
        options = [
            schema.PermissionOption(
                option_id="approve_once", name="Approve once", kind="allow_once"
            ),
            schema.PermissionOption(
                option_id="approve_run", name="Approve for the rest of the run", kind="allow_always"
            ),
            schema.PermissionOption(option_id="deny", name="Deny", kind="reject_once"),
        ]
        asked = schema.ToolCallUpdate(
            tool_call_id="call_1",
            title="Bench: deploy",
            raw_input={"target": "prod"},
            field_meta=META,
        )
        answer = await self.conn.request_permission(session_id, asked, options)
        assert answer.outcome.outcome == "selected"
        result = acp.tool_content(acp.text_block("deployed to prod"))
        done = acp.update_tool_call("call_1", status="completed", content=[result])
        await self.conn.session_update(session_id, done)
        await self.conn.session_update(session_id, acp.update_agent_message_text("done"))
        return schema.PromptResponse(stop_reason="end_turn")


# -- the client ---------------------------------------------------------------------------------
class Approver:
    """The SDK's client: approves each permission with its first option."""

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        picked = schema.AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        return schema.RequestPermissionResponse(outcome=picked)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None


async def one_round(command: list[str], calls: int) -> float:
    """Median seconds per prompt of calls 2..N through the agent ``command`` starts."""
    env = {"PYTHONPATH": str(HERE.parent)}  # this checkout's hpd_agent in the child too
    spawned = acp.spawn_agent_process(Approver(), command[0], *command[1:], cwd=HERE, env=env)
    async with spawned as (conn, _process):
        await conn.initialize(protocol_version=1)
        times: list[float] = []
        for _ in range(calls):
            session = (await conn.new_session(cwd=str(HERE))).session_id
            start = time.perf_counter()
            answer = await conn.prompt(session_id=session, prompt=[acp.text_block("go")])
            times.append(time.perf_counter() - start)
            assert answer.stop_reason == "end_turn"
        return statistics.median(times[1:])


async def measure(calls: int, rounds: int) -> dict[str, Any]:
    hpd = [sys.executable, "-m", "hpd_agent.cli", "acp", "bench_acp:agent"]
    sdk = [sys.executable, str(HERE / "bench_acp.py"), "--serve-sdk"]
    got: dict[str, list[float]] = {"sdk": [], "hpd": []}
    for r in range(rounds):
        pair = [("sdk", sdk), ("hpd", hpd)]
        for name, command in pair if r % 2 == 0 else reversed(pair):
            got[name].append(await one_round(command, calls))
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


def pin(cpus: str) -> str:
    """Keep this process and the agents it starts on one CPU (``"one"``) where it can."""
    if cpus == "one" and hasattr(os, "sched_setaffinity"):
        first = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {first})
        return f"one (CPU {first}, client and agent)"
    return "all"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpus", choices=("one", "all"), default="one")
    ap.add_argument("--serve-sdk", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_sdk:
        import asyncio

        asyncio.run(acp.run_agent(SDKAgent()))
        return
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
