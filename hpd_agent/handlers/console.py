"""``ConsoleHandler``: a run in the terminal, with rich.

It streams text as it arrives, labelled with the speaking agent's path, shows tool calls
and results in a row each, and asks the human the run's questions and permission requests,
every line wrapped to the terminal's width. Questions from parallel sub-agents are queued
and asked one at a time: when a question is done and two or more wait, a person at a
terminal picks which to answer next from a numbered list (Enter takes the deepest, then the
oldest); piped input and ``--yes`` take that order without asking. The line the human types
is read off the event loop (a daemon reader thread), so the other agents keep working and
streaming while a question waits.

Leaving: ``/exit`` (or another of ``exit_words``) typed at a question, or at the list, is
the human leaving: the run is cancelled, and nothing is answered or approved in their name.
End of input means two things. In a terminal, Ctrl-D at a question leaves the same way.
From a pipe or a file, it is the end of a script of answers: the questions after it get
their defaults (``default_answer``), as with ``--yes``, and the run goes on. Lines read from
a pipe are printed after their prompt (``echo``), as a terminal shows what is typed.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import anyio
import anyio.from_thread
import anyio.lowlevel
from rich.console import Console
from rich.text import Text

from .._values.vocabulary import (
    APPROVE_ALWAYS_WORDS,
    APPROVE_RUN_WORDS,
    APPROVE_WORDS,
    REJECT_WORDS,
)
from ..events import ClarificationRequest, Event, PermissionRequest, RequestEvent
from ..exceptions import RunCancelledError
from ..governance import os_user
from ..permissions import Approve, Decision, Deny
from ..questions import QUESTION_KINDS, Decline, answer_for, answer_schema_of, parse_typed
from ..text import printable
from ._base import BaseHandler
from ._printing import PERMISSION_WORDS, ConsolePrinter
from ._stream import esc as _esc

__all__ = ["EXIT_WORDS", "ConsoleHandler", "default_answer"]

EXIT_WORDS = frozenset({"/exit", "/quit"})
"""What a person types at a question to leave: the run is cancelled."""

InputFunction = Callable[[str], str]
"""Reads one line, like ``input(prompt)``; raises ``EOFError`` when input is closed."""


class _Reply(Exception):
    """Raised by a parser to ask the human again, with this message."""


@dataclass
class _Waiter:
    done: anyio.Event
    token: Any
    box: list[Any] = field(default_factory=list[Any])


class _LineReader:
    """One reader thread at a time, shared by every question.

    A question whose read is abandoned (it expired, or was answered elsewhere) leaves the
    thread blocked on input; the next question adopts that read instead of starting a
    second thread, so two threads never compete for one terminal. A line that arrives
    when nobody waits was meant for the abandoned question and is dropped.
    """

    def __init__(self, read: InputFunction) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._busy = False
        self._waiter: _Waiter | None = None
        self.closed = False

    async def readline(self, prompt: str, *, echo_prompt: Callable[[str], None]) -> str:
        if self.closed:
            raise EOFError
        waiter = _Waiter(done=anyio.Event(), token=anyio.lowlevel.current_token())
        with self._lock:
            self._waiter = waiter
            adopt = self._busy
            if not adopt:
                self._busy = True
                threading.Thread(
                    target=self._work, args=(prompt,), daemon=True, name="hpd-agent-input"
                ).start()
        if adopt:
            echo_prompt(prompt)
        try:
            await waiter.done.wait()
        finally:
            with self._lock:
                if self._waiter is waiter:
                    self._waiter = None
        kind, value = waiter.box[0]
        if kind == "eof":
            raise EOFError
        if kind == "error":
            raise value
        return value

    def _work(self, prompt: str) -> None:
        try:
            item: tuple[str, Any] = ("line", self._read(prompt))
        except EOFError:
            item = ("eof", None)
        except BaseException as e:  # surfaced in the asking task, not lost in this thread
            item = ("error", e)
        with self._lock:
            self._busy = False
            if item[0] == "eof":
                self.closed = True
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.box.append(item)
            # The loop may be gone (run cancelled, process exiting): nothing left to wake.
            with contextlib.suppress(Exception):
                anyio.from_thread.run_sync(waiter.done.set, token=waiter.token)


def default_answer(request: ClarificationRequest | PermissionRequest) -> Any:
    """The answer ``--yes`` gives: the first option, yes, approve once, or a neutral text; for
    a kind of your own, its answer schema's ``default``, else ``Decline()``."""
    if isinstance(request, PermissionRequest):
        return Approve(scope="once")
    kind = request.question_kind
    data = request.data or {}
    options = request.options
    if kind == "confirm":
        return True
    if kind == "action":
        return False  # nobody can visit a URL unattended
    if kind == "choice" and options:
        return [options[0]] if data.get("multiple") else options[0]
    if kind == "custom":
        return data.get("default", data.get("payload"))
    if kind not in QUESTION_KINDS:
        schema = answer_schema_of(request)
        return schema["default"] if "default" in schema else Decline()
    if options:
        return options[0]
    return "No answer: the user is not available. Use your best judgement."


class ConsoleHandler(BaseHandler):
    """Shows a run in the terminal and asks the human its questions.

    Args:
        console: Where to print (a ``rich.console.Console``); the terminal by default.
        input: Reads one line given a prompt, like the builtin ``input`` (the default);
            raising ``EOFError`` means input is closed (see ``end_of_input``).
        assume_yes: Never read: answer every request with ``default_answer`` (``--yes``).
        show_tool_results: Print a one-line summary of each tool result.
        max_chars: Longest argument or result summary printed.
        end_of_input: What closed input does to a question: ``"cancel"`` cancels the run
            (``on_request`` raises ``RunCancelledError``), so nothing is answered or
            approved for the human; ``"defaults"`` answers it and every later one with
            ``default_answer`` and the run goes on. None (the default): ``"cancel"`` when
            reading a terminal (the builtin ``input`` on a TTY: Ctrl-D), else ``"defaults"``
            (answers piped in, then the defaults).
        pick: When a question is done and two or more wait, list them and let the human
            pick which to answer next (Enter: the first listed, the deepest, then the
            oldest). False asks them in that order without asking. None (the default):
            pick when reading a terminal, so piped answers keep a fixed order.
        echo: Print each line read after its prompt, as a terminal shows what is typed.
            None (the default): when reading the process's stdin and it is not a terminal.
        exit_words: What typed at a question (or at the list) leaves: the run is
            cancelled, as Ctrl-D in a terminal does (compared ignoring case).
        answered_by: Who its answers are recorded as given by (channel ``"console"``);
            None (the default): the operating-system user.
    """

    channel = "console"

    def __init__(
        self,
        console: Console | None = None,
        *,
        input: InputFunction | None = None,
        assume_yes: bool = False,
        show_tool_results: bool = True,
        max_chars: int = 160,
        end_of_input: Literal["cancel", "defaults"] | None = None,
        pick: bool | None = None,
        echo: bool | None = None,
        exit_words: Iterable[str] = EXIT_WORDS,
        answered_by: str | None = None,
    ) -> None:
        self.answered_by = answered_by if answered_by is not None else os_user()
        self.console = console or Console(highlight=False)
        self.assume_yes = assume_yes
        terminal = input is None and _is_terminal()
        if end_of_input is None:
            end_of_input = "cancel" if terminal else "defaults"
        self.end_of_input: Literal["cancel", "defaults"] = end_of_input
        self.pick = terminal if pick is None else pick
        self.echo = (input is None and not terminal) if echo is None else echo
        self.exit_words = frozenset(word.casefold() for word in exit_words)
        self.left = False
        """True once the human left (an exit word, or Ctrl-D in a terminal): the run was
        cancelled."""
        self._printer = ConsolePrinter(
            self.console, show_tool_results=show_tool_results, max_chars=max_chars
        )
        self._reader = _LineReader(input or builtins.input)
        self._ask_lock = anyio.Lock()
        self._waiting: list[RequestEvent] = []  # in the order they came
        self._turn: RequestEvent | None = None  # the one being asked
        self._choosing = False
        self._changed = anyio.Event()

    async def on_event(self, event: Event) -> None:
        """Print one event: text as it streams, tool calls, outcomes."""
        self._printer.show(event)

    # -- whose turn ----------------------------------------------------------------------
    async def on_request(self, request: RequestEvent) -> Any:
        """Ask ``request`` when its turn comes: one at a time, in the order ``pick`` says."""
        self._waiting.append(request)
        self._wake()
        try:
            while self._turn is not request:
                if self.left:
                    raise RunCancelledError("the human left")
                if self._turn is None and not self._choosing and self._ready():
                    await self._choose()
                else:
                    await self._changed.wait()
            return await super().on_request(request)
        finally:
            self._waiting.remove(request)
            if self._turn is request:
                self._turn = None
            self._wake()

    @property
    def busy(self) -> bool:
        """Whether the human is being asked: a question, or which to answer next."""
        return self._turn is not None or self._choosing

    def _ready(self) -> bool:
        """Whether the next question may be asked now (a subclass may hold it back)."""
        return True

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _choose(self) -> None:
        """Give the turn to the deepest waiting request (the oldest of equals), or the one
        the human picks."""
        self._choosing = True
        try:
            waiting = sorted(self._waiting, key=lambda r: -r.depth)  # stable: oldest first
            chosen = waiting[0]
            if len(waiting) > 1 and self.pick and not self.assume_yes and not self._reader.closed:
                chosen = await self._pick(waiting)
            if chosen in self._waiting:
                self._turn = chosen
            else:
                self._printer.line("[yellow]That one ended meanwhile.[/]")
        finally:
            self._choosing = False
            self._wake()

    async def _pick(self, waiting: list[RequestEvent]) -> RequestEvent:
        printer = self._printer
        printer.line(f"[bold]{len(waiting)} questions wait: which first?[/]")
        for i, request in enumerate(waiting, 1):
            printer.line(f"  [bold]{i})[/] {printer.summary(request)}", hang=5)
        leave = " or ".join(sorted(self.exit_words))
        printer.line(
            f"  [dim]type a number, or press Enter for 1"
            f"{f' ({_esc(leave)} leaves)' if leave else ''}[/]"
        )
        while True:
            line = await self.prompt("Answer which? [1] ")
            if line is None:  # closed: the question says what that means
                return waiting[0]
            word = self._word(line)
            if not word:
                return waiting[0]
            if word.isdigit() and 1 <= int(word) <= len(waiting):
                return waiting[int(word) - 1]
            printer.line(f"[red]Type a number from 1 to {len(waiting)}, or press Enter for 1.[/]")

    def _word(self, line: str) -> str:
        """The line stripped; an exit word leaves."""
        word = line.strip()
        if word.casefold() in self.exit_words:
            self._leave(f"you left ({word})")
        return word

    def _leave(self, how: str) -> NoReturn:
        """The human left: say so once, and cancel the run."""
        if not self.left:
            self.left = True
            self._printer.line(
                f"[bold yellow]{_esc(how[:1].upper() + how[1:])}, so the run is cancelled; "
                "nothing is answered or approved for you.[/]"
            )
        raise RunCancelledError(f"the human left: {how}")

    # -- input ---------------------------------------------------------------------------
    async def prompt(self, text: str = "> ") -> str | None:
        """Read one line from the human off the event loop; None when input is closed.
        With ``echo``, the line is printed after the prompt."""
        self._printer.end_line()
        try:
            line = await self._reader.readline(text, echo_prompt=self._echo)
        except EOFError:
            return None
        if self.echo:
            shown = Text(printable(line))
            shown.expand_tabs(8)
            self._printer.fitted(shown, hang=2, start=len(text))
        return line

    def _echo(self, prompt: str) -> None:
        self.console.print(_esc(prompt), end="")

    async def _ask(
        self,
        request: ClarificationRequest | PermissionRequest,
        show: Callable[[], None],
        parse: Callable[[str], Any],
        follow_up: Callable[[Any], Awaitable[Any]] | None = None,
    ) -> Any:
        printer = self._printer
        async with self._ask_lock:
            if self.left:
                raise RunCancelledError("the human left")
            printer.asking = request.request_id
            try:
                printer.end_line()
                show()
                if self.assume_yes:
                    return self._auto(request)
                if self._reader.closed:
                    return self._closed(request, said=True)
                while True:
                    line = await self.prompt("> ")
                    if line is None:
                        return self._closed(request, said=False)
                    try:
                        answer = parse(self._word(line))
                    except _Reply as again:
                        printer.line(f"[red]{_esc(str(again))}[/]")
                        continue
                    # Still holding the lock: a follow-up belongs to the same question.
                    return answer if follow_up is None else await follow_up(answer)
            finally:
                printer.asking = None

    def _closed(self, request: ClarificationRequest | PermissionRequest, *, said: bool) -> Any:
        """Input is closed: cancel the run (a terminal), or answer with the default."""
        if self.end_of_input == "cancel":
            self._leave("input closed (Ctrl-D): you left")
        if not said:
            self._printer.line("[yellow]Input closed: answering with defaults from now on.[/]")
        return self._auto(request)

    def _auto(self, request: ClarificationRequest | PermissionRequest) -> Any:
        answer = default_answer(request)
        shown = "approve once" if isinstance(answer, Approve) else _show_value(answer)
        self._printer.line(f"[dim]  (answered automatically: {_esc(shown)})[/]")
        return answer

    async def on_clarification(self, request: ClarificationRequest) -> Any:
        """Ask the question in the terminal, any kind; re-ask until the answer fits."""
        return await self._ask(
            request,
            lambda: self._printer.show_question(request),
            lambda line: _typed(request, line),
        )

    async def on_permission(self, request: PermissionRequest) -> Decision:
        """Ask approve once / approve for the run / deny (with a reason) / always (a
        remembered grant: the store's, for a run with a store; else this process's)."""

        async def reason(decision: Decision) -> Decision:
            if isinstance(decision, Deny) and not decision.reason:
                text = await self.prompt("Reason (optional, sent to the agent): ")
                return Deny(reason=self._word(text or ""))
            return decision

        return await self._ask(
            request, lambda: self._printer.show_permission(request), _parse_permission, reason
        )


def _is_terminal() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # no stdin at all, or a closed one
        return False


def _show_value(value: Any) -> str:
    if isinstance(value, Decline):
        return "declined"
    return value if isinstance(value, str) else json.dumps(value)


def _typed(request: ClarificationRequest, text: str) -> Any:
    """The typed line as an answer (``parse_typed``), checked as ``respond`` will check it:
    what does not fit is asked again, with the reason."""
    try:
        answer = parse_typed(request, text)
        answer_for(request, answer)
    except (ValueError, TypeError) as e:
        raise _Reply(str(e)) from None
    return answer


def _parse_permission(text: str) -> Decision:
    word = text.casefold()
    if word == "1" or word in APPROVE_WORDS:
        return Approve(scope="once")
    if word == "2" or word in APPROVE_RUN_WORDS:
        return Approve(scope="run")
    if word == "4" or word in APPROVE_ALWAYS_WORDS:
        return Approve(scope="always")
    if word in ("3", "d") or word in REJECT_WORDS:
        return Deny()
    for prefix in ("3 ", "n ", "no ", "deny ", "deny:", "no:", "n:"):
        if word.startswith(prefix):
            return Deny(reason=text[len(prefix) :].strip())
    raise _Reply(PERMISSION_WORDS)
