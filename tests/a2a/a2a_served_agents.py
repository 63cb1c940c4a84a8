"""Agents the A2A server tests serve, offline, each model call and side effect counted.

Counted in files of ``HPD_A2A_TEST_DIR`` (one line per event), so a server in a subprocess
(``hpd-agent serve --a2a tests.a2a.a2a_served_agents:planner``) counts the same way as one
in the test process. The models are functions of the messages (no script to run out), so a
run resumed after a restart replays to the same calls.
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
    return Path(os.environ.get("HPD_A2A_TEST_DIR", "."))


def note(kind: str, what: str) -> None:
    """Count one event: ``kind`` is ``model`` or ``effect``."""
    with (_dir() / f"{kind}.txt").open("a") as f:
        f.write(what + "\n")


def counted(kind: str, folder: Path | None = None) -> list[str]:
    """The events counted so far (in ``folder``, default ``HPD_A2A_TEST_DIR``)."""
    path = (folder or _dir()) / f"{kind}.txt"
    return path.read_text().splitlines() if path.exists() else []


def _results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def _query(messages: Sequence[Message]) -> str:
    return next(m.content for m in messages if isinstance(m, UserMessage))


# -- Planner > Clarifier: the headline's remote side ------------------------------------------
@tool
async def survey(topic: str) -> str:
    """Look at the codebase (a side effect, counted).

    Args:
        topic: What to look at.
    """
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


# -- two questions pending at once: Fast and Slow ask in parallel -----------------------------
def _asks(name: str, question: str) -> Any:
    def reply(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        note("model", name)
        got = _results(messages)
        if not got:
            return tool_call("ask_user", question=question)
        return text(f"{name.lower()} got {got[-1]}")

    return reply


def _both(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Lead")
    got = _results(messages)
    if not got:
        return [tool_call("Fast", query="colour"), tool_call("Slow", query="size")]
    return text(" / ".join(sorted(got)))


fast = Agent("Fast", model=FunctionModel(_asks("Fast", "Which colour?")), tools=[ask_user()])
slow = Agent("Slow", model=FunctionModel(_asks("Slow", "Which size?")), tools=[ask_user()])
lead = Agent("Lead", model=FunctionModel(_both), tools=[fast.as_tool(), slow.as_tool()])


# -- question kinds and a permission ----------------------------------------------------------
@tool
async def kinds(ctx: ToolContext, kind: str) -> str:
    """Ask one question of a kind.

    Args:
        kind: Which kind.
    """
    answer: Any
    if kind == "choice":
        answer = await ctx.ask_choice("Pick a colour", ["red", "green"])
    elif kind == "choices":
        answer = await ctx.ask_choice("Pick colours", ["red", "green", "blue"], multiple=True)
    elif kind == "confirm":
        answer = await ctx.confirm("Go on?")
    else:
        answer = await ctx.ask("Your name?")
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
