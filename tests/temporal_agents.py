"""Agent trees and the workflow for the Temporal tests, run in the test process or as a
worker subprocess (``python temporal_agents.py ADDRESS TASK_QUEUE``).

Models are ``FunctionModel``s deciding from the conversation, so a new worker process
computes the same turns. Every model call appends ``"<agent>@<turn>"`` to ``calls.txt`` and
the plain ``record_step`` tool appends its line to ``side_effects.txt`` in
``HPD_TEMPORAL_DIR``: a test counts, across worker processes, how often each ran.

Trees (``AGENTS[name]``):

- ``depth2``: Orchestrator → CodingAgent; CodingAgent runs ``record_step("scaffolded")`` and
  asks "Which framework?" in parallel, then answers "built with <answer>".
- ``depth3``: Planner → Research → Deep; Deep records a step and asks "Which region?"
  (options EU/US).
- ``parallel``: Asker asks "First?" and "Second?" in parallel.
- ``timeout``: Waiter asks with a 1 second timeout, then asks again with none.
- ``broken``: Broken's model has an empty script (the run fails).
- ``permission``: Guarded calls ``record_step`` that needs approval.
- ``failing``: Failing calls ``explode`` (raises) and answers with the result it got.
- ``stepper``: Stepper calls ``book``, a tool taking a context (so it runs in the workflow):
  it charges in ``ctx.step`` (a local activity), then asks "Which seat?".
- ``rating``: Rater calls ``rate_plan``, which asks the ``rating`` question of
  ``tests/rating_kind.py`` (a kind of the app's own; its module is passed through the
  sandbox like hpd_agent, so the kind is registered once).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from rating_kind import rate_plan

    from hpd_agent import Agent, StepFailed, ToolContext, ask_user, tool
    from hpd_agent.messages import Message, ToolResultMessage
    from hpd_agent.models import ModelRequestParams
    from hpd_agent.temporal import HpdAgentPlugin, TemporalAgent
    from hpd_agent.testing import FunctionModel, ScriptedModel, text, tool_call

FRAMEWORK = "Which framework?"
REGION = "Which region?"


def _dir() -> str:
    return os.environ["HPD_TEMPORAL_DIR"]


def _append(name: str, line: str) -> None:
    with open(os.path.join(_dir(), name), "a") as f:
        f.write(line + "\n")


def read_lines(name: str) -> list[str]:
    """Lines of a counting file (empty if it does not exist yet)."""
    path = os.path.join(_dir(), name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().splitlines()


def _result(messages: Sequence[Message], name: str) -> str:
    for m in reversed(messages):
        if isinstance(m, ToolResultMessage) and m.name == name:
            return m.content
    raise AssertionError(f"no result of {name}")


def _results(messages: Sequence[Message], name: str) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage) and m.name == name]


@tool
def record_step(line: str) -> str:
    """Record a step in the side-effects file.

    Args:
        line: What was done.
    """
    _append("side_effects.txt", line)
    return "recorded"


@tool(requires_approval=True)
def guarded_step(line: str) -> str:
    """Record a step, once the human approves.

    Args:
        line: What was done.
    """
    _append("side_effects.txt", line)
    return "recorded"


@tool
def explode(level: int) -> str:
    """Fail.

    Args:
        level: How hard.
    """
    raise ValueError(f"boom at {level}")


@tool
async def book(ctx: ToolContext) -> str:
    """Charge, then ask the seat."""
    charged = await ctx.step("charge", _append, "side_effects.txt", "charged")
    seat = await ctx.ask("Which seat?")
    return f"booked {seat} (charge: {charged})"


def _missing(key: str) -> str:
    raise KeyError(key)


class QuotaExceeded(Exception):
    """A failure of the application's own type."""


def _over_quota() -> str:
    raise QuotaExceeded("over quota")


@tool
async def charge_twice(ctx: ToolContext) -> str:
    """Two steps that fail: a built-in error, then one of this module's own."""
    seen = []
    for name, fn, args in (("lookup", _missing, ("card",)), ("charge", _over_quota, ())):
        try:
            await ctx.step(name, fn, *args)
        except Exception as e:
            detail = f"{e.error_type}: {e.error_message}" if isinstance(e, StepFailed) else str(e)
            seen.append(f"{name}: {type(e).__name__} ({detail})")
    return "; ".join(seen)


def _step_failer(messages: Sequence[Message], turn: int) -> Any:
    if turn == 0:
        return tool_call("charge_twice", _id="c")
    return text(_result(messages, "charge_twice"))


def _mumbler(messages: Sequence[Message], turn: int) -> Any:
    return text("half a pair: \ud83d, a whole one: \ud83d\ude00")  # as a model can stream it


def _stepper(messages: Sequence[Message], turn: int) -> Any:
    if turn == 0:
        return tool_call("book", _id="b")
    return text(_result(messages, "book"))


def _failing(messages: Sequence[Message], turn: int) -> Any:
    if turn == 0:
        return [
            tool_call("explode", _id="x", level=3),
            tool_call("explode", _id="y", _raw='{"level": "high"}'),
        ]
    return text(" || ".join(_results(messages, "explode")))


def _turn(agent: str):  # the model of every agent: one function per role
    def fn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        _append("calls.txt", f"{agent}@{info.turn}")
        return ROLES[agent](messages, info.turn)

    fn.__name__ = agent
    return FunctionModel(fn, name=agent)


def _delegate(child: str, prefix: str):
    def role(messages: Sequence[Message], turn: int) -> Any:
        if turn == 0:
            return tool_call(child, _id=f"to_{child}", query="do it")
        return text(prefix + _result(messages, child))

    return role


def _asker(step: str, question: str, options: list[str] | None, label: str):
    def role(messages: Sequence[Message], turn: int) -> Any:
        if turn == 0:
            ask: dict[str, Any] = {"question": question}
            if options:
                ask["options"] = options
            return [
                tool_call("record_step", _id="step", line=step),
                tool_call("ask_user", _id="ask", **ask),
            ]
        return text(label + _result(messages, "ask_user"))

    return role


def _parallel(messages: Sequence[Message], turn: int) -> Any:
    if turn == 0:
        return [
            tool_call("ask_user", _id="q1", question="First?"),
            tool_call("ask_user", _id="q2", question="Second?"),
        ]
    return text(" + ".join(_results(messages, "ask_user")))


def _waiter(messages: Sequence[Message], turn: int) -> Any:
    if turn == 0:
        return tool_call("ask_user", _id="ask", question="Anyone there?")
    if turn == 1:
        return tool_call("ask_again", _id="again", question="Still there?")
    return text(
        f"gave up: {_result(messages, 'ask_user')} | then: {_result(messages, 'ask_again')}"
    )


def _guarded(messages: Sequence[Message], turn: int) -> Any:
    if turn == 0:
        return tool_call("guarded_step", _id="g", line="guarded")
    return text("guarded: " + _result(messages, "guarded_step"))


def _rater(messages: Sequence[Message], turn: int) -> Any:
    if turn == 0:
        return tool_call("rate_plan", _id="rate")
    return text(_result(messages, "rate_plan"))


ROLES: dict[str, Any] = {
    "Orchestrator": _delegate("CodingAgent", "Orchestrator: "),
    "CodingAgent": _asker("scaffolded", FRAMEWORK, None, "built with "),
    "Planner": _delegate("Research", "Planner: "),
    "Research": _delegate("Deep", "Research: "),
    "Deep": _asker("surveyed", REGION, ["EU", "US"], "region "),
    "Asker": _parallel,
    "Waiter": _waiter,
    "Guarded": _guarded,
    "Stepper": _stepper,
    "Failing": _failing,
    "StepFailer": _step_failer,
    "Mumbler": _mumbler,
    "Rater": _rater,
}


def _agent(name: str, *tools: Any) -> Agent:
    return Agent(name, model=_turn(name), tools=list(tools))


def _trees() -> dict[str, TemporalAgent]:
    coder = _agent("CodingAgent", record_step, ask_user())
    deep = _agent("Deep", record_step, ask_user())
    research = _agent("Research", deep.as_tool())
    return {
        "depth2": TemporalAgent(_agent("Orchestrator", coder.as_tool()), name="depth2"),
        "depth3": TemporalAgent(_agent("Planner", research.as_tool()), name="depth3"),
        "parallel": TemporalAgent(_agent("Asker", ask_user()), name="parallel"),
        "timeout": TemporalAgent(
            _agent("Waiter", ask_user(timeout=1.0), ask_user(name="ask_again")), name="timeout"
        ),
        "broken": TemporalAgent(Agent("Broken", model=ScriptedModel([])), name="broken"),
        "permission": TemporalAgent(_agent("Guarded", guarded_step), name="permission"),
        "stepper": TemporalAgent(_agent("Stepper", book), name="stepper"),
        "failing": TemporalAgent(_agent("Failing", explode), name="failing"),
        "failstep": TemporalAgent(_agent("StepFailer", charge_twice), name="failstep"),
        "mumbler": TemporalAgent(_agent("Mumbler"), name="mumbler"),
        "rating": TemporalAgent(_agent("Rater", rate_plan), name="rating"),
    }


AGENTS = _trees()


@workflow.defn
class AgentWorkflow:
    """Runs ``AGENTS[which]`` on ``prompt``; returns the final answer."""

    @workflow.run
    async def run(self, which: str, prompt: str) -> str:
        return (await AGENTS[which].run(prompt)).output or ""


def plugin() -> HpdAgentPlugin:
    """The plugin registering every tree."""
    return HpdAgentPlugin(*AGENTS.values())


if __name__ == "__main__":
    # Worker-process entry: python temporal_agents.py ADDRESS TASK_QUEUE
    import asyncio

    from temporalio.client import Client
    from temporalio.worker import Worker

    async def main() -> None:
        client = await Client.connect(sys.argv[1])
        worker = Worker(
            client, task_queue=sys.argv[2], workflows=[AgentWorkflow], plugins=[plugin()]
        )
        print("worker ready", flush=True)
        await worker.run()

    asyncio.run(main())
