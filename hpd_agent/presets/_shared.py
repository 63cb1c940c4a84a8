"""What the presets share: finding the call frame to ask from, reading JSON out of model text,
and keyword sets matched against a whole reply."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, cast

from .._core.context import ToolContext, current_context
from ..exceptions import UserError

__all__ = ["find_json_object", "frame", "keywords", "normalise_reply"]

_FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\n?(.*?)```", re.DOTALL)


def frame(ctx: ToolContext | None, preset: str) -> ToolContext:
    """The call frame a preset asks from: the one given, else the running tool's."""
    found = ctx if ctx is not None else current_context()
    if found is None:
        raise UserError(
            f"{preset} asks the human through a run: call it inside a tool (or pass ctx=), "
            "or put a Clarifier in front of an agent with Agent(..., clarifier=...)"
        )
    return found


def normalise_reply(reply: str) -> str:
    """A reply as keywords are matched against it: the whole text, stripped, lower case."""
    return reply.strip().lower()


def keywords(words: Iterable[str], what: str) -> frozenset[str]:
    """A keyword set, normalised like replies are; a single string is refused (a common slip)."""
    if isinstance(words, str):
        raise UserError(f"{what} must be a collection of words, not one string")
    return frozenset(normalise_reply(w) for w in words)


_SCAN_BUDGET = 2_000_000
"""Characters ``find_json_object`` may read decoding candidates: a reply made of many ``{``
that each open a long object (unfinished, or nested) would otherwise take time quadratic in
its length (a 700 KB one, about a minute)."""


def find_json_object(text: str | None, *, keys: Iterable[str]) -> dict[str, Any] | None:
    """The first JSON object in ``text`` that has one of ``keys``, or None.

    Models wrap JSON in prose and code fences; fenced blocks are tried first, then every
    ``{`` of the whole text, so the object is found wherever it sits (until the attempts
    have read ``_SCAN_BUDGET`` characters: then None).
    """
    if not text:
        return None
    wanted = tuple(keys)
    decoder = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    candidates.append(text)
    budget = _SCAN_BUDGET
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1 and budget > 0:
            try:
                value, end = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError as e:
                value, end = None, e.pos + 1
            except RecursionError:  # nested deeper than the parser goes: not an answer
                value, end = None, len(candidate)
            budget -= end - start
            if isinstance(value, dict):
                obj = cast(dict[str, Any], value)
                if any(k in obj for k in wanted):
                    return obj
            start = candidate.find("{", start + 1)
    return None
