"""``ConsoleHandler``: a run in the terminal, with rich.

It streams text as it arrives, labelled with the speaking agent's path, shows tool calls
and results in one line each, and asks the human the run's questions and permission
requests. Questions from parallel sub-agents are queued and asked one at a time; the line
the human types is read off the event loop (a daemon reader thread), so the other agents
keep working and streaming while a question waits.

End of input means two things. In a terminal, Ctrl-D at a question is the human leaving:
the run is cancelled, and nothing is answered or approved in their name. From a pipe or a
file, it is the end of a script of answers: the questions after it get their defaults
(``default_answer``), as with ``--yes``, and the run goes on.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel
from rich.console import Console
from rich.markup import escape

from .._values.vocabulary import APPROVE_RUN_WORDS, APPROVE_WORDS, NO_WORDS, REJECT_WORDS, YES_WORDS
from ..events import ClarificationRequest, PermissionRequest
from ..exceptions import RunCancelledError
from ..permissions import Approve, Decision, Deny
from ._base import BaseHandler
from ._printing import Printing
from ._stream import Calls, StreamWriter
from ._stream import esc as _esc

__all__ = ["ConsoleHandler", "default_answer"]

InputFunction = Callable[[str], str]
"""Reads one line, like ``input(prompt)``; raises ``EOFError`` when input is closed."""

_PREVIEW_LINES = 8
_YES = YES_WORDS | {"1"}
_NO = NO_WORDS | {"0"}
_PERMISSION_WORDS = (
    "type 1, y, yes or once · 2, run, always or all · 3, n, no or deny "
    "(a reason may follow: n: not here)"
)


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
    """The answer ``--yes`` gives: the first option, yes, approve once, or a neutral text."""
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
    if options:
        return options[0]
    return "No answer: the user is not available. Use your best judgement."


class ConsoleHandler(Printing, BaseHandler):
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
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        input: InputFunction | None = None,
        assume_yes: bool = False,
        show_tool_results: bool = True,
        max_chars: int = 160,
        end_of_input: Literal["cancel", "defaults"] | None = None,
    ) -> None:
        self.console = console or Console(highlight=False)
        self.assume_yes = assume_yes
        if end_of_input is None:
            end_of_input = "cancel" if input is None and _is_terminal() else "defaults"
        self.end_of_input: Literal["cancel", "defaults"] = end_of_input
        self.left = False
        """True once closed input cancelled the run (``end_of_input="cancel"``)."""
        self.show_tool_results = show_tool_results
        self.max_chars = max_chars
        self._reader = _LineReader(input or builtins.input)
        self._ask_lock = anyio.Lock()
        self._calls = Calls()
        self._out = StreamWriter(self.console, self._calls)
        self._asking: str | None = None
        self._open: set[str] = set()  # requests seen and not resolved yet

    # -- input ---------------------------------------------------------------------------
    async def prompt(self, text: str = "> ") -> str | None:
        """Read one line from the human off the event loop; None when input is closed."""
        self._end_line()
        try:
            return await self._reader.readline(text, echo_prompt=self._echo)
        except EOFError:
            return None

    def _echo(self, prompt: str) -> None:
        self.console.print(_esc(prompt), end="")

    async def _ask(
        self,
        request: ClarificationRequest | PermissionRequest,
        show: Callable[[], None],
        parse: Callable[[str], Any],
        follow_up: Callable[[Any], Awaitable[Any]] | None = None,
    ) -> Any:
        async with self._ask_lock:
            self._asking = request.request_id
            try:
                self._end_line()
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
                        answer = parse(line.strip())
                    except _Reply as again:
                        self._line(f"[red]{_esc(str(again))}[/]")
                        continue
                    # Still holding the lock: a follow-up belongs to the same question.
                    return answer if follow_up is None else await follow_up(answer)
            finally:
                self._asking = None

    def _closed(self, request: ClarificationRequest | PermissionRequest, *, said: bool) -> Any:
        """Input is closed: cancel the run (a terminal), or answer with the default."""
        if self.end_of_input == "cancel":
            if not self.left:
                self.left = True
                self._line(
                    "[bold yellow]Input closed (Ctrl-D): you left, so the run is cancelled; "
                    "nothing is answered or approved for you.[/]"
                )
            raise RunCancelledError("input closed: the human left")
        if not said:
            self._line("[yellow]Input closed: answering with defaults from now on.[/]")
        return self._auto(request)

    def _auto(self, request: ClarificationRequest | PermissionRequest) -> Any:
        answer = default_answer(request)
        shown = "approve once" if isinstance(answer, Approve) else _show_value(answer)
        self._line(f"[dim]  (answered automatically: {_esc(shown)})[/]")
        return answer

    async def on_clarification(self, request: ClarificationRequest) -> Any:
        """Ask the question in the terminal, by kind; re-ask until the answer fits."""
        kind = request.question_kind
        data = request.data or {}
        options = request.options or ()

        def show() -> None:
            self.console.print(
                f"[bold yellow]?[/] {self._who(request)} asks: [bold]{_esc(request.question)}[/]",
                soft_wrap=True,
            )
            if request.context:
                self.console.print(f"  [dim]{_esc(request.context)}[/]", soft_wrap=True)
            if kind == "input":
                self.console.print(
                    f"  [dim]value for[/] {_esc(str(data.get('argument', '?')))} "
                    f"[dim]of tool[/] {_esc(str(data.get('tool', '?')))}"
                )
            elif kind == "confirm":
                self.console.print("  [dim]answer y or n[/]")
            elif kind == "action":
                label = data.get("label") or "Open this link"
                self.console.print(
                    f"  {_esc(str(label))}: [link]{_esc(str(data.get('url', '')))}[/]"
                )
                self.console.print("  [dim]press Enter when done, or n to decline[/]")
            elif kind == "custom":
                self.console.print(f"  [dim]{_esc(str(data.get('name', 'custom')))}[/]")
                if data.get("payload"):
                    self.console.print(f"  {_esc(json.dumps(data['payload']))}")
                self.console.print("  [dim]answer with JSON[/]")
            # Numbered from 1 on screen (people count from 1); the API's indices are 0-based,
            # so the hint says which one the typed number is.
            for i, option in enumerate(options, 1):
                self.console.print(f"  [bold]{i})[/] {_esc(option)}")
            numbered = _numbered(len(options))
            if kind == "choice" and data.get("multiple"):
                self.console.print(f"  [dim]one or more, separated by commas: {numbered}[/]")
            elif options:
                self.console.print(f"  [dim]type {numbered}[/]")

        return await self._ask(request, show, lambda line: _parse(request, line))

    async def on_permission(self, request: PermissionRequest) -> Decision:
        """Ask approve once / approve for the run / deny (with a reason)."""

        def show() -> None:
            self.console.print(
                f"[bold yellow]?[/] {self._who(request)} wants to run "
                f"[bold]{_esc(request.tool_name)}[/]"
            )
            for name, value in request.arguments.items():
                if isinstance(value, str) and "\n" in value.strip():
                    # A file body or a script: show its first lines as they are.
                    lines = value.splitlines()
                    self.console.print(f"  [dim]{_esc(name)}: ({len(lines)} lines)[/]")
                    for text_line in lines[:_PREVIEW_LINES]:
                        self.console.print(f"  [dim]│[/] {_esc(text_line)}", soft_wrap=True)
                    if len(lines) > _PREVIEW_LINES:
                        self.console.print("  [dim]│ …[/]")
                    continue
                shown = value if isinstance(value, str) else json.dumps(value)
                self.console.print(f"  [dim]{_esc(name)}:[/] {_esc(self._short(shown))}")
            self.console.print(
                "  [bold]1)[/] approve once  [bold]2)[/] approve for the run  [bold]3)[/] deny"
            )
            self.console.print(f"  [dim]{escape(_PERMISSION_WORDS)}[/]")

        async def reason(decision: Decision) -> Decision:
            if isinstance(decision, Deny) and not decision.reason:
                text = await self.prompt("Reason (optional, sent to the agent): ")
                return Deny(reason=(text or "").strip())
            return decision

        return await self._ask(request, show, _parse_permission, reason)


def _is_terminal() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # no stdin at all, or a closed one
        return False


def _numbered(count: int) -> str:
    return f"a number from 1 to {count} (as listed: 1 is the first option) or the option's text"


def _show_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _pick(options: tuple[str, ...], text: str) -> str:
    """An option by its number (1-based, as shown) or by its text (any case)."""
    if text.isdigit():
        n = int(text)
        if 1 <= n <= len(options):
            return options[n - 1]
        raise _Reply(f"Pick a number from 1 to {len(options)}.")
    folded = text.casefold()
    for option in options:
        if option.strip().casefold() == folded:
            return option
    raise _Reply(f"Answer with a number from 1 to {len(options)} or one of the options.")


def _parse(request: ClarificationRequest, text: str) -> Any:
    kind = request.question_kind
    data = request.data or {}
    options = request.options or ()
    if kind == "confirm":
        word = text.casefold()
        if word in _YES:
            return True
        if word in _NO:
            return False
        raise _Reply("Answer y or n.")
    if kind == "action":
        word = text.casefold()
        if word in ("", *_YES, "done"):
            return True
        if word in _NO:
            return False
        raise _Reply("Press Enter when done, or type n to decline.")
    if kind == "custom":
        try:
            return json.loads(text)
        except ValueError:
            schema: Any = data.get("schema") or {}
            if isinstance(schema, dict) and schema.get("type") == "string":  # pyright: ignore[reportUnknownMemberType]
                return text
            raise _Reply("That is not valid JSON; try again.") from None
    if kind == "choice" and options:
        if data.get("multiple"):
            parts = [p.strip() for p in text.split(",") if p.strip()]
            if not parts:
                raise _Reply("Pick at least one option.")
            return [_pick(options, p) for p in parts]
        return _pick(options, text)
    if options:
        return _pick(options, text)
    if not text:
        raise _Reply("Please type an answer.")
    return text


def _parse_permission(text: str) -> Decision:
    word = text.casefold()
    if word == "1" or word in APPROVE_WORDS:
        return Approve(scope="once")
    if word == "2" or word in APPROVE_RUN_WORDS:
        return Approve(scope="run")
    if word in ("3", "d") or word in REJECT_WORDS:
        return Deny()
    for prefix in ("3 ", "n ", "no ", "deny ", "deny:", "no:", "n:"):
        if word.startswith(prefix):
            return Deny(reason=text[len(prefix) :].strip())
    raise _Reply(_PERMISSION_WORDS)
