"""Agents served by the MCP server tests, offline, each model call and side effect counted.

Counted in files of ``HPD_MCP_TEST_DIR`` (one line per event), so a server in a
subprocess (``hpd-agent mcp tests.mcp.mcp_server_agents:planner``) counts the same way as
one in the test process. The models are functions of the messages (no script to run out),
so a run resumed after a restart replays to the same calls.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpd_agent import Agent, ToolContext, ask_user, tool
from hpd_agent.messages import Message, ToolResultMessage, UserMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text, tool_call


def _dir() -> Path:
    return Path(os.environ.get("HPD_MCP_TEST_DIR", "."))


def note(kind: str, what: str) -> None:
    """Count one event: ``kind`` is ``model`` or ``effect``."""
    with (_dir() / f"{kind}.txt").open("a") as f:
        f.write(what + "\n")


def counted(kind: str) -> list[str]:
    """The events counted so far (in ``folder``, default ``HPD_MCP_TEST_DIR``)."""
    path = _dir() / f"{kind}.txt"
    return path.read_text().splitlines() if path.exists() else []


def _results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def _query(messages: Sequence[Message]) -> str:
    return next(m.content for m in messages if isinstance(m, UserMessage))


GATES: dict[str, Any] = {}
"""In-process tests only: ``survey(topic)`` first waits for ``GATES[topic]`` (an anyio
Event) when set, so a test can hold one branch of the tree while another asks."""


# -- Planner > Clarifier: the end-to-end shape ----------------------------------------
@tool
async def survey(topic: str) -> str:
    """Look at the codebase (a side effect, counted).

    Args:
        topic: What to look at.
    """
    gate = GATES.get(topic)
    if gate is not None:
        await gate.wait()
    note("effect", f"survey {topic}")
    return f"surveyed {topic}"


def _clarify(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Clarifier")
    got = _results(messages)
    if not got:
        return tool_call("survey", topic="db")
    if len(got) == 1:
        return tool_call(
            "ask_user",
            question="Which database should the plan assume?",
            options=["SQLite", "PostgreSQL"],
        )
    return text(f"The user chose {got[-1]}.")


def _plan(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Planner")
    got = _results(messages)
    if not got:
        return tool_call("Clarifier", query=f"What must I know to plan {_query(messages)}?")
    return text(f"Plan: {got[-1]}")


clarifier = Agent("Clarifier", model=FunctionModel(_clarify), tools=[survey, ask_user()])
planner = Agent("Planner", model=FunctionModel(_plan), tools=[clarifier.as_tool()])


# -- parallel questions: Fast asks at once, Slow works first -----------------------------------
def _fast(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Fast")
    got = _results(messages)
    if not got:
        return tool_call("ask_user", question="Fast: which colour?")
    return text(f"fast got {got[-1]}")


def _slow(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Slow")
    got = _results(messages)
    if not got:
        return tool_call("survey", topic="slow")
    if len(got) == 1:
        return tool_call("ask_user", question="Slow: which size?")
    return text(f"slow got {got[-1]}")


def _both(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Lead")
    got = _results(messages)
    if not got:
        return [tool_call("Fast", query="colour"), tool_call("Slow", query="size")]
    return text(" / ".join(sorted(got)))


fast = Agent("Fast", model=FunctionModel(_fast), tools=[ask_user()])
slow = Agent("Slow", model=FunctionModel(_slow), tools=[survey, ask_user()])
lead = Agent("Lead", model=FunctionModel(_both), tools=[fast.as_tool(), slow.as_tool()])


# -- every question kind, one tool each --------------------------------------------------------
FLAT = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
}
NESTED = {
    "type": "object",
    "properties": {"range": {"type": "object", "properties": {"from": {"type": "integer"}}}},
    "required": ["range"],
}


@tool
async def kinds(ctx: ToolContext, kind: str) -> str:
    """Ask one question of a kind.

    Args:
        kind: Which kind.
    """
    answer: Any
    if kind == "text":
        answer = await ctx.ask("Your name?")
    elif kind == "text_options":
        answer = await ctx.ask("Tabs or spaces?", options=["tabs", "spaces"])
    elif kind == "input":
        answer = await ctx.ask_input("recipient")
    elif kind == "choice":
        answer = await ctx.ask_choice("Pick a colour", ["red", "green"])
    elif kind == "choices":
        answer = await ctx.ask_choice("Pick colours", ["red", "green", "blue"], multiple=True)
    elif kind == "confirm":
        answer = await ctx.confirm("Go on?")
    elif kind == "action":
        answer = await ctx.ask_action("https://example.test/login", label="Sign in")
    elif kind == "custom_flat":
        answer = await ctx.ask_custom("person", "Who?", schema=FLAT)
    else:
        answer = await ctx.ask_custom("range", "Which range?", schema=NESTED)
    note("effect", f"{kind}={json.dumps(answer)}")
    return json.dumps(answer)


@tool(requires_approval=True)
async def deploy(target: str) -> str:
    """Deploy (needs approval).

    Args:
        target: Where to.
    """
    note("effect", f"deploy {target}")
    return f"deployed to {target}"


def _asker(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Asker")
    got = _results(messages)
    if not got:
        kind = _query(messages)
        if kind == "permission":
            return tool_call("deploy", target="prod")
        return tool_call("kinds", kind=kind)
    return text(f"answer: {got[-1]}")


asker = Agent("Asker", model=FunctionModel(_asker), tools=[kinds, deploy])
