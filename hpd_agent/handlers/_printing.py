"""The printing side of ``ConsoleHandler``: each event of a run as the terminal shows it.

``Printing`` is a mixin of ``ConsoleHandler``: ``on_event`` streams text as it arrives
(through ``StreamWriter``), shows tool calls and results in one line each, a sub-agent's
failure, requests queued behind the current question and how each request ended, and the
run's outcome; ``_line``, ``_who`` and ``_short`` are the helpers the asking side prints
with too. Asking the human (questions, permissions, closed input) stays in
``hpd_agent/handlers/console.py``. A mixin rather than an object the handler holds: an
event costs no extra call.
"""

from __future__ import annotations

from rich.console import Console

from ..events import (
    AgentFinished,
    AgentStarted,
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    PermissionResolved,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    format_path,
)
from ..text import printable
from ._stream import Calls, StreamWriter, path_label
from ._stream import esc as _esc

__all__ = ["Printing"]


class Printing:
    """How ``ConsoleHandler`` prints a run's events: its ``on_event`` and the line helpers.

    Attributes:
        console: Where to print.
        show_tool_results: Whether each tool result gets a line (an error always does).
        max_chars: Longest argument or result summary printed.
    """

    # Set by ConsoleHandler.__init__; declared here so that the methods below are typed.
    console: Console
    show_tool_results: bool
    max_chars: int
    _calls: Calls
    _out: StreamWriter
    _asking: str | None  # the request being asked now, if any
    _open: set[str]  # requests seen and not resolved yet

    def _end_line(self) -> None:
        self._out.end_line()

    def _label(self, path: tuple[str, ...]) -> str:
        return path_label(path)

    def _who(self, event: Event) -> str:
        """Who produced ``event``: its agent path, plus the call's number and query when
        another call of the same agent runs beside it."""
        key = event.invocation_id or format_path(event.agent_path)
        return self._calls.label(key, event.agent_path)[0]

    def _line(self, markup: str) -> None:
        self._end_line()
        self.console.print(markup, highlight=False, soft_wrap=True)

    def _short(self, text: str) -> str:
        flat = " ".join(text.split())
        return flat if len(flat) <= self.max_chars else flat[: self.max_chars - 1] + "…"

    async def on_event(self, event: Event) -> None:
        """Print one event: text as it streams, tool calls, outcomes."""
        # Text and state are kept by agent call: parallel calls of one agent share a path.
        key = event.invocation_id or format_path(event.agent_path)
        if isinstance(event, TextDelta):
            # Newlines and tabs stay (layout); escape sequences and other controls show.
            self._out.text(key, event.agent_path, printable(event.text))
            return
        if isinstance(event, AgentStarted):
            self._calls.started(key, event.agent_path, event.parent_invocation_id, event.input)
        self._out.settle(key, ending=isinstance(event, (AgentFinished, RunFinished)))
        if isinstance(event, AgentFinished):
            self._calls.finished(key)
        if isinstance(event, RunStarted):
            self._line(f"[dim]▶ {_esc(event.agent_name)}: {_esc(self._short(event.prompt))}[/]")
        elif isinstance(event, ToolCallStarted):
            self._line(
                f"  {self._who(event)} [dim]→[/] [bold]{_esc(event.tool_name)}[/]"
                f"[dim]({_esc(self._short(_arguments(event)))})[/]"
            )
        elif isinstance(event, ToolCallFinished):
            if self.show_tool_results or event.is_error:
                style = "red" if event.is_error else "dim"
                self._line(
                    f"  {self._who(event)} [dim]←[/] {_esc(event.tool_name)}: "
                    f"[{style}]{_esc(self._short(event.result))}[/]"
                )
        elif isinstance(event, AgentFinished):
            # The root agent's failure is the run's: "Run failed" says it, once.
            if event.status == "failed" and event.depth > 0:
                self._line(f"[red]✗ {self._who(event)} failed: {_esc(event.error or '')}[/]")
        elif isinstance(event, (ClarificationResolved, PermissionResolved)):
            self._resolved(event)
        elif isinstance(event, (ClarificationRequest, PermissionRequest)):
            self._open.add(event.request_id)
            if len(self._open) > 1:
                self._line(
                    f"[yellow]… {self._who(event)} also needs you: "
                    "queued until the current question is answered[/]"
                )
        elif isinstance(event, RunFinished):
            self._end_line()
            if event.status == "failed":
                self._line(f"[bold red]Run failed:[/] {_esc(event.error or '')}")
            elif event.status == "cancelled":
                self._line("[bold yellow]Run cancelled.[/]")

    def _resolved(self, event: ClarificationResolved | PermissionResolved) -> None:
        self._open.discard(event.request_id)
        if event.status == "answered":
            if (
                isinstance(event, PermissionResolved)
                and event.request_id != self._asking
                and event.scope == "run"
            ):
                self._line(
                    f"[green]✓ {_esc(event.tool_name)} approved for the run ({self._who(event)})[/]"
                )
            return
        what = "permission request" if isinstance(event, PermissionResolved) else "question"
        if event.status == "declined":  # from elsewhere (a UI, a store), or typed here
            self._line(f"[yellow]! {self._who(event)}'s {what} was declined[/]")
            return
        self._line(f"[yellow]! {self._who(event)}'s {what} ended: {event.status}[/]")


def _arguments(event: ToolCallStarted) -> str:
    if event.raw_arguments is not None:
        return event.raw_arguments  # did not parse: shown as the model sent it
    return ", ".join(f"{k}={v!r}" for k, v in event.arguments.items())
