"""``hpd-agent demo --acp``: the ACP headline, offline.

The Orchestrator's one tool is the Planner of ``hpd-agent demo --a2a`` served over the Agent
Client Protocol: ``ACPAgent(<this python> -m hpd_agent.cli acp <the Planner>,
name="Planner")``. Its first call starts ``hpd-agent acp`` as a child process (B) talking on
its stdin/stdout; B's Planner hands the task to its Clarifier, which asks which web framework
to use. The question crosses as an ACP form (``elicitation/create``, the asker's path in its
``_meta``) and reaches this process's console as ``Orchestrator > Planner > Clarifier``; the
answer goes back as the form's content into B's turn, which goes on in the same turn; the plan
comes back as the tool's result, and B is reaped before the run's result is shown. Every agent
is a ``FunctionModel`` that reads its conversation: no key, no network.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, cast

from rich.console import Console

from ..agent import Agent
from ..events import ClarificationRequest, format_path
from .a2a_demo import orchestrator_of
from .demo import DEFAULT_PROMPT, DemoConsole

__all__ = ["SERVED", "FormConsole", "orchestrator_agent", "run_demo_acp"]

SERVED = "hpd_agent._apps.a2a_demo:planner_agent"
"""What B serves (``hpd-agent acp MODULE:ATTR``)."""


def orchestrator_agent() -> Agent:
    """The Orchestrator, its Planner an ``ACPAgent`` running ``hpd-agent acp`` (B)."""
    from ..acp import ACPAgent

    # B gets the safe environment only; a checkout run from source keeps its import path.
    path = os.environ.get("PYTHONPATH")
    planner = ACPAgent(
        sys.executable,
        ["-m", "hpd_agent.cli", "acp", SERVED],
        name="Planner",
        env={"PYTHONPATH": path} if path else None,
    )
    return orchestrator_of(planner.as_tool())


class FormConsole(DemoConsole):
    """The demo's console, asking a form of one string field (an ACP elicitation of a
    question with options) as that field: its options numbered, the answer put in the form."""

    async def on_clarification(self, request: ClarificationRequest) -> Any:
        field = _one_field(request)
        if field is None:
            return await super().on_clarification(request)
        name, options = field
        # The server's message names the asker ("Planner > Clarifier: ..."): the console
        # names it already, from the request's path.
        prefix = format_path(request.agent_path[1:]) + ": "
        asked = dataclasses.replace(
            request,
            question=request.question.removeprefix(prefix),
            question_kind="text",
            options=options,
            data=None,
            answer_schema=None,
        )
        return {name: await super().on_clarification(asked)}


def _one_field(request: ClarificationRequest) -> tuple[str, tuple[str, ...] | None] | None:
    """The name and options of a form's one string field, or None for any other question."""
    data = request.data or {}
    schema = data.get("schema")
    if request.question_kind != "custom" or not isinstance(schema, dict):
        return None
    properties = cast(dict[str, Any], schema).get("properties")
    if not isinstance(properties, dict) or len(cast(dict[str, Any], properties)) != 1:
        return None
    [(name, field)] = cast(dict[str, Any], properties).items()
    if not isinstance(field, dict) or cast(dict[str, Any], field).get("type") != "string":
        return None
    enum = cast(dict[str, Any], field).get("enum")
    if enum is None:
        return name, None
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):  # pyright: ignore[reportUnknownVariableType]
        return name, tuple(cast(list[str], enum))
    return None


def run_demo_acp(
    args: argparse.Namespace,
    console: Console,
    run: Callable[[Console, Callable[[], Awaitable[Any]]], int],
    stdin_note: Callable[[Console, bool], None],
) -> int:
    """``hpd-agent demo --acp``: the exit status (``run`` and ``stdin_note`` are the CLI's:
    Ctrl-C handling, the note on piped input)."""
    if args.model:
        print("error: demo --acp runs offline only (no --model)", file=sys.stderr)
        return 2
    prompt = (args.prompt or "").strip() or DEFAULT_PROMPT
    handler = FormConsole(console, assume_yes=args.yes, echo=not sys.stdin.isatty())
    console.print("[bold]hpd-agent demo --acp[/] [dim](two processes, offline scripted agents)[/]")
    stdin_note(console, args.yes)
    console.print(
        f"[dim]This process (pid {os.getpid()}) runs the Orchestrator, whose tool is "
        f"ACPAgent(hpd-agent acp {SERVED}, name='Planner'): its first call starts that "
        "server as a child process speaking ACP on its stdin/stdout; it is reaped when the "
        "run ends.[/]"
    )
    orchestrator = orchestrator_agent()

    async def main() -> None:
        result = await orchestrator.run(prompt, handler=handler)
        console.print(f"\n[bold]Result[/] ({result.status}): {result.output}")

    return run(console, main)
