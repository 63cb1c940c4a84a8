"""Text from outside (models, tools, stores) made safe to keep and to show.

Two helpers, used wherever such text becomes part of an event, a journal entry, the model's
context or the terminal:

- ``bounded`` caps a text's length (an exception message of 5 MB becomes its head and a
  note saying how much was cut), so one failing tool cannot bloat a journal row, an event
  stream or the next model request.
- ``mend`` makes text encodable as UTF-8: a lone surrogate (half of a UTF-16 pair, which a
  model can stream) becomes U+FFFD, and two halves that belong together become the one
  character they encode. A model's text is mended as it arrives (``TextMender``), so the
  stream, the result, the journal and a replay all show the same text, and no store write
  can fail on it.
- ``printable`` neutralises what a terminal would obey instead of show: escape sequences
  (ESC, CSI, OSC), BEL, backspace, carriage-return overwrites, other C0/C1 controls and the
  bidirectional overrides that reorder what is shown. Each becomes a visible ``\\xNN`` or
  ``\\uNNNN``, so nothing is hidden and nothing is lost.
- ``permission_question`` says a permission request in one line a person reads.
- ``shown`` quotes a value someone sent (an answer, a key) in the message refusing it, at
  most ``MAX_SHOWN_CHARS`` of it: a refused 2 MB answer is not sent back whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_SHOWN_CHARS",
    "TextMender",
    "bounded",
    "error_text",
    "mend",
    "permission_question",
    "printable",
    "shown",
]

MAX_ERROR_CHARS = 4_000
"""Longest error text (tool failure, agent or run error) kept in events, journals and the
model's context; longer texts are cut with a note (``bounded``)."""

MAX_SHOWN_CHARS = 200
"""Longest piece of a value quoted in the message refusing it (an answer can be 5 MB)."""

# C0 controls but tab and newline, DEL, C1 controls (0x9b is a one-byte CSI), and the
# Unicode bidi embeddings, overrides and isolates.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# Lone surrogates cannot be encoded as UTF-8: a store or a terminal would fail on them.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with terminal controls made visible, safe to print.

    Args:
        text: Text from a model, a tool or a store.
        one_line: Also make newlines and tabs visible, for output read line by line (a
            question in ``hpd-agent pending`` cannot fake a second row).

    Returns:
        The same text where every control character, escape sequence introducer, lone
        surrogate and bidi override is spelled out (``\\x1b``, ``\\u202e``); carriage
        returns are dropped (kept visible with ``one_line``); plain text is returned
        unchanged.
    """
    pattern = _UNSAFE_LINE if one_line else _UNSAFE
    if not one_line and "\r" in text:
        # CR's one honest use is a CRLF line end; alone it overwrites the line shown.
        text = text.replace("\r", "")
    if pattern.search(text) is not None:
        text = pattern.sub(_visible, text)
    if _SURROGATE.search(text) is not None:
        text = _SURROGATE.sub(_visible, text)
    return text


def mend(text: str) -> str:
    """``text`` made encodable as UTF-8: surrogate halves that form a pair are joined into
    their character, any other lone surrogate becomes U+FFFD; other text is unchanged."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class TextMender:
    """Mends streamed text piece by piece (see ``mend``), passing each piece to ``sink``.

    A piece that ends with the first half of a pair is held back until the next piece says
    whether the second half follows, so the pieces passed on join to ``mend`` of the whole.
    Call ``close`` when the stream ends.
    """

    __slots__ = ("_carry", "_sink")

    def __init__(self, sink: Callable[[str], None]) -> None:
        self._sink = sink
        self._carry = ""

    def __call__(self, piece: str) -> None:
        text = self._carry + piece if self._carry else piece
        self._carry = ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._carry = text[:-1], text[-1]
        if text:
            self._sink(mend(text))

    def reset(self) -> None:
        """Forget a first half held back (a new stream starts; nothing is passed on)."""
        self._carry = ""

    def close(self) -> None:
        """Pass on a first half still held back, as U+FFFD (nothing followed it)."""
        if self._carry:
            self._carry = ""
            self._sink("\ufffd")


def bounded(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to about ``limit`` characters, with a note saying how much was cut.

    Lone surrogates (which no store can encode as UTF-8) are spelled out as ``\\udXXX``.

    Example:
        A 5,000,000-character message becomes its first ``limit`` characters followed by
        ``" ... [truncated 4,996,000 characters]"``.
    """
    if len(text) > limit:
        cut = len(text) - limit
        text = f"{text[:limit]} ... [truncated {cut:,} characters]"
    if _SURROGATE.search(text) is not None:
        text = _SURROGATE.sub(_visible, text)
    return text


def shown(value: Any, limit: int = MAX_SHOWN_CHARS) -> str:
    """``repr(value)`` for a refusal message, bounded (see ``bounded``).

    A value that has no such text (an int of more digits than Python converts, a list
    nested deeper than the recursion limit) is named by its type instead.
    """
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        return f"<{type(value).__name__} too large to show>"
    return bounded(text, limit)


def error_text(error: BaseException, limit: int = MAX_ERROR_CHARS) -> str:
    """``"TypeName: message"`` of an exception, bounded (see ``bounded``).

    A message that cannot even be turned into text (its ``__str__`` raises) is named as such
    instead of failing the caller.
    """
    try:
        message = str(error)
    except Exception as e:  # a hostile __str__ must not replace the real failure
        message = f"<unprintable message: {type(e).__name__}>"
    return bounded(f"{type(error).__name__}: {message}", limit)


def permission_question(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """A permission request as one line a person reads: ``Allow deploy? (target: prod)``.

    Each argument is shown once as ``name: value``; a long or multi-line value is cut (the
    request keeps the full arguments for whoever needs them).

    Args:
        tool_name: The tool asking to run.
        arguments: Its arguments.
    """
    shown = ", ".join(f"{name}: {_argument(value)}" for name, value in arguments.items())
    return f"Allow {tool_name}?" + (f" ({shown})" if shown else "")


def _argument(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
