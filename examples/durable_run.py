"""A run that stops at a question, survives its process, and resumes with the answer.

Offline (scripted models stand in for LLMs). Run it, answer, run it again:

    python examples/durable_run.py                      # starts; stops at the question
    hpd-agent pending --store durable.db                # the question: 1. Express  2. FastAPI
    hpd-agent answer REQUEST_ID 2 --store durable.db    # answered from another process
    python examples/durable_run.py                      # continues: nothing runs twice

Other paths that work the same:

    python examples/durable_run.py FastAPI              # answer (text or number) and continue
    hpd-agent resume run_example --store durable.db     # continue with the CLI instead: it
                                                        # finds `agent` in this file

Running it while the question waits says so (the side effect is not done again). The store
is ``durable.db`` in the current directory; once the run is done, running this script prints
the result and removes the store, so the next run starts over.
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


agent = build()  # a global, so `hpd-agent resume` finds it (run_example records this file)


def remove_store() -> None:
    for path in (DB, f"{DB}-wal", f"{DB}-shm", f"{DB}-journal"):
        Path(path).unlink(missing_ok=True)


async def answers_from(store: SQLiteStore, answer: str | None) -> dict[str, str]:
    """The answer given on the command line, for the question that waits (if one does)."""
    if answer is None:
        return {}
    waiting = await store.list_requests(run_id=RUN_ID)
    if not waiting:
        print("the question was answered already: continuing with that answer", file=sys.stderr)
        return {}
    request = waiting[0]
    options = request.options or ()
    if answer.isdecimal() and 1 <= int(answer) <= len(options):
        answer = options[int(answer) - 1]  # 1 is the first option, as `hpd-agent pending` lists
    return {request.request_id: answer}


async def main(answer: str | None) -> bool:
    """Start, continue or report the run; True once it is done."""
    store = SQLiteStore(DB)
    try:
        record = await store.get_run(RUN_ID)
        if record is not None and record.status == "completed":  # e.g. by `hpd-agent resume`
            print(record.output)
            return True
        if record is None:
            result = await agent.run(
                "Build an API", store=store, run_id=RUN_ID, on_unhandled="interrupt"
            )
        else:
            answers = await answers_from(store, answer)
            result = await agent.resume(
                RUN_ID, store=store, answers=answers, on_unhandled="interrupt"
            )
    finally:
        await store.aclose()
    for request in result.pending:
        print(f"{result.status}: {request.request_id} waits for an answer")
        print(f"  answer with: hpd-agent answer {request.request_id} NUMBER --store {DB}")
        print("  then run this script again (or pass the answer: durable_run.py FastAPI)")
    if result.status == "completed":
        print(result.output)
        return True
    return False


if __name__ == "__main__":
    from hpd_agent.exceptions import HpdAgentError

    try:
        done = anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else None)
    except HpdAgentError as e:  # e.g. an answer that is not one of the options
        sys.exit(f"error: {e}")
    if done:
        remove_store()  # the run is done: nothing is left behind
