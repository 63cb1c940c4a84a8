"""A depth-2 agent tree for durability tests, run in this process or in child processes.

``build()`` reads ``HPD_TEST_DIR`` (so ``hpd-agent resume --agent durable_agents:build`` can
load it with no arguments). Every model call appends ``"<model>@<turn>"`` to ``calls.txt``
and the ``record_step`` tool appends its line to ``side_effects.txt``, so a test counts,
across processes, how often each model was called and each side effect ran.

Orchestrator --CodingAgent(query)--> CodingAgent: in one turn, ``record_step`` and
``ask_user("Which framework?")`` in parallel; then "built with <answer>".
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

import anyio

from hpd_agent import Agent, ask_user, tool
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import Store
from hpd_agent.testing import FunctionModel, text, tool_call

QUESTION = "Which framework?"
EVERY_TURN = ["orchestrator@0", "coder@0", "coder@1", "orchestrator@1"]
"""``calls.txt`` of a run that went to its end: every model turn, each called once."""


def _dir() -> str:
    return os.environ["HPD_TEST_DIR"]


def _count(name: str, info: ModelRequestParams) -> None:
    with open(os.path.join(_dir(), "calls.txt"), "a") as f:
        f.write(f"{name}@{info.turn}\n")


def _tool_result(messages: Sequence[Message], name: str) -> str:
    for m in reversed(messages):
        if isinstance(m, ToolResultMessage) and m.name == name:
            return m.content
    raise AssertionError(f"no result of {name} in {messages!r}")


def orchestrator_turn(messages: Sequence[Message], info: ModelRequestParams):
    _count("orchestrator", info)
    if info.turn == 0:
        return tool_call("CodingAgent", _id="delegate", query="Build the API")
    return text("Orchestrator: " + _tool_result(messages, "CodingAgent"))


def coder_turn(messages: Sequence[Message], info: ModelRequestParams):
    _count("coder", info)
    if info.turn == 0:
        return [
            tool_call("record_step", _id="step", line="scaffolded"),
            tool_call("ask_user", _id="ask", question=QUESTION),
        ]
    return text("built with " + _tool_result(messages, "ask_user"))


@tool
def record_step(line: str) -> str:
    """Record a step in the side-effects file.

    Args:
        line: What was done.
    """
    with open(os.path.join(_dir(), "side_effects.txt"), "a") as f:
        f.write(line + "\n")
    return "recorded"


def build() -> Agent:
    """The Orchestrator of the tree (fresh models each call)."""
    coder = Agent(
        "CodingAgent",
        model=FunctionModel(coder_turn, name="coder"),
        tools=[record_step, ask_user()],
    )
    return Agent(
        "Orchestrator",
        model=FunctionModel(orchestrator_turn, name="orchestrator"),
        tools=[coder.as_tool()],
    )


def read_lines(name: str) -> list[str]:
    """Lines of a counting file in ``HPD_TEST_DIR`` (empty if it does not exist yet)."""
    path = os.path.join(_dir(), name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().splitlines()


async def wait_lease_lapsed(store: Store, run_id: str, timeout: float = 60.0) -> None:
    """Wait (bounded, on the store's state) until nobody holds a live lease on the run."""
    with anyio.fail_after(timeout):
        for _ in iter(int, 1):  # until the condition holds (the deadline bounds it)
            lease = await store.get_lease(run_id)
            if lease is None or lease.expires_at <= time.time():
                return
            await anyio.sleep(0.05)


CHILD_LEASE_TTL = 1.5
"""The child's lease (short: a resume after the child's SIGKILL waits this long at most)."""

if __name__ == "__main__":
    # Child-process entry: python durable_agents.py DB_PATH_OR_DSN RUN_ID [LEASE_TTL]
    from hpd_agent.store import open_store

    async def main() -> None:
        ttl = float(sys.argv[3]) if len(sys.argv) > 3 else CHILD_LEASE_TTL
        store = open_store(sys.argv[1], lease_ttl=ttl)
        result = await build().run("Build an API", store=store, run_id=sys.argv[2])
        print(result.output, flush=True)

    anyio.run(main)


def other_agent() -> Agent:
    """An agent of another name: resuming the Orchestrator's run with it is refused."""
    return Agent("Somebody", model=FunctionModel(orchestrator_turn, name="other"))


AGENT = build()
"""The tree as a module global: a run of it records ``durable_agents:AGENT`` in the store."""
