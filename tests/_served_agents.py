"""What the agents the protocol servers' tests serve (``tests/a2a/a2a_served_agents.py``,
``tests/mcp/mcp_server_agents.py``) share: counting each model call and side effect in files
of a folder an environment variable names, and the Planner > Clarifier tree, the Lead's
turns and the Asker built on a module's own counter and tools.

A server child imports it by name, so its ``PYTHONPATH`` holds ``tests/``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hpd_agent import Agent, ask_user, tool
from hpd_agent.messages import Message, ToolResultMessage, UserMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text, tool_call

Note = Callable[[str, str], None]


class Counts:
    """Events counted in files of the folder ``variable`` names (one line per event)."""

    def __init__(self, variable: str) -> None:
        self.variable = variable

    def folder(self) -> Path:
        return Path(os.environ.get(self.variable, "."))

    def note(self, kind: str, what: str) -> None:
        """Count one event: ``kind`` is ``model`` or ``effect``."""
        with (self.folder() / f"{kind}.txt").open("a") as f:
            f.write(what + "\n")

    def counted(self, kind: str, folder: Path | None = None) -> list[str]:
        """The events counted so far (in ``folder``, default the variable's)."""
        path = (folder or self.folder()) / f"{kind}.txt"
        return path.read_text().splitlines() if path.exists() else []


def results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def query(messages: Sequence[Message]) -> str:
    return next(m.content for m in messages if isinstance(m, UserMessage))


def planner_tree(note: Note, gates: dict[str, Any] | None = None) -> tuple[Any, Agent, Agent]:
    """The ``survey`` tool, the Clarifier (surveys, then asks which database) and the
    Planner (asks the Clarifier). ``survey(topic)`` first waits for ``gates[topic]`` (an
    anyio Event) when there is one."""

    @tool
    async def survey(topic: str) -> str:
        """Look at the codebase (a side effect, counted).

        Args:
            topic: What to look at.
        """
        gate = None if gates is None else gates.get(topic)
        if gate is not None:
            await gate.wait()
        note("effect", f"survey {topic}")
        return f"surveyed {topic}"

    def clarify(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        note("model", "Clarifier")
        got = results(messages)
        if not got:
            return tool_call("survey", topic="db")
        if len(got) == 1:
            return tool_call(
                "ask_user",
                question="Which database should the plan assume?",
                options=["SQLite", "PostgreSQL"],
            )
        return text(f"The user chose {got[-1]}.")

    def plan(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        note("model", "Planner")
        got = results(messages)
        if not got:
            return tool_call("Clarifier", query=f"What must I know to plan {query(messages)}?")
        return text(f"Plan: {got[-1]}")

    clarifier = Agent("Clarifier", model=FunctionModel(clarify), tools=[survey, ask_user()])
    planner = Agent("Planner", model=FunctionModel(plan), tools=[clarifier.as_tool()])
    return survey, clarifier, planner


def lead_of(note: Note, fast: Agent, slow: Agent) -> Agent:
    """The Lead: asks ``fast`` (colour) and ``slow`` (size) at once, then joins their answers."""

    def both(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        note("model", "Lead")
        got = results(messages)
        if not got:
            return [tool_call("Fast", query="colour"), tool_call("Slow", query="size")]
        return text(" / ".join(sorted(got)))

    return Agent("Lead", model=FunctionModel(both), tools=[fast.as_tool(), slow.as_tool()])


def asker_of(note: Note, kinds: Any) -> Agent:
    """The Asker: calls ``kinds`` with the kind its prompt names, or ``deploy`` (needs
    approval) for ``permission``, and answers with what it got."""

    @tool(requires_approval=True)
    async def deploy(target: str) -> str:
        """Deploy (needs approval).

        Args:
            target: Where to.
        """
        note("effect", f"deploy {target}")
        return f"deployed to {target}"

    def ask(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        note("model", "Asker")
        got = results(messages)
        if not got:
            kind = query(messages)
            if kind == "permission":
                return tool_call("deploy", target="prod")
            return tool_call("kinds", kind=kind)
        return text(f"answer: {got[-1]}")

    return Agent("Asker", model=FunctionModel(ask), tools=[kinds, deploy])
