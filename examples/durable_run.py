"""A run that stops at a question, survives its process, and resumes with the answer.

Offline (scripted models stand in for LLMs). Run it twice:

    python examples/durable_run.py            # starts, stops at the question, prints its id
    hpd-agent pending --db durable.db         # the question is in the store
    python examples/durable_run.py ANSWER     # answers it and resumes: nothing runs twice

The store is ``durable.db`` in the current directory; the resume removes it once the run is
done, and a new first step starts over, so the pair can be run again and again.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from hpd_agent import Agent, ask_user, tool
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import FunctionModel, text, tool_call

DB = "durable.db"
RUN_ID = "run_example"


@tool
def scaffold(name: str) -> str:
    """Create the project skeleton (a side effect that must not run twice).

    Args:
        name: Project name.
    """
    print(f"  [side effect] scaffolding {name}")
    return f"scaffolded {name}"


def coder_turn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
    if info.turn == 0:
        return [
            tool_call("scaffold", name="api"),
            tool_call("ask_user", question="Which web framework?", options=["Express", "FastAPI"]),
        ]
    results = [m.content for m in messages if isinstance(m, ToolResultMessage)]
    return text(f"{results[0]}, using {results[1]}")


def orchestrator_turn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
    if info.turn == 0:
        return tool_call("CodingAgent", query="Build the API")
    return text(f"Done: {messages[-1].content if messages else ''}")


def build() -> Agent:
    coder = Agent("CodingAgent", model=FunctionModel(coder_turn), tools=[scaffold, ask_user()])
    return Agent("Orchestrator", model=FunctionModel(orchestrator_turn), tools=[coder.as_tool()])


def remove_store() -> None:
    for path in (DB, f"{DB}-wal", f"{DB}-shm", f"{DB}-journal"):
        Path(path).unlink(missing_ok=True)


async def main(answer: str | None) -> None:
    store = SQLiteStore(DB)
    try:
        if answer is None:
            result = await build().run(
                "Build an API", store=store, run_id=RUN_ID, on_unhandled="interrupt"
            )
            for request in result.pending:
                print(f"{result.status}: {request.request_id} waits for an answer")
        else:
            (pending,) = await store.list_requests(run_id=RUN_ID)
            result = await build().resume(RUN_ID, store=store, answers={pending.request_id: answer})
            print(result.output)
    finally:
        await store.aclose()


if __name__ == "__main__":
    answer = sys.argv[1] if len(sys.argv) > 1 else None
    if answer is None:
        remove_store()  # a new first step starts over, whatever an earlier one left
    elif not Path(DB).exists():
        sys.exit("no stopped run here: run `python examples/durable_run.py` first")
    anyio.run(main, answer)
    if answer is not None:
        remove_store()  # the run is done: nothing is left behind
