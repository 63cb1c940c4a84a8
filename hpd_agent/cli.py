"""The ``hpd-agent`` command: one subcommand per function below, registered in ``_parser``.

Every failure is one line on stderr (``error: ...``, naming the store, run id, request id or
journal key concerned), never a traceback, and its own exit status:

| status | meaning |
|---|---|
| 0 | done |
| 1 | the run failed (a model or agent error); any other hpd_agent error |
| 2 | bad command-line input: usage, ``run``'s ``--run-id`` naming a run that ended or was started on another prompt, ``--json`` text that is not JSON or nests too deeply, ``--answer`` not ``REQUEST_ID=TEXT``, ``answer`` with both or neither of TEXT and ``--decline``; a ``--hook`` that does not load or names no ``Hook``; a ``--policy`` that does not load or is no policy, an answer the ``answer --policy`` refuses (nothing written), a ``--token`` empty or given twice; a command, a ``postgresql://`` store or ``--temporal`` needing an extra that is not installed (the line gives its install command: ``_apps/extras``) |
| 3 | ``answer``: no request has that id |
| 4 | the request was already answered (or declined) |
| 5 | the request expired |
| 6 | the request was cancelled |
| 7 | the answer does not fit the question |
| 8 | the store cannot be opened: no such file (only a run creates one), no such directory, not a database, server unreachable |
| 9 | the store holds data this version cannot read (a corrupt request row, a payload of the wrong kind, a garbage journal entry); ``pending`` still lists every readable request |
| 10 | the run's agent (or the agent ``serve``, ``mcp``, ``acp`` or ``run`` is given) cannot be found or loaded, or ``--agent`` (``run --run-id``: MODULE:ATTR) is not the agent the run belongs to |
| 11 | ``resume``: no run has that id |
| 12 | ``resume --answer``: no request has that id |
| 13 | ``resume``, ``run --run-id``: another process drives the run (the message names the lease's holder and when it expires; if that process died, resume again after then) |
| 14 | ``grants revoke``: no grant has that id |
| 70 | an internal error (a bug in hpd-agent): its one line says what; ``HPD_AGENT_DEBUG=1`` shows the traceback |
| 75 | ``resume --interrupt``, ``run --interrupt``: stopped with questions pending (listed on stdout); not an error |
| 130 | interrupted: Ctrl-C (``run``: the run stays resumable in the store), or ``/exit`` at a question, or Ctrl-D (end of input) at a question in a terminal |
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._apps.cli_parser import AGENT_REF_HELP, CommandParser, port_number, store_option
from ._apps.cli_store import EXIT_INTERRUPTED, EXIT_USAGE, _Fail, add_store_commands, failure
from ._apps.extras import needs_extra, needs_store_extra
from ._apps.hook_option import add_hook_option, install_hooks
from .text import bounded, printable

if TYPE_CHECKING:
    import anyio
    from rich.console import Console

    from .agent import Agent

__all__ = ["main"]

_DEMO_PACE = 0.02
"""Seconds between streamed words of the offline demo (``HPD_AGENT_DEMO_PACE`` overrides)."""

_EXIT_WORDS = {"/exit", "/quit", "exit", "quit"}

_API_BASE_HELP = "with --model: an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1"
_KEY_HINT = "or, for a server of your own, pass --api-base URL"


def _parser() -> argparse.ArgumentParser:
    # Its subcommands are CommandParsers too: each reports its own mistakes, with a hint.
    parser = CommandParser(
        prog="hpd-agent", description="Nested multi-agent orchestration with a human in the loop."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command")
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=_cmd_version)

    _add_demo_command(sub)

    chat = sub.add_parser(
        "chat",
        help="chat with one agent that can ask you questions",
        description="An interactive chat; history is kept between turns. /exit or Ctrl-D ends it.",
    )
    chat.add_argument("--model", help="a litellm model string (default: an offline model)")
    chat.add_argument("--api-base", metavar="URL", help=_API_BASE_HELP)
    chat.add_argument(
        "--yes", "-y", action="store_true", help="answer the agent's questions with defaults"
    )
    chat.set_defaults(func=_cmd_chat)

    add_store_commands(sub)
    from ._apps.resume_command import add_resume_command

    add_resume_command(sub)
    # `history RUN_ID --store URL`: a run's audit trail
    from ._apps.history_command import add_history_command

    add_history_command(sub)
    # `run MODULE:ATTR PROMPT --store URL`: a durable run whose questions wait in the store
    from ._apps.run_command import add_run_command

    add_run_command(sub)
    # `grants list|revoke --store URL`: the remembered grants of a store
    from ._apps.grants_command import add_grants_command

    add_grants_command(sub)
    _add_serve_command(sub)
    # `inbox --store URL`: one inbox for a whole store (hpd_agent.inbox, imported when run)
    from ._apps.inbox_command import add_inbox_command

    add_inbox_command(sub)
    # `mcp MODULE:ATTR`: the agent as an MCP tool (hpd_agent.mcp, imported only when run)
    from ._apps.mcp_command import add_mcp_command

    add_mcp_command(sub)
    # `acp MODULE:ATTR`: the agent served to a code editor (hpd_agent.acp, imported when run)
    from ._apps.acp_command import add_acp_command

    add_acp_command(sub)
    # `pending`/`answer --temporal HOST:PORT --workflow-id ID` (no Temporal import until used)
    from .temporal._cli import add_temporal_options

    add_temporal_options(sub, failure)
    return parser


def _version() -> str:
    from .version import __version__

    return __version__


def _cmd_version(args: argparse.Namespace) -> int:
    print(_version())
    return 0


def _pace() -> float:
    try:
        return float(os.environ.get("HPD_AGENT_DEMO_PACE", _DEMO_PACE))
    except ValueError:
        return _DEMO_PACE


_UNWRAPPED = 1_000_000
"""The width of a console writing to a pipe or a file with no ``COLUMNS``: no wrapping."""


def _console() -> Console:
    """The CLI's console: wrapped to the terminal's width (or ``COLUMNS``); written to a pipe
    or a file, one line per message, so logs and ``grep`` see a whole message on its line."""
    from rich.console import Console

    wrapped = sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit()
    return Console(highlight=False, width=None if wrapped else _UNWRAPPED)


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
    except _Shown:
        return 1
    except HpdAgentError as e:
        console.print(f"[bold red]Error:[/] {type(e).__name__}: {e}", soft_wrap=True)
        return 1
    return 0


class _Shown(Exception):
    """The run failed and the console handler already said so ("Run failed: ...")."""


def _stdin_note(console: Console, assume_yes: bool) -> None:
    if not assume_yes and not sys.stdin.isatty():
        console.print(
            "[dim]Input is not a terminal: answers are read from it, and once it ends every "
            "prompt gets its default (as with --yes).[/]"
        )


def _add_demo_command(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="watch nested agents ask you mid-turn (offline, no key)",
        description=(
            "The Orchestrator sends a ResearchAgent and a CodingAgent off on TASK in parallel; "
            "the CodingAgent's Clarifier, two levels down, and the ResearchAgent both ask you "
            "mid-turn; you answer them out of order and each goes on from its answer; the "
            "CodingAgent asks before writing a file. Offline by default (scripted agents that "
            "react to the task and to what you type)."
        ),
    )
    demo.add_argument(
        "prompt", nargs="?", default=None, metavar="TASK", help="the task (default: a todo API)"
    )
    demo.add_argument(
        "--model", help="run the agents on this litellm model, e.g. openai/gpt-4o-mini"
    )
    demo.add_argument("--api-base", metavar="URL", help=_API_BASE_HELP)
    demo.add_argument(
        "--yes", "-y", action="store_true", help="answer every prompt with its default"
    )
    demo.add_argument("--workdir", help="where write_file writes (default: a new temp dir)")
    demo.add_argument(
        "--a2a",
        action="store_true",
        help="the A2A headline: a remote Planner in a second process asks through A2A",
    )
    demo.add_argument(
        "--acp",
        action="store_true",
        help="the ACP headline: a Planner served by hpd-agent acp, a sub-agent over ACP, asks",
    )
    demo.set_defaults(func=_cmd_demo)


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.api_base and not args.model:
        raise _Fail(EXIT_USAGE, "demo: --api-base goes with --model, e.g. --model openai/<name>")
    if args.a2a or args.acp:
        return _cmd_demo_across(args)
    _missing_key(args.model, args.api_base)  # first: nothing else to load to say it
    import anyio

    from ._apps.demo import DEFAULT_PROMPT, QUESTIONS_TOGETHER, DemoConsole, demo_agents

    console = _console()
    prompt = (args.prompt or "").strip() or DEFAULT_PROMPT
    mode = f"model {args.model}" if args.model else "offline scripted agents"
    # Offline, the two parallel questions are known to come together, so they are gathered
    # and answered out of order; a real model may ask any number, so each is asked at once.
    handler = DemoConsole(
        console,
        assume_yes=args.yes,
        together=0 if args.model else QUESTIONS_TOGETHER,
        echo=not sys.stdin.isatty(),
    )
    with contextlib.ExitStack() as stack:
        if args.workdir:
            workdir, where = Path(args.workdir), f"files go to {args.workdir}"
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hpd-agent-")))
            where = "files go to a temporary directory, removed at the end"
        orchestrator = demo_agents(
            args.model, workdir=str(workdir), pace=_pace(), api_base=args.api_base
        )
        console.print(f"[bold]hpd-agent demo[/] [dim]({mode}; {where})[/]")
        _check_credentials(console, orchestrator, args.model, args.api_base)
        _stdin_note(console, args.yes)
        cancelled = False

        async def main() -> None:
            from .exceptions import HpdAgentError

            nonlocal cancelled
            try:
                result = await orchestrator.run(prompt, handler=handler)
            except HpdAgentError:
                raise _Shown from None
            cancelled = result.status == "cancelled"  # Ctrl-D at a question, in a terminal
            files = sorted(
                [p.name async for p in anyio.Path(workdir).iterdir() if await p.is_file()]
            )
            kept = f"in {workdir}" if args.workdir else "(removed with the temporary directory)"
            ended = "" if cancelled else f"Run {result.status}. "  # "Run cancelled." was said
            console.print(
                f"\n[dim]{ended}Files written: {', '.join(files) or 'none'} {kept} · "
                f"{result.usage.requests} model requests, {result.usage.total_tokens} tokens[/]"
            )

        status = _run(console, main)
        return EXIT_INTERRUPTED if cancelled and status == 0 else status


def _cmd_demo_across(args: argparse.Namespace) -> int:
    """``demo --a2a`` / ``demo --acp``: the headline across a protocol, offline."""
    if args.a2a:
        from ._apps.a2a_demo import run_demo_a2a

        return run_demo_a2a(args, _console(), _run, _stdin_note)
    from ._apps.acp_demo import run_demo_acp

    return run_demo_acp(args, _console(), _run, _stdin_note)


def _cmd_chat(args: argparse.Namespace) -> int:
    if args.api_base and not args.model:
        raise _Fail(EXIT_USAGE, "chat: --api-base goes with --model, e.g. --model openai/<name>")
    _missing_key(args.model, args.api_base)  # first: nothing else to load to say it
    from ._apps.demo import chat_agent
    from .exceptions import HpdAgentError
    from .handlers import ConsoleHandler
    from .messages import Message

    console = _console()
    agent = chat_agent(args.model, pace=_pace(), api_base=args.api_base)
    handler = ConsoleHandler(console, assume_yes=args.yes, exit_words=_EXIT_WORDS)
    mode = f"model {args.model}" if args.model else "offline model"
    console.print(f"[bold]hpd-agent chat[/] [dim]({mode}; /exit or Ctrl-D to leave)[/]")
    _check_credentials(console, agent, args.model, args.api_base)
    _stdin_note(console, args.yes)

    ctrl_c = _CtrlC(console)
    failed = cancelled = False

    async def main() -> None:
        nonlocal failed, cancelled
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
                    except HpdAgentError:
                        # The turn failed (the handler said so); the conversation so far is kept.
                        failed = True
                        continue
                    failed = False
                    # An exit word, or Ctrl-D in a terminal, at the agent's question: the
                    # turn is cancelled and the chat ends.
                    cancelled = result.status == "cancelled"
                    if not cancelled:
                        history = result.messages
                    console.print()
                if handler.left:
                    break
        console.print("[dim]bye[/]")

    status = _run(console, main)
    if ctrl_c.left or (cancelled and status == 0):
        return EXIT_INTERRUPTED
    # The last turn failed: the chat ends in failure (a script piping into it can tell).
    return 1 if failed and status == 0 else status


def _missing_key(model: str | None, api_base: str | None) -> None:
    """Raise ``ModelAuthenticationError`` now if ``--model`` has no API key, where the model
    string tells which variable holds it: before any agent is built (which starts importing
    litellm, seconds of work a process cannot exit in the middle of). Offline (no
    ``--model``) and with ``--api-base`` (a server of one's own) no key is needed."""
    if model is None or api_base:
        return
    from .models._keys import missing_key, no_key_error

    missing = missing_key(model)
    if missing:
        raise no_key_error(model, missing, _KEY_HINT)


def _check_credentials(
    console: Console, agent: Agent, model: str | None, api_base: str | None
) -> None:
    """Say on screen that litellm loads for ``--model`` (in the background: the first reply
    waits for it); where only litellm can tell which key the model needs, load it now (the
    screen says so) and raise ``ModelAuthenticationError`` if it is missing (no request)."""
    if model is None:
        return
    from .models._keys import missing_key

    if not api_base and missing_key(model) is None:
        from rich.markup import escape

        console.print(f"[dim]Loading litellm to check the API key of {escape(model)}...[/]")
        resolved = agent.model  # waits for litellm (its import started with the agent)
        from .models.litellm import LiteLLMModel

        if isinstance(resolved, LiteLLMModel):
            resolved.check_credentials(hint=_KEY_HINT)
    else:  # its import started with the agent, a moment ago
        console.print(
            "[dim]Loading litellm for the model in the background: the first reply waits "
            "for it (a few seconds).[/]"
        )


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


# -- serve (hpd_agent.web, the "web" extra) -------------------------------------------------
def _add_serve_command(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve an agent over HTTP: AG-UI endpoint, question inbox and web page (or A2A)",
        description=(
            "Serve the Agent at MODULE:ATTR over HTTP: the web page at /, the AG-UI endpoint "
            "POST /agent and the question inbox (with --a2a: over A2A instead). Runs are "
            "journaled in --store, so a restart loses no question. While it serves it prints "
            "a line per run started or ended and per question asked or answered (--quiet: "
            "none)."
        ),
    )
    serve.add_argument("agent", metavar="MODULE:ATTR", help=AGENT_REF_HELP)
    serve.add_argument(
        "--a2a", action="store_true", help="serve it over A2A instead (needs only the a2a extra)"
    )
    serve.add_argument("--url", default=None, help="with --a2a: the base URL the card advertises")
    serve.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    serve.add_argument("--port", type=port_number, default=8000, help="port; 0 picks a free one")
    store_option(
        serve, "SQLite path or postgresql:// DSN (default hpd-agent-web.db; with --a2a: none)"
    )
    from ._apps.serving import add_policy_option, add_token_option

    add_token_option(serve)
    add_policy_option(serve)
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients may use besides loopback ones and --host (repeatable)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin (https://app.example) allowed to call the API (repeatable)",
    )
    add_hook_option(serve)
    serve.add_argument(
        "--example",
        action="append",
        default=None,
        metavar="TEXT",
        help="a prompt the page suggests, instead of the agent's own examples (repeatable)",
    )
    serve.add_argument(
        "--quiet",
        action="store_true",
        help="say only where it serves: no line per run started or ended and per question "
        "asked or answered",
    )
    serve.set_defaults(func=_cmd_serve)


def _bad_examples(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--example`` (before anything is loaded), or None."""
    from .agent import check_examples
    from .exceptions import UserError

    if args.a2a:
        return "--example is for the web page, not --a2a"
    try:
        args.example = list(check_examples(args.example))
    except UserError as e:
        return f"--example: {e}"
    return None


def _cmd_serve(args: argparse.Namespace) -> int:
    if args.example is not None:
        failed = _bad_examples(args)
        if failed:
            print(f"error: serve: {failed}", file=sys.stderr)
            return 2
    install_hooks(args.hook)  # before anything serves: every run has them
    if args.a2a:
        from ._apps.a2a_command import serve_a2a

        return serve_a2a(args)
    if args.url is not None:
        print("error: serve: --url goes with --a2a", file=sys.stderr)
        return 2
    # Other errors go to main(): one line, the exit status of the table above.
    with needs_extra("web", "serve"):
        import uvicorn  # noqa: F401  # pyright: ignore[reportUnusedImport]

        from . import web
    needs_store_extra(args.store)
    from ._apps.serving import (
        activity_line,
        serve_http,
        served_agent,
        serving_policy,
        serving_tokens,
    )

    token = serving_tokens(args.token, args.host)
    policy = serving_policy(args.policy, command="serve: ")
    agent = served_agent(args.agent, "serve")
    host = args.host.strip("[]")
    # The Host rule (docs/web.md): loopback names, the bound address and --allow-host; with a
    # token and no --allow-host, any name (the token guards the server).
    hosts = [*args.allow_host, host] if args.allow_host or token is None else None
    app = web.create_app(
        agent,
        store=args.store,
        token=token,
        agent_ref=args.agent,
        allowed_hosts=hosts,
        allowed_origins=args.allow_origin,
        examples=args.example,
        activity=None if args.quiet else activity_line,
        policy=policy,
    )
    return serve_http(app, args.host, args.port, what=agent.name)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hpd-agent`` command; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.command is None:  # a bare `hpd-agent`: the help, as asked for (status 0)
        parser.print_help()
        return 0
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:
        if os.environ.get("HPD_AGENT_DEBUG"):
            raise
        status, message = failure(e)
        print(f"error: {printable(bounded(message), one_line=True)}", file=sys.stderr)
        return status


if __name__ == "__main__":
    raise SystemExit(main())
