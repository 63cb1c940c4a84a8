"""``hpd-agent run MODULE:ATTR PROMPT --store URL``: a durable run started from the command line.

The run is journaled in the store as it goes (a new run id, or ``--run-id``). Its live view
goes to stderr as ``chat`` shows it (the agents' text, their tool calls, how each question
ended); its final output goes to stdout, so ``hpd-agent run ... > out.txt`` keeps the answer
alone. A question never reads stdin: it waits in the store, shown with its request id and the
``hpd-agent answer`` line that answers it, for any process holding the store to answer (the
CLI, ``serve``'s page, a script calling ``hpd_agent.store.respond``). The waiting run wakes
through the store's own wake-up (SQLite's socket, PostgreSQL's LISTEN) and goes on in the
same turn. ``--interrupt`` leaves the questions pending instead and exits 75, for
``hpd-agent resume`` later. Ctrl-C stops this process and leaves the run resumable (130).

An existing ``--run-id`` is resumed if the store can continue it (running, its process gone,
or interrupted; same agent, same prompt); a run that ended is refused with one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._core.output import output_text
from ..events import (
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    PermissionResolved,
    RequestEvent,
    RunFinished,
    RunStarted,
)
from ..handlers._stream import esc as _esc
from ..text import printable
from .cli_parser import add_durability_option, store_option
from .cli_store import (
    EXIT_AGENT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PENDING,
    EXIT_USAGE,
    _db_hint,
    _Fail,
    _show,
    print_pending,
)

if TYPE_CHECKING:
    from rich.console import Console

    from ..agent import Agent
    from ..messages import Message
    from ..run import Run, RunResult
    from ..sessions import Durability, RunSession
    from ..store import RunRecord, Store

__all__ = ["add_run_command"]

_ENDED = ("completed", "failed", "cancelled")
"""Run statuses a run cannot be resumed from: ``run --run-id`` refuses them."""


def add_run_command(sub: Any) -> None:
    """Register ``run`` on the subcommands ``sub``."""
    run = sub.add_parser(
        "run",
        help="run an agent durably on a store: its questions wait there for an answer from "
        "any process (a batch job, a cron entry)",
        description="Run the Agent at MODULE:ATTR (importable from the current directory) on "
        "PROMPT, journaled in the store. Progress goes to stderr, the final output to stdout. "
        "Each question waits in the store until another process answers it (hpd-agent answer, "
        "serve's page, hpd_agent.store.respond); stdin is never read.",
    )
    run.add_argument("agent", metavar="MODULE:ATTR", help="the agent (or a factory) to run")
    run.add_argument("prompt", metavar="PROMPT", help="the task")
    store_option(
        run,
        "a SQLite path (made if missing), a postgresql:// DSN, or a location of a "
        "registered scheme",
        required=True,
    )
    run.add_argument(
        "--run-id",
        metavar="ID",
        help="the run's id (default: a new one); one already in the store is resumed",
    )
    run.add_argument(
        "--interrupt",
        action="store_true",
        help="at the first questions, leave them pending and exit 75 (hpd-agent resume "
        "continues the run) instead of waiting for their answers",
    )
    add_durability_option(run)
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """``hpd-agent run``: the exit status (failures raise, for ``cli.main`` to word)."""
    import anyio
    from rich.console import Console

    from .extras import needs_store_extra
    from .serving import served_agent

    if not args.prompt.strip():
        raise _Fail(EXIT_USAGE, "run: PROMPT is empty")
    needs_store_extra(args.store)
    agent = served_agent(args.agent, command="run")
    console = Console(stderr=True, highlight=False)
    view = RunView(console, args.store, args.prompt, interrupt=args.interrupt)

    async def main() -> int:
        return await _run(args, agent, view)

    try:
        return anyio.run(main, backend="asyncio")
    except KeyboardInterrupt:
        # asyncio cancelled the run from outside: like a crash, its questions stay pending and
        # the store can continue it.
        if view.run_id is None:
            print("interrupted (Ctrl-C) before the run started", file=sys.stderr)
        else:
            print(
                f"interrupted (Ctrl-C): run {view.run_id} stays in the store; continue it with "
                f"hpd-agent resume {view.run_id} --db {_db_hint(args.store)}",
                file=sys.stderr,
            )
        return EXIT_INTERRUPTED


async def _run(args: argparse.Namespace, agent: Agent, view: RunView) -> int:
    import anyio

    from ..store import open_store

    store = open_store(args.store)
    try:
        run, view.resumed = await _started(store, agent, args)
        view.run_id = run.run_id
        result = await _follow(run, view, interrupt=args.interrupt)
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()
    return _ended(result, view)


async def _started(store: Store, agent: Agent, args: argparse.Namespace) -> tuple[Run, bool]:
    """The run as a stream: new, or the store's run ``--run-id`` resumed (True)."""
    policy = "interrupt" if args.interrupt else None
    if args.run_id is not None:
        record = await store.get_run(args.run_id)
        if record is not None:
            # Its record is the driving process's to write (not this one's, without the
            # lease): a run that recorded no agent keeps needing `resume --agent`.
            _check_resumable(record, agent, args.prompt)
            resumed = agent.resume_stream(
                args.run_id, store=store, on_unhandled=policy, durability=args.durability
            )
            return resumed, True
    named = NamingStore(store, _absolute(args.agent))
    run = agent.stream(
        args.prompt,
        run_id=args.run_id,
        store=named,
        on_unhandled=policy,
        durability=args.durability,
    )
    return run, False


def _check_resumable(record: RunRecord, agent: Agent, prompt: str) -> None:
    """Refuse (one line) to continue ``record`` as ``agent``'s run on ``prompt``."""
    run_id = record.run_id
    if record.status in _ENDED:
        raise _Fail(
            EXIT_USAGE,
            f"run {run_id} already ended ({record.status}) in the store: nothing to resume; "
            "pick a new --run-id, or leave it out for a new one",
        )
    if record.agent_name != agent.name:
        raise _Fail(
            EXIT_AGENT,
            f"run {run_id} was started by agent {record.agent_name!r}, not {agent.name!r}: "
            "resume it with its own agent",
        )
    if record.prompt != prompt:
        raise _Fail(
            EXIT_USAGE,
            f"run {run_id} was started on another prompt, {_show(record.prompt[:80])!r}: "
            f"give the same prompt to continue it (or hpd-agent resume {run_id}), or pick a "
            "new --run-id",
        )


async def _follow(run: Run, view: RunView, *, interrupt: bool) -> RunResult:
    """Show the run's events until it ends; its result (a failed run's error raises)."""
    async with run:
        if interrupt:
            # Nobody here answers: under "interrupt" the run ends once every branch waits.
            run.stop_listening()
        async for event in run:
            view.show(event)
    return run.result


def _ended(result: RunResult, view: RunView) -> int:
    """Print how the run ended (the output on stdout); the exit status."""
    if result.status == "interrupted":
        print_pending(result.pending)
        print(
            f"run {result.run_id} stopped with questions pending; answer them, then continue "
            f"it with hpd-agent resume {result.run_id} --db {view.where}",
            file=sys.stderr,
        )
        return EXIT_PENDING
    if result.status == "cancelled":
        raise _Fail(EXIT_FAILED, f"run {result.run_id} was cancelled")
    print(printable(output_text(result.output) or ""), flush=True)
    return 0


def _absolute(ref: str) -> str:
    """``ref`` as another directory finds it again: a script's path made absolute."""
    module, sep, attribute = ref.rpartition(":")
    if module.endswith(".py"):
        return os.path.abspath(module) + sep + attribute
    return ref


@dataclasses.dataclass(frozen=True, slots=True)
class NamingStore:
    """A store opening new runs with ``ref`` as their agent's reference when the agent has
    none of its own (one built by a factory): ``hpd-agent resume RUN_ID`` loads it again.

    Args:
        store: The store.
        ref: ``MODULE:ATTR`` as ``run`` was given it.
    """

    store: Store
    ref: str

    async def open_session(
        self,
        *,
        run_id: str,
        agent_name: str,
        prompt: str,
        history: Sequence[Message] | None,
        agent_ref: str | None = None,
        durability: Durability | None = None,
    ) -> RunSession:
        """The store's new session, the agent named by ``ref`` unless it names itself."""
        return await self.store.open_session(
            run_id=run_id,
            agent_name=agent_name,
            prompt=prompt,
            history=history,
            agent_ref=agent_ref or self.ref,
            durability=durability,
        )

    async def resume_session(
        self,
        run_id: str,
        *,
        agent_name: str,
        answers: Mapping[str, Any] | None = None,
        max_age: float | None = None,
        durability: Durability | None = None,
    ) -> RunSession:
        """The store's own (a resumed run keeps the reference it recorded)."""
        return await self.store.resume_session(
            run_id, agent_name=agent_name, answers=answers, max_age=max_age, durability=durability
        )


class RunView:
    """The live view of a run on stderr: ``chat``'s (``ConsolePrinter``), with each question
    shown as waiting in the store, its request id and the command that answers it.

    Args:
        console: Where to print (stderr).
        where: The store as ``run`` was given it (a DSN is shown as ``DSN``).
        prompt: The run's prompt (a resumed run's is the one it recorded).
        interrupt: ``--interrupt``: questions are left pending, for ``resume``.

    Attributes:
        run_id: The run's id, once it is known.
        resumed: Whether the run is one the store held (``--run-id``), resumed.
    """

    def __init__(self, console: Console, where: str, prompt: str, *, interrupt: bool) -> None:
        from ..handlers._printing import ConsolePrinter

        self.printer = ConsolePrinter(console, show_tool_results=True, max_chars=160)
        self.where = _db_hint(where)
        self.prompt = prompt
        self.interrupt = interrupt
        self.run_id: str | None = None
        self.resumed = False
        self._start: RunStarted | None = None

    def show(self, event: Event) -> None:
        """Print one event."""
        started, self._start = self._start, None
        if isinstance(event, RunStarted):
            # Said with the next event: a run refused as it starts (its lease held by
            # another process) shows its error line alone.
            self._start = event
            return
        if isinstance(event, RunFinished) and event.status == "failed":
            self.printer.end_line()
            return  # the error's own line says it (cli.main)
        if started is not None:
            self._begin(started)
        if isinstance(event, PermissionRequest) and event.grant_id is not None:
            self.printer.show(event)  # approved by a remembered grant: nothing waits
            return
        if isinstance(event, (ClarificationRequest, PermissionRequest)):
            if not event.replayed:  # a replayed one was resolved in an earlier life
                self._waiting(event)
            return
        if isinstance(event, (ClarificationResolved, PermissionResolved)) and (
            event.status == "answered"
        ):
            self._answered(event)
            return
        self.printer.show(event)

    def _begin(self, event: RunStarted) -> None:
        self.printer.show(dataclasses.replace(event, prompt=self.prompt))
        how = "resumed from" if self.resumed else "kept in"
        self.printer.line(f"[dim]  run {_esc(event.run_id)}, {how} {_esc(self.where)}[/]")

    def _waiting(self, request: RequestEvent) -> None:
        printer = self.printer
        if isinstance(request, ClarificationRequest):
            printer.show_question(request)
            answer = "TEXT"
        else:
            printer.line(f"[bold yellow]?[/] {printer.summary(request)}")
            for name, value in request.arguments.items():
                shown = value if isinstance(value, str) else json.dumps(value)
                printer.line(f"  [dim]{_esc(name)}:[/] {_esc(printer.short(shown))}")
            answer = "yes|run|always|no"
        rid = request.request_id
        state = "left pending" if self.interrupt else "waiting for an answer"
        printer.line(
            f"  [yellow]{state} in the store as {_esc(rid)}[/]; answer with "
            "[dim](or --decline instead of the answer)[/]:"
        )
        # One line, never wrapped: a command to copy.
        command = f"    hpd-agent answer {_esc(rid)} {answer} --db {_esc(self.where)}"
        printer.console.print(command, soft_wrap=True, highlight=False)

    def _answered(self, event: ClarificationResolved | PermissionResolved) -> None:
        printer = self.printer
        if isinstance(event, PermissionResolved):
            what = f"approved ({event.scope or 'once'})" if event.approved else "denied"
        else:
            what = f"answered: {printer.short(json.dumps(event.answer))}"
        printer.line(f"[green]✓ {printer.who(event)}: {_esc(event.request_id)} {_esc(what)}[/]")
