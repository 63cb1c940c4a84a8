"""The ``hpd-agent`` command: one subcommand per function below, registered in ``_parser``."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["main"]

_DEMO_PACE = 0.02
"""Seconds between streamed words of the offline demo (``HPD_AGENT_DEMO_PACE`` overrides)."""

_EXIT_WORDS = {"/exit", "/quit", "exit", "quit"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpd-agent", description="Nested multi-agent orchestration with a human in the loop."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=_cmd_version)

    demo = sub.add_parser(
        "demo",
        help="watch an Orchestrator, a CodingAgent and a ResearchAgent ask you mid-turn",
        description=(
            "The seed scenario: the CodingAgent needs a framework, the Orchestrator asks you, "
            "the CodingAgent builds with your answer and asks before writing a file. Offline "
            "by default (scripted agents that react to what you type)."
        ),
    )
    demo.add_argument("prompt", nargs="?", default=None, help="the task (default: build auth)")
    demo.add_argument(
        "--model", help="run the agents on this litellm model, e.g. openai/gpt-4o-mini"
    )
    demo.add_argument(
        "--yes", "-y", action="store_true", help="answer every prompt with its default"
    )
    demo.add_argument("--workdir", help="where write_file writes (default: a new temp dir)")
    demo.set_defaults(func=_cmd_demo)

    chat = sub.add_parser(
        "chat",
        help="chat with one agent that can ask you questions",
        description="An interactive chat; history is kept between turns. /exit or Ctrl-D ends it.",
    )
    chat.add_argument("--model", help="a litellm model string (default: an offline model)")
    chat.add_argument(
        "--yes", "-y", action="store_true", help="answer the agent's questions with defaults"
    )
    chat.set_defaults(func=_cmd_chat)

    _add_store_commands(sub)
    # `pending`/`answer --temporal HOST:PORT --workflow-id ID` (no Temporal import until used)
    from .temporal._cli import add_temporal_options

    add_temporal_options(sub)
    return parser


def _cmd_version(args: argparse.Namespace) -> int:
    from . import __version__

    print(__version__)
    return 0


def _pace() -> float:
    try:
        return float(os.environ.get("HPD_AGENT_DEMO_PACE", _DEMO_PACE))
    except ValueError:
        return _DEMO_PACE


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False)


def _run(console: Console, main: Callable[[], Awaitable[Any]]) -> int:
    """Run ``main`` on asyncio (litellm needs it); Ctrl-C cancels the run tree cleanly."""
    import anyio

    from .exceptions import HpdAgentError

    try:
        anyio.run(main, backend="asyncio")
    except KeyboardInterrupt:
        # asyncio.run cancelled the main task on Ctrl-C, so every agent and pending
        # question of the run was cancelled before we got here.
        console.print("\n[bold yellow]Cancelled (Ctrl-C): the run and its agents were stopped.[/]")
        return 130
    except HpdAgentError as e:
        console.print(f"[bold red]Error:[/] {type(e).__name__}: {e}")
        return 1
    return 0


def _stdin_note(console: Console, assume_yes: bool) -> None:
    if not assume_yes and not sys.stdin.isatty():
        console.print(
            "[dim]Input is not a terminal: answers are read from it, and once it ends every "
            "prompt gets its default (as with --yes).[/]"
        )


def _cmd_demo(args: argparse.Namespace) -> int:
    import anyio
    from rich.panel import Panel

    from ._demo import DEFAULT_PROMPT, demo_agents
    from .handlers import ConsoleHandler

    console = _console()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="hpd-agent-demo-"))
    orchestrator = demo_agents(args.model, workdir=str(workdir), pace=_pace())
    handler = ConsoleHandler(console, assume_yes=args.yes)
    prompt = args.prompt or DEFAULT_PROMPT
    mode = f"model {args.model}" if args.model else "offline scripted agents"
    console.print(f"[bold]hpd-agent demo[/] [dim]({mode}; files go to {workdir})[/]")
    _stdin_note(console, args.yes)

    async def main() -> None:
        result = await orchestrator.run(prompt, handler=handler)
        console.print()
        console.print(Panel(result.output or "(no output)", title="Orchestrator's answer"))
        files = sorted([p.name async for p in anyio.Path(workdir).iterdir() if await p.is_file()])
        console.print(
            f"[dim]Files in {workdir}: {', '.join(files) or 'none'} · "
            f"{result.usage.requests} model requests, "
            f"{result.usage.total_tokens} tokens[/]"
        )

    return _run(console, main)


def _cmd_chat(args: argparse.Namespace) -> int:
    from ._demo import chat_agent
    from .exceptions import HpdAgentError
    from .handlers import ConsoleHandler
    from .messages import Message

    console = _console()
    agent = chat_agent(args.model, pace=_pace())
    handler = ConsoleHandler(console, assume_yes=args.yes)
    mode = f"model {args.model}" if args.model else "offline model"
    console.print(f"[bold]hpd-agent chat[/] [dim]({mode}; /exit or Ctrl-D to leave)[/]")
    _stdin_note(console, args.yes)

    async def main() -> None:
        history: list[Message] | None = None
        while True:
            line = await handler.prompt("you> ")
            if line is None or line.strip() in _EXIT_WORDS:
                break
            if not line.strip():
                continue
            try:
                result = await agent.run(line, handler=handler, history=history)
            except HpdAgentError as e:
                # The turn failed; the conversation so far is kept, so the chat goes on.
                console.print(f"[bold red]Error:[/] {type(e).__name__}: {e}")
                continue
            history = result.messages
            console.print()
        console.print("[dim]bye[/]")

    return _run(console, main)


# -- durable runs: pending, answer, resume ---------------------------------------------------

_DEMO_AGENTS = "hpd_agent._demo:demo_agents"

# Exit statuses of `answer`, one per refusal, so scripts can tell them apart.
_REFUSALS = {
    "UnknownRequestError": 3,
    "RequestAlreadyAnsweredError": 4,
    "RequestExpiredError": 5,
    "RequestCancelledError": 6,
    "InvalidAnswerError": 7,
}


def _add_store_commands(sub: Any) -> None:
    db_help = "the store: a SQLite file, or a postgresql:// DSN"
    pending = sub.add_parser("pending", help="list requests waiting for an answer in a store")
    pending.add_argument("--db", required=True, help=db_help)
    pending.add_argument("--run", help="only this run's requests")
    pending.add_argument("--json", action="store_true", help="one JSON object per line")
    pending.set_defaults(func=_cmd_pending)

    answer = sub.add_parser("answer", help="answer a pending request in a store")
    answer.add_argument("request_id")
    answer.add_argument("text", help="the answer (with --json: a JSON value, e.g. true)")
    answer.add_argument("--db", required=True, help=db_help)
    answer.add_argument("--json", action="store_true", help="parse the answer as JSON")
    answer.add_argument("--sender", help="who answers (kept with the answer)")
    answer.set_defaults(func=_cmd_answer)

    resume = sub.add_parser("resume", help="continue a run journaled in a store")
    resume.add_argument("run_id")
    resume.add_argument("--db", required=True, help=db_help)
    resume.add_argument(
        "--agent",
        default=_DEMO_AGENTS,
        help="module:attribute of the root Agent, or of a callable returning it "
        f"(default: {_DEMO_AGENTS})",
    )
    resume.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="REQUEST_ID=TEXT",
        help="answer a pending request before resuming (repeatable)",
    )
    resume.add_argument(
        "--interrupt",
        action="store_true",
        help="stop with status 'interrupted' at the next unanswered question instead of waiting",
    )
    resume.add_argument(
        "--max-age", type=float, help="expire this run's pending requests older than SECONDS"
    )
    resume.set_defaults(func=_cmd_resume)


def _open(db: str) -> Any:
    from .store import open_store

    return open_store(db)


def _cmd_pending(args: argparse.Namespace) -> int:
    import anyio

    async def main() -> int:
        store = _open(args.db)
        try:
            records = await store.list_requests(run_id=args.run)
        finally:
            await store.aclose()
        for r in records:
            if args.json:
                print(
                    json.dumps(
                        {
                            "id": r.id,
                            "run_id": r.run_id,
                            "agent_path": list(r.agent_path),
                            "kind": r.kind,
                            "question": r.question,
                            "options": None if r.options is None else list(r.options),
                            "created_at": r.created_at,
                            "expires_at": r.expires_at,
                        }
                    )
                )
            else:
                options = f"  [{' | '.join(r.options)}]" if r.options else ""
                agent = "/".join(r.agent_path)
                print(f"{r.id}  {r.run_id}  {agent}  {r.kind}: {r.question}{options}")
        if not records and not args.json:
            print("no pending requests", file=sys.stderr)
        return 0

    return anyio.run(main)


def _cmd_answer(args: argparse.Namespace) -> int:
    import anyio

    from .exceptions import RequestError
    from .store import respond

    if args.json:
        try:
            value: Any = json.loads(args.text)
        except json.JSONDecodeError as e:
            print(f"error: --json answer is not valid JSON: {e}", file=sys.stderr)
            return 2
    else:
        value = args.text
    context = {"channel": "cli"}
    if args.sender:
        context["sender"] = args.sender

    async def main() -> int:
        store = _open(args.db)
        try:
            record = await respond(store, args.request_id, value, context=context)
        except RequestError as e:
            print(f"error: {e}", file=sys.stderr)
            return _REFUSALS.get(type(e).__name__, 1)
        finally:
            await store.aclose()
        print(f"answered {record.id}: {json.dumps(record.answer)}")
        return 0

    return anyio.run(main)


def _load_agent(spec: str) -> Any:
    from .agent import Agent
    from .exceptions import UserError

    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UserError(f"--agent must look like module:attribute, got {spec!r}")
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as e:
        raise UserError(f"cannot load --agent {spec!r}: {e}") from e
    agent = target if isinstance(target, Agent) else target()
    if not isinstance(agent, Agent):
        raise UserError(f"--agent {spec!r} gave {type(agent).__name__}, not an Agent")
    return agent


def _cmd_resume(args: argparse.Namespace) -> int:
    import anyio

    from .events import ClarificationRequest
    from .exceptions import HpdAgentError

    answers: dict[str, str] = {}
    for item in args.answer:
        request_id, sep, text = item.partition("=")
        if not sep:
            print(f"error: --answer must be REQUEST_ID=TEXT, got {item!r}", file=sys.stderr)
            return 2
        answers[request_id] = text

    async def main() -> int:
        agent = _load_agent(args.agent)
        store = _open(args.db)
        policy = "interrupt" if args.interrupt else None
        try:
            result = await agent.resume(
                args.run_id,
                store=store,
                answers=answers,
                on_unhandled=policy,
                max_age=args.max_age,
                handler=None if args.interrupt else _StoreNotice(args.db),
            )
        finally:
            await store.aclose()
        if result.status == "interrupted":
            for request in result.pending:
                if isinstance(request, ClarificationRequest):
                    what = request.question
                else:
                    what = f"permission for {request.tool_name}"
                print(f"pending {request.request_id}: {what}")
            return 3
        print(result.output or "")
        return 0

    try:
        return anyio.run(main)
    except HpdAgentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


class _StoreNotice:
    """Tells on stderr which questions wait; the answers come through the store."""

    def __init__(self, db: str) -> None:
        self.db = db

    async def on_event(self, event: Any) -> None:
        from .events import ClarificationRequest

        if isinstance(event, ClarificationRequest) and not event.replayed:
            agent = "/".join(event.agent_path)
            print(
                f"waiting for {event.request_id} ({agent}): {event.question}\n"
                f"  answer with: hpd-agent answer {event.request_id} TEXT --db {self.db}",
                file=sys.stderr,
                flush=True,
            )

    async def on_request(self, request: Any) -> Any:
        import anyio

        # Never answers here: the answer arrives through the store and resolves the request,
        # which cancels this wait.
        await anyio.sleep_forever()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hpd-agent`` command; returns the exit status."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
