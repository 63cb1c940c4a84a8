"""``ConsolePrinter``: each event of a run, and each question, as the terminal shows them.

``ConsoleHandler`` holds one: ``show`` streams text as it arrives (through ``StreamWriter``),
shows tool calls and results in a row each (a multi-line string argument folded under its
row: its first lines, then how many more), a sub-agent's failure, requests queued behind the
current question and how each request ended, and the run's outcome; ``show_question`` and
``show_permission`` draw a request, any kind from its label and answer schema; ``line``,
``who``, ``short`` and ``summary`` are the helpers the asking side prints with too.

Every line fits the console's width (rich's: the terminal's, or ``COLUMNS``; the CLI gives a
console writing to a pipe or a file no width limit, so a message stays on one line there): ``line`` wraps between words, continuation lines indented under
the first, and a code preview's lines are cut with "…". Reading the human's answers stays in
``hpd_agent/handlers/console.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from rich.cells import cell_len, get_character_cell_size
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..events import (
    AgentFinished,
    AgentStarted,
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    PermissionResolved,
    RequestEvent,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    format_path,
)
from ..questions import QUESTION_KINDS, answer_prompt, answer_schema_of
from ..text import printable
from ._stream import Calls, StreamWriter, path_label
from ._stream import esc as _esc

__all__ = ["PERMISSION_WORDS", "ConsolePrinter", "crop", "fit"]

_PREVIEW_LINES = 8  # of a permission request's multi-line argument: what is approved
_ROW_LINES = 3  # of a tool call's multi-line argument, under its row: a glimpse
_WORD = re.compile(r"\S+")
PERMISSION_WORDS = (
    "type 1, y, yes or once · 2, run or all · 3, n, no or deny "
    "(a reason may follow: n: not here) · 4 or always"
)
"""What a person types to decide a permission request."""


class ConsolePrinter:
    """How a run looks in the terminal: its events and its requests.

    Args:
        console: Where to print.
        show_tool_results: Whether each tool result gets a line (an error always does).
        max_chars: Longest argument or result summary printed.

    Attributes:
        asking: The request being asked now, if any (set by the handler while it reads).
        open: The requests seen and not resolved yet.
    """

    def __init__(self, console: Console, *, show_tool_results: bool, max_chars: int) -> None:
        self.console = console
        self.show_tool_results = show_tool_results
        self.max_chars = max_chars
        self.calls = Calls()
        self.out = StreamWriter(console, self.calls)
        self.asking: str | None = None
        self.open: set[str] = set()

    def end_line(self) -> None:
        """End the line being streamed, if any."""
        self.out.end_line()

    def label(self, path: tuple[str, ...]) -> str:
        """An agent path in colour."""
        return path_label(path)

    def who(self, event: Event) -> str:
        """Who produced ``event``: its agent path, plus the call's number and query when
        another call of the same agent runs beside it."""
        key = event.invocation_id or format_path(event.agent_path)
        return self.calls.label(key, event.agent_path)[0]

    def line(self, markup: str, *, hang: int | None = None) -> None:
        """Print markup after whatever is being streamed, wrapped to the console's width
        between words; continuation lines are indented ``hang`` columns (default: the
        line's own indentation plus two). A newline in it starts an indented line too."""
        self.end_line()
        text = Text.from_markup(markup)
        text.expand_tabs(8)
        if hang is None:
            plain = text.plain
            hang = len(plain) - len(plain.lstrip(" ")) + 2
        self.fitted(text, hang=hang)

    def fitted(self, text: Text, *, hang: int, start: int = 0) -> None:
        """Print ``text`` wrapped to the width (see ``fit``), its first line starting at
        column ``start`` (something is already printed before it)."""
        width = self.console.width
        for i, part in enumerate(text.split("\n", allow_blank=True)):
            first = start if i == 0 else hang
            for j, piece in enumerate(fit(part, width, hang=hang, start=first)):
                if i > 0 or j > 0:
                    piece = Text(" " * min(hang, width // 2)) + piece
                self.console.print(piece, highlight=False, soft_wrap=True)

    def short(self, text: str) -> str:
        """``text`` on one line, at most ``max_chars`` long."""
        flat = " ".join(text.split())
        return flat if len(flat) <= self.max_chars else flat[: self.max_chars - 1] + "…"

    def show(self, event: Event) -> None:
        """Print one event: text as it streams, tool calls, outcomes."""
        # Text and state are kept by agent call: parallel calls of one agent share a path.
        key = event.invocation_id or format_path(event.agent_path)
        if isinstance(event, TextDelta):
            # Newlines and tabs stay (layout); escape sequences and other controls show.
            self.out.text(key, event.agent_path, printable(event.text))
            return
        if isinstance(event, AgentStarted):
            self.calls.started(key, event.agent_path, event.parent_invocation_id, event.input)
        self.out.settle(key, ending=isinstance(event, (AgentFinished, RunFinished)))
        if isinstance(event, AgentFinished):
            self.calls.finished(key)
        if isinstance(event, RunStarted):
            self.line(f"[dim]▶ {_esc(event.agent_name)}: {_esc(self.short(event.prompt))}[/]")
        elif isinstance(event, ToolCallStarted):
            inline, folded = _arguments(event)
            self.line(
                f"  {self.who(event)} [dim]→[/] [bold]{_esc(event.tool_name)}[/]"
                f"[dim]({_esc(self.short(inline))})[/]"
            )
            for name, value in folded:
                self.preview(name, value, indent=4, keep=_ROW_LINES)
        elif isinstance(event, ToolCallFinished):
            if self.show_tool_results or event.is_error:
                style = "red" if event.is_error else "dim"
                self.line(
                    f"  {self.who(event)} [dim]←[/] {_esc(event.tool_name)}: "
                    f"[{style}]{_esc(self.short(event.result))}[/]"
                )
        elif isinstance(event, AgentFinished):
            # The root agent's failure is the run's: "Run failed" says it, once.
            if event.status == "failed" and event.depth > 0:
                self.line(f"[red]✗ {self.who(event)} failed: {_esc(event.error or '')}[/]")
        elif isinstance(event, (ClarificationResolved, PermissionResolved)):
            self._resolved(event)
        elif isinstance(event, PermissionRequest) and event.grant_id is not None:
            self.line(
                f"[green]✓ {self.who(event)} runs {_esc(event.tool_name)}: approved by grant "
                f"{_esc(event.grant_id)}[/]"
            )
        elif isinstance(event, (ClarificationRequest, PermissionRequest)):
            self.open.add(event.request_id)
            if len(self.open) > 1:
                self.line(
                    f"[yellow]… {self.who(event)} also needs you: "
                    "queued until the current question is answered[/]"
                )
        elif isinstance(event, RunFinished):
            self.end_line()
            if event.status == "failed":
                self.line(f"[bold red]Run failed:[/] {_esc(event.error or '')}")
            elif event.status == "cancelled":
                self.line("[bold yellow]Run cancelled.[/]")

    def _resolved(self, event: ClarificationResolved | PermissionResolved) -> None:
        self.open.discard(event.request_id)
        if event.status == "answered":
            if (
                isinstance(event, PermissionResolved)
                and event.request_id != self.asking
                and event.scope in ("run", "always")
            ):
                how = "for the run" if event.scope == "run" else "always (a remembered grant)"
                self.line(f"[green]✓ {_esc(event.tool_name)} approved {how} ({self.who(event)})[/]")
            return
        what = "permission request" if isinstance(event, PermissionResolved) else "question"
        if event.status == "declined":  # from elsewhere (a UI, a store), or typed here
            self.line(f"[yellow]! {self.who(event)}'s {what} was declined[/]")
            return
        self.line(f"[yellow]! {self.who(event)}'s {what} ended: {event.status}[/]")

    # -- requests ------------------------------------------------------------------------
    def show_question(self, request: ClarificationRequest) -> None:
        """Print a question: who asks what, its details and options (numbered from 1), then
        what it wants and what to type, in the words the web page and ``hpd-agent pending``
        use (``answer_prompt``)."""
        print_ = self.line
        print_(f"[bold yellow]?[/] {self.who(request)} asks: [bold]{_esc(request.question)}[/]")
        if request.context:
            print_(f"  [dim]{_esc(request.context)}[/]")
        kind = request.question_kind
        data = request.data or {}
        options: tuple[object, ...] = request.options or ()
        if kind == "input":
            print_(
                f"  [dim]value for[/] {_esc(str(data.get('argument', '?')))} "
                f"[dim]of tool[/] {_esc(str(data.get('tool', '?')))}"
            )
        elif kind == "action":
            label = data.get("label") or "Open this link"
            print_(f"  {_esc(str(label))}: [link]{_esc(str(data.get('url', '')))}[/]")
        elif kind == "custom":
            print_(f"  [dim]{_esc(str(data.get('name', 'custom')))}[/]")
            if data.get("payload"):
                print_(f"  {_esc(json.dumps(data['payload']))}")
        elif kind not in QUESTION_KINDS:
            enum = answer_schema_of(request).get("enum")
            options = tuple(cast(list[object], enum)) if isinstance(enum, list) else ()
        # Numbered from 1 on screen (people count from 1); the API's indices are 0-based,
        # so the hint says which one the typed number is.
        for i, option in enumerate(options, 1):
            print_(
                f"  [bold]{i})[/] {_esc(option if isinstance(option, str) else json.dumps(option))}"
            )
        prompt = answer_prompt(request)
        self._prompt(prompt.label, prompt.hint)

    def show_permission(self, request: PermissionRequest) -> None:
        """Print a permission request: the tool, its arguments, the three choices."""
        print_ = self.line
        print_(
            f"[bold yellow]?[/] {self.who(request)} wants to run [bold]{_esc(request.tool_name)}[/]"
        )
        for name, value in request.arguments.items():
            if _multiline(value):
                # A file body or a script: its first lines as they are.
                self.preview(name, value, indent=2, keep=_PREVIEW_LINES)
                continue
            shown = value if isinstance(value, str) else json.dumps(value)
            print_(f"  [dim]{_esc(name)}:[/] {_esc(self.short(shown))}")
        print_(
            "  [bold]1)[/] approve once  [bold]2)[/] approve for the run  [bold]3)[/] deny  "
            "[bold]4)[/] always (remembered)"
        )
        # The label every surface uses; the console also reads the numbers it lists.
        self._prompt(answer_prompt(request).label, PERMISSION_WORDS)

    def _prompt(self, label: str, hint: str) -> None:
        self.line(f"  [bold]{_esc(label)}[/][dim]: {_esc(hint)}[/]")

    def preview(self, name: str, value: str, *, indent: int, keep: int) -> None:
        """A multi-line string argument folded: its first ``keep`` lines as they are (each
        cut to the width), then how many more there are."""
        lines = value.splitlines()
        pad = " " * indent
        self.line(f"{pad}[dim]{_esc(name)}: ({len(lines)} lines)[/]")
        room = max(self.console.width - indent - 2, 1)
        for text_line in lines[:keep]:
            shown = crop(printable(text_line).expandtabs(4), room)
            self.console.print(f"{pad}[dim]│[/] {escape(shown)}", highlight=False, soft_wrap=True)
        if len(lines) > keep:
            self.line(f"{pad}[dim]… ({len(lines) - keep} more lines)[/]")

    def summary(self, request: RequestEvent) -> str:
        """A request in one phrase of markup: who asks what, or wants to run which tool."""
        if isinstance(request, PermissionRequest):
            return f"{self.who(request)} wants to run [bold]{_esc(request.tool_name)}[/]"
        return f"{self.who(request)} asks: {_esc(self.short(request.question))}"


def _multiline(value: Any) -> bool:
    return isinstance(value, str) and "\n" in value.strip()


def _arguments(event: ToolCallStarted) -> tuple[str, list[tuple[str, str]]]:
    """A call's arguments in its row, and the multi-line strings folded under it."""
    if event.raw_arguments is not None:
        return event.raw_arguments, []  # did not parse: shown as the model sent it
    inline: list[str] = []
    folded: list[tuple[str, str]] = []
    for name, value in event.arguments.items():
        if _multiline(value):
            inline.append(f"{name}=…")
            folded.append((name, value))
        else:
            inline.append(f"{name}={value!r}")
    return ", ".join(inline), folded


def _fitting(text: str, room: int) -> int:
    """How many of ``text``'s first characters fit in ``room`` cells (at least one)."""
    used = 0
    for i, char in enumerate(text):
        used += get_character_cell_size(char)
        if used > room:
            return max(i, 1)
    return len(text)


def crop(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells, with "…" where it was cut."""
    if cell_len(text) <= width:
        return text
    return text[: _fitting(text, width - 1)] + "…"


def fit(text: Text, width: int, *, hang: int, start: int = 0) -> list[Text]:
    """One line of ``text`` (no newline in it) broken into lines of at most ``width`` cells.

    Lines break between words (the spaces at a break are dropped); a word wider than a line
    is cut. The first line starts at column ``start``, the others at ``hang`` (the caller
    indents them); its leading spaces stay.
    """
    hang = min(hang, width // 2)
    plain = text.plain
    lines: list[Text] = []
    begin = end = 0  # the current line is plain[begin:end]
    column = start
    for match in _WORD.finditer(plain):
        at, stop = match.span()
        gap = cell_len(plain[end:at])
        size = cell_len(plain[at:stop])
        # Break before the word if the line holds one already, or if a line of its own
        # fits it (the first line may start late, after a prompt).
        if column + gap + size > width and (end > begin or hang + size <= width < column + size):
            lines.append(text[begin:end])
            begin = end = at
            column, gap = hang, 0
        while column + gap + size > width:  # a word wider than a line: cut it
            room = width - column - gap
            cut = at + (_fitting(plain[at:stop], room) if room > 0 else 0)
            lines.append(text[begin:cut])
            begin = end = at = cut
            column, gap, size = hang, 0, cell_len(plain[at:stop])
        column += gap + size
        end = stop
    lines.append(text[begin:end])
    return lines
