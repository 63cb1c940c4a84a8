"""``hpd-agent demo --a2a``: the A2A headline in two processes, offline.

Process B (``python -m hpd_agent._apps.a2a_demo``, started by the demo) serves a Planner
over A2A (``hpd_agent.a2a.create_app`` on 127.0.0.1); the Planner hands the task to its
Clarifier, which asks which web framework to use. Process A (the demo itself) runs an
Orchestrator whose only tool is ``RemoteAgent(url_of_B).as_tool()``: B's question reaches
A's console tagged ``Orchestrator > Planner > Clarifier``, the answer goes back by request id
into B's task, B's Clarifier goes on in the same turn, and A gets the plan. Every agent is
a ``FunctionModel`` that reads its conversation: no key, no network beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any

from rich.console import Console

from ..agent import Agent
from ..clarification import ask_user
from ..messages import Message, ToolResultMessage, UserMessage
from ..models import ModelRequestParams
from ..testing import FunctionModel, text, tool_call
from ..testing._models import Step
from ..tools import Tool, Toolset
from .demo import DEFAULT_PROMPT, FRAMEWORKS

__all__ = [
    "orchestrator_agent",
    "orchestrator_of",
    "planner_agent",
    "run_demo_a2a",
    "served_planner",
]

_READY = "A2A "
"""How B's first stdout line starts (then its URL)."""


def _results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def _task(messages: Sequence[Message]) -> str:
    return next((m.content for m in messages if isinstance(m, UserMessage)), "")


def _clarifier(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = _results(messages)
    if not got:
        question = "Which web framework should the plan use?"
        return tool_call("ask_user", question=question, options=list(FRAMEWORKS))
    return text(f"Use {got[-1]}.")


def _planner(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = _results(messages)
    task = _task(messages)
    if not got:
        return tool_call("Clarifier", query=f"Which framework does this need: {task}?")
    return text(f"Plan for {task!r}: {got[-1]} Scaffold the app, add its routes, then tests.")


def _orchestrator(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = _results(messages)
    if not got:
        return tool_call("Planner", query=_task(messages))
    return text(f"The remote Planner answered: {got[-1]}")


def planner_agent() -> Agent:
    """B's Planner, with its Clarifier (which asks)."""
    clarifier = Agent(
        "Clarifier",
        model=FunctionModel(_clarifier),
        tools=[ask_user()],
        description="Finds out which framework to use, asking the user.",
    )
    return Agent(
        "Planner",
        model=FunctionModel(_planner),
        tools=[clarifier.as_tool()],
        description="Plans a software task; asks what it must know first.",
    )


def orchestrator_agent(url: str) -> Agent:
    """A's Orchestrator: its one tool is the Planner B serves at ``url``."""
    from ..a2a import RemoteAgent

    return orchestrator_of(RemoteAgent(url, name="Planner").as_tool())


def orchestrator_of(planner: Tool | Toolset) -> Agent:
    """The Orchestrator whose one tool, ``Planner``, is a remote Planner (A2A or ACP)."""
    return Agent("Orchestrator", model=FunctionModel(_orchestrator), tools=[planner])


@contextlib.contextmanager
def served_planner() -> Generator[tuple[str, int]]:
    """Start process B; its URL and pid once it listens. Stopped on leaving."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpd_agent._apps.a2a_demo"],
        stdin=subprocess.DEVNULL,  # the answers typed are A's
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first: list[str] = []
        reader = threading.Thread(
            target=lambda: first.append(proc.stdout.readline() if proc.stdout else ""),
            daemon=True,
        )
        reader.start()
        reader.join(60)
        line = first[0] if first else ""
        if not line.startswith(_READY):
            raise RuntimeError("the demo's A2A server (process B) did not start")
        yield line[len(_READY) :].strip(), proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_demo_a2a(
    args: argparse.Namespace,
    console: Console,
    run: Callable[[Console, Callable[[], Awaitable[Any]]], int],
    stdin_note: Callable[[Console, bool], None],
) -> int:
    """``hpd-agent demo --a2a``: the exit status (``run`` and ``stdin_note`` are the CLI's:
    Ctrl-C handling, the note on piped input)."""
    from .demo import DemoConsole
    from .extras import needs_extra

    if args.model:
        print("error: demo --a2a runs offline only (no --model)", file=sys.stderr)
        return 2
    # Both processes need the extra: say so here, before B is started (and fails in its turn).
    with needs_extra("a2a", "demo --a2a"):
        import uvicorn  # noqa: F401  # pyright: ignore[reportUnusedImport]

        from ..a2a import RemoteAgent, create_app  # noqa: F401  # pyright: ignore[reportUnusedImport]
    prompt = (args.prompt or "").strip() or DEFAULT_PROMPT
    handler = DemoConsole(console, assume_yes=args.yes, echo=not sys.stdin.isatty())
    console.print("[bold]hpd-agent demo --a2a[/] [dim](two processes, offline scripted agents)[/]")
    stdin_note(console, args.yes)
    with served_planner() as (url, pid):
        console.print(
            f"[dim]Process B (pid {pid}) serves the Planner over A2A at {url}; this process "
            f"(A, pid {os.getpid()}) runs the Orchestrator, whose tool is RemoteAgent({url!r}).[/]"
        )
        orchestrator = orchestrator_agent(url)

        async def main() -> None:
            result = await orchestrator.run(prompt, handler=handler)
            console.print(f"\n[bold]Result[/] ({result.status}): {result.output}")

        return run(console, main)


def _serve_b() -> None:
    """Process B: serve the Planner on 127.0.0.1 (a free port), say where on stdout."""
    import uvicorn

    from ..a2a import create_app
    from .serving import bound

    sock = bound("127.0.0.1", 0)
    if sock is None:
        raise SystemExit(2)
    print(f"{_READY}http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(create_app(planner_agent()), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    _serve_b()
