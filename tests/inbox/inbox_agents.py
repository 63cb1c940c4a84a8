"""The agents whose runs ask in the inbox tests, each started by another kind of process.

Offline: every model is a ``FunctionModel`` calling one tool, then saying ``<name>: <the
tool's result>``.

- ``scripter`` (Scripter): ``pick_region`` asks "Which region?" (a choice of eu / us, an
  hour to answer). ``python inbox_agents.py STORE RUN_ID`` runs it on the store, as a
  script of a team would, and prints its output.
- ``batcher`` (Batcher): calls ``deploy(env="prod")``, which needs approval (a permission
  with its arguments): ``hpd-agent run inbox_agents:batcher PROMPT --store URL``.
- ``desk`` (Desk > Writer): the Desk hands the prompt to its Writer, whose model asks "What
  title?" through ``ask_user`` (a free-text question at depth 1): ``hpd-agent serve
  inbox_agents:desk --store URL``, a run started by an AG-UI client.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from hpd_agent import Agent, ToolContext, ask_user, tool
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import open_store
from hpd_agent.testing import FunctionModel, text, tool_call

REGION_QUESTION = "Which region?"
TITLE_QUESTION = "What title?"


@tool
async def pick_region(ctx: ToolContext) -> str:
    """Ask where to deploy."""
    region = await ctx.ask_choice(REGION_QUESTION, ["eu", "us"], timeout=3600)
    return f"deploying to {region}"


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy the release.

    Args:
        env: Where to.
    """
    return f"deployed to {env}"


def _one_call(name: str, call: Callable[[], Any]) -> FunctionModel:
    """A model calling ``call()`` once, then saying ``<name>: <its result>``."""

    def turn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            return text(f"{name}: {last.content}")
        return call()

    return FunctionModel(turn, name=name)


scripter = Agent(
    "Scripter", model=_one_call("Scripter", lambda: tool_call("pick_region")), tools=[pick_region]
)
batcher = Agent(
    "Batcher", model=_one_call("Batcher", lambda: tool_call("deploy", env="prod")), tools=[deploy]
)
writer = Agent(
    "Writer",
    description="Writes the post.",
    model=_one_call("Writer", lambda: tool_call("ask_user", question=TITLE_QUESTION)),
    tools=[ask_user()],
)
desk = Agent(
    "Desk",
    model=_one_call("Desk", lambda: tool_call("Writer", query="Write the post")),
    tools=[writer.as_tool()],
)


async def _run_script(location: str, run_id: str) -> None:
    """A script's durable run: streamed, its question waiting in the store for whoever
    answers it there."""
    store = open_store(location)
    try:
        async with scripter.stream("Deploy the service", store=store, run_id=run_id) as run:
            async for _ in run:
                pass
        print(run.result.output, flush=True)
    finally:
        await store.aclose()


if __name__ == "__main__":
    anyio.run(_run_script, sys.argv[1], sys.argv[2])
