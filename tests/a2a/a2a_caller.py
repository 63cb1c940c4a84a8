"""The calling side of the durable A2A tests: an Orchestrator whose only tool is a remote
Planner (``RemoteAgent``), with a model that writes one line per call to a ledger.

Also a child process: ``python a2a_caller.py start URL DB LEDGER`` runs it with a SQLite
store and prints ``ASKED <run id> <request id>`` when the remote's question reaches the
stream (then waits: the test kills it there); ``python a2a_caller.py resume URL DB LEDGER
RUN_ID`` resumes the run and prints ``RESULT <status> <output>``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

from hpd_agent import Agent, ClarificationRequest
from hpd_agent.a2a import RemoteAgent
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import FunctionModel, text, tool_call


def build(url: str, ledger: Path) -> Agent:
    """The Orchestrator: one call of the remote Planner, then a final text with its result."""

    def reply(messages: list[Any], params: Any) -> Any:
        with ledger.open("a") as f:
            f.write("model call\n")
        last = messages[-1]
        if last.kind == "tool":
            return text(f"final: {last.content}")
        return tool_call("Planner", query="plan a trip")

    remote = RemoteAgent(url, name="Planner")
    return Agent("Orchestrator", model=FunctionModel(reply), tools=[remote.as_tool()])


async def _start(url: str, db: str, ledger: Path) -> None:
    store = SQLiteStore(db)
    async with build(url, ledger).stream("go", store=store) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                print(f"ASKED {run.run_id} {event.request_id}", flush=True)


async def _resume(url: str, db: str, ledger: Path, run_id: str) -> None:
    store = SQLiteStore(db)
    try:
        result = await build(url, ledger).resume(run_id, store=store)
    finally:
        await store.aclose()
    print(f"RESULT {result.status} {result.output}", flush=True)


if __name__ == "__main__":
    command, url, db, ledger = sys.argv[1:5]
    if command == "start":
        anyio.run(_start, url, db, Path(ledger))
    else:
        anyio.run(_resume, url, db, Path(ledger), sys.argv[5])
