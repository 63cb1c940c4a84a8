"""Streamed text on the terminal for ``ConsoleHandler``: one block per agent call.

Text is kept apart by ``invocation_id`` (the agent call that produced it), not by agent
path: two parallel calls of one sub-agent share a path, and their words must never land in
one block. Each call's block starts with its label: the agent path, plus the call's number
and query when another call of the same agent runs at the same time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from ..events import PATH_SEPARATOR, format_path
from ..text import printable

__all__ = ["Calls", "StreamWriter", "esc", "path_label"]

_PALETTE = ("cyan", "magenta", "green", "blue", "yellow", "bright_cyan", "bright_magenta")
_INDENT = 2
_TOKENS = re.compile(r"\n|[^\S\n]+|\S+")
_QUERY_CHARS = 24


def esc(text: str) -> str:
    """Text from a model, tool or store, safe for rich markup and for the terminal."""
    return escape(printable(text))


def path_label(path: tuple[str, ...]) -> str:
    """An agent path in colour, root first."""
    parts = [
        f"[bold {_PALETTE[sum(map(ord, name)) % len(_PALETTE)]}]{esc(name)}[/]" for name in path
    ]
    return PATH_SEPARATOR.join(parts)


@dataclass(slots=True)
class _Call:
    path: tuple[str, ...]
    parent: str | None
    number: int
    query: str
    markup: str = ""
    width: int = 0  # printed length of the label
    live: bool = True


class Calls:
    """Every agent call seen, by ``invocation_id``: its parent and how to label it."""

    def __init__(self) -> None:
        self._calls: dict[str, _Call] = {}
        self._counts: dict[tuple[str, ...], int] = {}

    def started(self, key: str, path: tuple[str, ...], parent: str | None, query: str) -> list[str]:
        """Record a call; returns the calls whose label changed (it runs beside another
        call of the same agent: from now on both show their number and query)."""
        number = self._counts.get(path, 0) + 1
        self._counts[path] = number
        call = _Call(path, parent, number, " ".join(query.split()))
        self._calls[key] = call
        self._relabel(call, numbered=False)
        twins = [k for k, c in self._calls.items() if c.live and c.path == path]
        if len(twins) < 2:
            return []
        for twin in twins:
            self._relabel(self._calls[twin], numbered=True)
        return twins

    def finished(self, key: str) -> None:
        call = self._calls.get(key)
        if call is not None:
            call.live = False

    def label(self, key: str, path: tuple[str, ...]) -> tuple[str, int]:
        """The call's label in markup and its printed length."""
        call = self._calls.get(key)
        if call is None:  # a call never announced (an event built by hand): its path
            call = self._calls[key] = _Call(path, None, 0, "", live=False)
            self._relabel(call, numbered=False)
        return call.markup, call.width

    def within(self, key: str, ancestor: str) -> bool:
        """Whether call ``key`` is ``ancestor`` or was made (at any depth) under it."""
        seen: str | None = key
        while seen is not None:
            if seen == ancestor:
                return True
            call = self._calls.get(seen)
            seen = call.parent if call is not None else None
        return False

    @staticmethod
    def _relabel(call: _Call, *, numbered: bool) -> None:
        call.markup = path_label(call.path)
        call.width = len(format_path(call.path))
        if not numbered:
            return
        query = call.query
        if len(query) > _QUERY_CHARS:
            query = query[: _QUERY_CHARS - 1] + "…"
        suffix = f" #{call.number}" + (f" ({query})" if query else "")
        call.markup += f"[dim]{esc(suffix)}[/]"
        call.width += len(suffix)


class StreamWriter:
    """Streamed text on the terminal, broken into lines between words, one call at a time."""

    def __init__(self, console: Console, calls: Calls) -> None:
        self.console = console
        self.calls = calls
        self.speaker: str | None = None
        self.midline = False
        self.column = 0  # where the cursor is on the current line of streamed text
        self.space = ""  # whitespace streamed but not written yet
        self.partial = ""  # the last word streamed, until we know where it ends
        self.floor: str | None = None  # the call streaming live
        self.held: dict[str, tuple[tuple[str, ...], str]] = {}  # the others' text, held back

    def end_line(self) -> None:
        if self.partial:
            self.wrapped("", final=True)
        if self.midline:
            self.console.out("")
            self.midline = False
        self.column = 0
        self.space = ""
        self.speaker = None

    def header(self, key: str, path: tuple[str, ...]) -> None:
        markup, width = self.calls.label(key, path)
        self.console.print(f"{markup}: ", end="")
        self.column = width + 2
        self.midline = True

    def wrapped(self, text: str, *, final: bool = False) -> None:
        """Write streamed text, breaking lines between words.

        Pieces arrive mid-word, so the last word of a piece is held until what follows shows
        where it ends (``final`` writes it out).
        """
        width = self.console.width
        out: list[str] = []
        tokens = _TOKENS.findall(self.partial + text)
        self.partial = ""
        if tokens and not final and not tokens[-1].isspace():
            self.partial = tokens.pop()
        for token in tokens:
            if token == "\n":
                out.append("\n")
                self.column = 0
                self.space = ""
            elif token.isspace():
                # Held until the next word: at a line break it is dropped, not left trailing.
                if self.column > 0:
                    self.space += token
            else:
                if self.column + len(self.space) + len(token) > width and self.column > _INDENT:
                    out.append("\n" + " " * _INDENT)
                    self.column = _INDENT
                else:
                    out.append(self.space)
                    self.column += len(self.space)
                self.space = ""
                out.append(token)
                self.column += len(token)
        self.console.out("".join(out), end="", highlight=False)
        self.midline = self.column > 0 or bool(self.partial)

    def text(self, key: str, path: tuple[str, ...], text: str) -> None:
        # One call holds the floor and streams live; text of parallel calls is held back
        # until the holder pauses (its next non-text event), so lines never interleave
        # word by word.
        if self.floor is not None and self.floor != key:
            held = self.held.get(key)
            self.held[key] = (path, (held[1] if held else "") + text)
            return
        self.floor = key
        if key != self.speaker:
            self.end_line()
            self.header(key, path)
            self.speaker = key
        self.wrapped(text)
        if not self.midline:
            self.speaker = None

    def settle(self, key: str, *, ending: bool) -> None:
        """Before a call's non-text event: show its held text; free the floor if it had it."""
        if key in self.held:
            self.flush(key)
        floor = self.floor
        # The holder's own events free the floor; so does the end of a call above it.
        if floor is not None and (floor == key or (ending and self.calls.within(floor, key))):
            self.floor = None
            self.end_line()
            for held in list(self.held):
                self.flush(held)

    def flush(self, key: str) -> None:
        path, text = self.held.pop(key)
        self.end_line()
        self.header(key, path)
        self.wrapped(text.rstrip("\n"))
        self.end_line()
