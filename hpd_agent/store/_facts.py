"""A durable run's fact held back as it is, made into its journal entry when written.

In modes ``"exit"`` and ``"async"`` (docs/guarantees.md, "Durability modes") a run's model
responses and tool outcomes wait before they are written: until the run asks a human or
ends, or until the store's writer takes them (``_behind``). Held as their flattened
``JournalEntry`` they would keep a dict per response, per tool call and per usage (about
0.8 KB for a response with one tool call) for every run in flight; held as they are (the
immutable response, the outcome's text), they keep a small object each, and are flattened
when taken to be written (``entry_of``): the same entries, made later.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any

from ..models._base import ModelResponse
from ._base import JournalEntry

__all__ = ["Held", "HeldOutcome", "HeldResponse", "entry_of", "flat", "response_entry"]

_FIELDS: dict[type[object], tuple[tuple[str, ...], Callable[[Any], Any]]] = {}


def flat(value: object) -> dict[str, Any]:
    """A dataclass of plain fields as a dict (``dataclasses.asdict`` without its deep copy).

    Its fields are read by one ``attrgetter`` made once per class: a model response's
    calls and usage are flattened at every model request of every durable run."""
    cls = type(value)
    known = _FIELDS.get(cls)
    if known is None:
        names = tuple(f.name for f in dataclasses.fields(value))  # pyright: ignore[reportArgumentType]
        known = _FIELDS[cls] = (names, _reader(names))
    names, read = known
    return dict(zip(names, read(value), strict=False))  # one length by construction


def _reader(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """Reads ``names`` of an object as one tuple (``attrgetter`` gives a lone value bare)."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    return lambda value: tuple(getattr(value, name) for name in names)


def response_entry(key: str, response: ModelResponse) -> JournalEntry:
    """The journal entry that records a model response at ``key``."""
    value = {
        "text": response.text,
        "tool_calls": list(map(flat, response.tool_calls)),
        "usage": flat(response.usage),
        "finish_reason": response.finish_reason,
    }
    return JournalEntry(key=key, kind="model", value=value)


class HeldResponse:
    """A model response held back as it is (module doc).

    Args:
        key: Its journal key (``scope_path@turn``).
        response: The response as recorded (immutable: its entry is the same made later).
    """

    __slots__ = ("key", "response")
    kind = "model"

    def __init__(self, key: str, response: ModelResponse) -> None:
        self.key = key
        self.response = response

    def entry(self) -> JournalEntry:
        """The journal entry that records the response."""
        return response_entry(self.key, self.response)


class HeldOutcome:
    """A tool call's outcome held back as it is (module doc).

    Args:
        key: Its journal key (the call's path).
        text: The result text.
        is_error: Whether the tool failed.
    """

    __slots__ = ("is_error", "key", "text")
    kind = "tool"

    def __init__(self, key: str, text: str, is_error: bool) -> None:
        self.key = key
        self.text = text
        self.is_error = is_error

    def entry(self) -> JournalEntry:
        """The journal entry that records the outcome."""
        return JournalEntry(
            key=self.key, kind="tool", value={"result": self.text, "is_error": self.is_error}
        )


Held = HeldResponse | HeldOutcome
"""A fact held back as it is."""


def entry_of(fact: JournalEntry | Held) -> JournalEntry:
    """``fact`` as the entry a store writes (an entry as it is)."""
    return fact if isinstance(fact, JournalEntry) else fact.entry()
