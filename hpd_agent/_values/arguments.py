"""The model's tool-call argument text: the bounds every reader of it shares.

A model's arguments are untrusted text. ``tools.Tool.validate_arguments`` refuses text longer
than ``MAX_ARGUMENT_CHARS``, text holding lone surrogates and JSON nested deeper than the
parser's limit; ``parse_object`` applies the same bounds when an event only shows the
arguments (``ToolCallStarted``), so showing a call never costs more than running it.
"""

from __future__ import annotations

import re
from typing import Any, cast

import pydantic_core

__all__ = ["MAX_ARGUMENT_CHARS", "SURROGATE", "parse_object", "raw_problem", "split_arguments"]

MAX_ARGUMENT_CHARS = 1_000_000
"""Longest argument text (the model's JSON) a tool call may send; longer calls get an error
result without being parsed."""

SURROGATE = re.compile(r"[\ud800-\udfff]")
"""Surrogate code points in the text itself (the JSON parser refuses escaped lone ones)."""


def raw_problem(raw: str) -> str | None:
    """Why ``raw`` must not be parsed: ``"too_long"``, ``"surrogate"``, or None."""
    if len(raw) > MAX_ARGUMENT_CHARS:
        return "too_long"
    if not raw.isascii() and SURROGATE.search(raw) is not None:
        return "surrogate"
    return None


def parse_object(raw: str) -> dict[str, Any] | None:
    """``raw`` as a JSON object, or None when it is not one within the bounds.

    Empty text is an empty object (what a tool receives for it). Text too long, holding lone
    surrogates (raw or escaped), nested deeper than the parser's limit, not JSON, holding
    NaN or Infinity (not JSON either), or JSON that is not an object gives None.
    """
    if raw in ("", "{}"):
        return {}
    if raw_problem(raw) is not None:
        return None
    try:
        # pydantic_core's parser has a nesting limit: no RecursionError on [[[[...
        value = pydantic_core.from_json(raw, allow_inf_nan=False)
    except ValueError:
        return None
    return cast(dict[str, Any], value) if isinstance(value, dict) else None


def split_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """``(arguments, raw_arguments)`` as ``ToolCallStarted`` carries them.

    The parsed object and None; or, when the text did not parse, ``{}`` and the text cut at
    ``MAX_ARGUMENT_CHARS``, its lone surrogates shown as U+FFFD (text holding them cannot be
    encoded, and the event must stay JSON for every consumer).
    """
    parsed = parse_object(raw)
    if parsed is not None:
        return parsed, None
    text = raw[:MAX_ARGUMENT_CHARS]
    if not text.isascii():
        text = SURROGATE.sub("\ufffd", text)
    return {}, text
