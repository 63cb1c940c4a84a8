"""The ``hpd-agent`` command: one subcommand per function below, registered in ``_parser``.

Every failure is one line on stderr (``error: ...``, naming the store, run id, request id or
journal key concerned), never a traceback, and its own exit status:

| status | meaning |
|---|---|
| 0 | done |
| 1 | the run failed (a model or agent error); any other hpd_agent error |
| 2 | bad command-line input: usage, ``--json`` text that is not JSON or nests too deeply, ``--answer`` not ``REQUEST_ID=TEXT`` |
| 3 | ``answer``: no request has that id. ``resume --interrupt``: stopped with questions pending (listed on stdout) |
| 4 | the request was already answered |
| 5 | the request expired |
| 6 | the request was cancelled |
| 7 | the answer does not fit the question |
| 8 | the store cannot be opened: no such file (only a run creates one), no such directory, not a database, server unreachable |
| 9 | the store holds data this version cannot read (a corrupt request row, a payload of the wrong kind, a garbage journal entry); ``pending`` still lists every readable request |
| 10 | the run's agent cannot be found or loaded, or ``--agent`` is not the agent the run belongs to |
| 11 | ``resume``: no run has that id |
| 12 | ``resume --answer``: no request has that id |
| 70 | an internal error (a bug in hpd-agent): its one line says what; ``HPD_AGENT_DEBUG=1`` shows the traceback |
| 130 | interrupted (Ctrl-C) |
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import sys
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._text import bounded, error_text, printable

if TYPE_CHECKING:
    import anyio
    from rich.console import Console

    from .agent import Agent
    from .store import RequestRecord, Store

__all__ = ["main"]

_DEMO_PACE = 0.02
"""Seconds between streamed words of the offline demo (``HPD_AGENT_DEMO_PACE`` overrides)."""

_EXIT_WORDS = {"/exit", "/quit", "exit", "quit"}

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PENDING = 3
EXIT_STORE_UNAVAILABLE = 8
EXIT_STORE_CORRUPT = 9
EXIT_AGENT = 10
EXIT_NO_RUN = 11
EXIT_UNKNOWN_REQUEST = 12
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


class _Fail(Exception):
    """A CLI failure: one line for stderr and its exit status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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

    ctrl_c = _CtrlC(console)

    async def main() -> None:
        history: list[Message] | None = None
        async with ctrl_c.watching():
            while True:
                line = await handler.prompt("you> ")
                if line is None or line.strip() in _EXIT_WORDS:
                    break
                if not line.strip():
                    continue
                with ctrl_c.turn():  # Ctrl-C cancels this turn only; the history stays
                    try:
                        result = await agent.run(line, handler=handler, history=history)
                    except HpdAgentError as e:
                        # The turn failed; the conversation so far is kept, so the chat goes on.
                        console.print(f"[bold red]Error:[/] {type(e).__name__}: {e}")
                        continue
                    history = result.messages
                    console.print()
        console.print("[dim]bye[/]")

    status = _run(console, main)
    return EXIT_INTERRUPTED if ctrl_c.left else status


class _CtrlC:
    """Ctrl-C in ``chat``: the first cancels the running turn and returns to the prompt; one
    at the prompt, or a second while the turn is still being cancelled, leaves the chat."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.left = False
        self._turn: anyio.CancelScope | None = None
        self._chat: anyio.CancelScope | None = None

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncGenerator[None, None]:
        import anyio

        async with anyio.create_task_group() as tg:
            self._chat = tg.cancel_scope
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                tg.start_soon(self._watch, signals)
                yield
            tg.cancel_scope.cancel()  # the chat ended: stop watching

    @contextlib.contextmanager
    def turn(self) -> Generator[None, None, None]:
        import anyio

        with anyio.CancelScope() as scope:
            self._turn = scope
            try:
                yield
            finally:
                self._turn = None
        if scope.cancelled_caught:
            self.console.print(
                "\n[bold yellow]Cancelled (Ctrl-C): that turn was stopped; Ctrl-C again leaves.[/]"
            )

    async def _watch(self, signals: AsyncIterator[int]) -> None:
        async for _ in signals:
            turn = self._turn
            if turn is not None and not turn.cancel_called:
                turn.cancel()
                continue
            self.left = True
            self.console.print()
            if self._chat is not None:
                self._chat.cancel()
            return


# -- durable runs: pending, answer, resume ---------------------------------------------------

# Exit statuses of a refused answer, one per refusal, so scripts can tell them apart.
_REFUSALS = {
    "UnknownRequestError": 3,
    "RequestAlreadyAnsweredError": 4,
    "RequestExpiredError": 5,
    "RequestCancelledError": 6,
    "InvalidAnswerError": 7,
}


def _add_store_commands(sub: Any) -> None:
    db_help = "the store: a SQLite file (it must exist), or a postgresql:// DSN"
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
        help="module:attribute of the root Agent, or of a callable returning it (default: "
        "the one the run recorded; the module is looked up in the current directory first)",
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


def _open(db: str) -> Store:
    """The store at ``db``; an existing one only (a mistyped path must not make a new one)."""
    from .store import SQLiteStore

    if db.startswith(("postgresql://", "postgres://")):
        try:
            from .store.postgres import PostgresStore
        except ImportError as e:
            raise _Fail(EXIT_STORE_UNAVAILABLE, str(e)) from None
        return PostgresStore(db)
    return SQLiteStore(db, create=False)


def _show(text: str) -> str:
    """Stored text made safe for one line of the terminal (no escapes, no fake rows)."""
    return printable(text, one_line=True)


def _print_request(r: RequestRecord, as_json: bool) -> None:
    if as_json:
        item = {
            "id": r.id,
            "run_id": r.run_id,
            "agent_path": list(r.agent_path),
            "kind": r.kind,
            "question": r.question,
            "options": None if r.options is None else list(r.options),
            "created_at": r.created_at,
            "expires_at": r.expires_at,
        }
        print(json.dumps(item))  # ASCII JSON: controls and surrogates are escaped
        return
    options = f"  [{' | '.join(r.options)}]" if r.options else ""
    agent = "/".join(r.agent_path)
    print(_show(f"{r.id}  {r.run_id}  {agent}  {r.kind}: {r.question}{options}"))


def _cmd_pending(args: argparse.Namespace) -> int:
    import anyio

    from .exceptions import StoreCorruptError
    from .store._sql import SQLStore

    async def main() -> int:
        store = _open(args.db)
        errors: list[StoreCorruptError] = []
        try:
            if isinstance(store, SQLStore):
                records = await store.list_requests(run_id=args.run, errors=errors)
            else:
                records = await store.list_requests(run_id=args.run)
        finally:
            await store.aclose()
        for r in records:
            _print_request(r, args.json)
        for e in errors:
            print(f"error: {_show(str(e))}", file=sys.stderr)
        if not records and not errors and not args.json:
            print("no pending requests", file=sys.stderr)
        return EXIT_STORE_CORRUPT if errors else 0

    return anyio.run(main)


def _parse_json_answer(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise _Fail(EXIT_USAGE, "--json answer is nested too deeply") from None
    except ValueError as e:
        raise _Fail(EXIT_USAGE, f"--json answer is not valid JSON: {e}") from None


def _cmd_answer(args: argparse.Namespace) -> int:
    import anyio

    from .store import respond

    value: Any = _parse_json_answer(args.text) if args.json else args.text
    context = {"channel": "cli"}
    if args.sender:
        context["sender"] = args.sender

    async def main() -> int:
        store = _open(args.db)
        try:
            record = await respond(store, args.request_id, value, context=context)
        finally:
            await store.aclose()
        print(f"answered {record.id}: {json.dumps(record.answer)}")
        return 0

    return anyio.run(main)


def _load_agent(spec: str) -> Agent:
    from ._refs import load_ref
    from .agent import Agent

    try:
        target = load_ref(spec)
        agent = target if isinstance(target, Agent) else target()
    except ValueError:
        raise _Fail(EXIT_AGENT, f"--agent must look like module:attribute, got {spec!r}") from None
    except Exception as e:  # the user's module: any error while importing or building it
        raise _Fail(EXIT_AGENT, f"cannot load --agent {spec!r}: {type(e).__name__}: {e}") from None
    if not isinstance(agent, Agent):
        raise _Fail(EXIT_AGENT, f"--agent {spec!r} gave {type(agent).__name__}, not an Agent")
    return agent


async def _agent_of(store: Store, run_id: str, given: str | None) -> Agent:
    """The root agent of ``run_id``: the one it recorded, or ``given`` if it matches the run.

    A run that recorded no reference takes ``given`` (its name must match) and records it.
    """
    record = await store.get_run(run_id)
    if record is None:
        raise _Fail(EXIT_NO_RUN, f"no run {run_id!r} in {store!r}")
    recorded = record.agent_ref
    if given is not None and recorded is not None and given != recorded:
        raise _Fail(
            EXIT_AGENT,
            f"run {run_id} belongs to agent {recorded}, not --agent {given}: "
            "resume it with its own agent",
        )
    ref = given or recorded
    if ref is None:
        raise _Fail(
            EXIT_AGENT,
            f"run {run_id} does not record where its agent {record.agent_name!r} is defined: "
            "pass --agent module:attribute",
        )
    agent = _load_agent(ref)
    if agent.name != record.agent_name:
        raise _Fail(
            EXIT_AGENT,
            f"run {run_id} was started by agent {record.agent_name!r}, "
            f"but --agent {ref} is {agent.name!r}",
        )
    if recorded is None:
        await store.put_run(dataclasses.replace(record, agent_ref=ref))
    return agent


def _parse_answers(items: list[str]) -> dict[str, str]:
    answers: dict[str, str] = {}
    for item in items:
        request_id, sep, text = item.partition("=")
        if not sep:
            raise _Fail(EXIT_USAGE, f"--answer must be REQUEST_ID=TEXT, got {item!r}")
        answers[request_id] = text
    return answers


def _cmd_resume(args: argparse.Namespace) -> int:
    import anyio

    from .events import ClarificationRequest
    from .exceptions import UnknownRequestError

    answers = _parse_answers(args.answer)

    async def main() -> int:
        store = _open(args.db)
        policy = "interrupt" if args.interrupt else None
        try:
            agent = await _agent_of(store, args.run_id, args.agent)
            result = await agent.resume(
                args.run_id,
                store=store,
                answers=answers,
                on_unhandled=policy,
                max_age=args.max_age,
                handler=None if args.interrupt else _StoreNotice(args.db),
            )
        except UnknownRequestError as e:
            # 3 means "questions pending" for resume: an unknown --answer id has its own.
            raise _Fail(EXIT_UNKNOWN_REQUEST, str(e)) from None
        finally:
            await store.aclose()
        if result.status == "interrupted":
            for request in result.pending:
                if isinstance(request, ClarificationRequest):
                    what = request.question
                else:
                    what = f"permission for {request.tool_name}"
                print(_show(f"pending {request.request_id}: {what}"))
            return EXIT_PENDING
        if result.error is not None:
            raise result.error
        print(printable(result.output or ""))
        return 0

    return anyio.run(main)


class _StoreNotice:
    """Tells on stderr which questions wait; the answers come through the store."""

    def __init__(self, db: str) -> None:
        self.db = db

    async def on_event(self, event: Any) -> None:
        from .events import ClarificationRequest

        if isinstance(event, ClarificationRequest) and not event.replayed:
            agent = "/".join(event.agent_path)
            print(
                _show(f"waiting for {event.request_id} ({agent}): {event.question}")
                + f"\n  answer with: hpd-agent answer {event.request_id} TEXT --db {self.db}",
                file=sys.stderr,
                flush=True,
            )

    async def on_request(self, request: Any) -> Any:
        import anyio

        # Never answers here: the answer arrives through the store and resolves the request,
        # which cancels this wait.
        await anyio.sleep_forever()


def _failure(error: BaseException) -> tuple[int, str]:
    """The exit status and one-line message of an error that ended a command."""
    from .exceptions import HpdAgentError, RequestError, StoreCorruptError, StoreUnavailableError

    if isinstance(error, _Fail):
        return error.status, str(error)
    if isinstance(error, StoreUnavailableError):
        return EXIT_STORE_UNAVAILABLE, str(error)
    if isinstance(error, StoreCorruptError):
        return EXIT_STORE_CORRUPT, str(error)
    if isinstance(error, RequestError):
        return _REFUSALS.get(type(error).__name__, EXIT_FAILED), str(error)
    if isinstance(error, HpdAgentError):
        return EXIT_FAILED, f"{type(error).__name__}: {error}"
    return (
        EXIT_INTERNAL,
        f"internal error: {error_text(error)} (HPD_AGENT_DEBUG=1 shows the traceback)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hpd-agent`` command; returns the exit status."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:
        if os.environ.get("HPD_AGENT_DEBUG"):
            raise
        status, message = _failure(e)
        print(f"error: {_show(bounded(message))}", file=sys.stderr)
        return status


if __name__ == "__main__":
    raise SystemExit(main())
