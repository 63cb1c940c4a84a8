"""Typed text: what a person types (the console, ``hpd-agent answer``, ``resume --answer``)
read as an answer, and the hint that says what to type.

One convention wherever a person types: options are picked by their number as listed,
**1 is the first** (the API's int index stays 0-based), or by their text. A kind reads typed
text with its own ``parse_text`` when this process registered it, else its answer schema
decides (``parse_by_schema``): a number for an integer or number schema, yes/no words for a
boolean, an option's 1-based number or value for an enum, a comma list of them for an array
of an enum, the text for a string, JSON for anything else (or the text itself when it is no
JSON and the schema takes text).

What is read here is then checked by the one answer check, like any answer: a parser only
turns text into a value and refuses what it cannot read (``ValueError``, whose message is a
sentence saying what to type).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..events import ClarificationRequest, RequestEvent
from ..text import bounded, error_text, shown
from .kinds import BuiltinKind, answer_schema_of, kind_named
from .vocabulary import NO_WORDS, YES_WORDS, normalise

__all__ = [
    "AnswerPrompt",
    "answer_hint",
    "answer_prompt",
    "parse_by_schema",
    "parse_typed",
    "pick_option",
    "pick_options",
    "question_label",
    "yes_no",
]


def _numbered(count: int) -> str:
    return f"a number from 1 to {count} (as listed: 1 is the first)"


def _pick(text: str, values: Sequence[Any]) -> Any:
    """``text`` as one of ``values``: itself, its 1-based number, or (any case) its text;
    else the text as typed, which the answer check refuses with its own message."""
    stripped = text.strip()
    for value in values:
        same = value == text if isinstance(value, str) else _json(value) == stripped
        if same:
            return value
    if stripped.isascii() and stripped.isdecimal():
        number = int(stripped)
        if 1 <= number <= len(values):
            return values[number - 1]
        raise ValueError(
            f"There is no option {number}: type {_numbered(len(values))} or an option's text."
        )
    folded = stripped.casefold()
    for value in values:
        if isinstance(value, str) and value.strip().casefold() == folded:
            return value
    return text


def _json(value: Any) -> str | None:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return None


def pick_option(text: str, options: Sequence[str]) -> Any:
    """One option by its 1-based number or its text (see the module docstring)."""
    return _pick(text, options)


def pick_options(text: str, options: Sequence[Any]) -> list[Any]:
    """Options separated by commas (``"1, 3"``); a whole option holding a comma is one."""
    if text in options:
        return [text]
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise ValueError("Pick at least one option.")
    return [_pick(part, options) for part in parts]


def yes_no(text: str, yes: frozenset[str], no: frozenset[str], say: str = "Answer y or n.") -> bool:
    """True for a word of ``yes``, False for one of ``no`` (any case); ``say`` otherwise."""
    word = normalise(text)
    if word in yes:
        return True
    if word in no:
        return False
    raise ValueError(say)


def _types(schema: Mapping[str, Any]) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {t for t in cast(list[Any], kind) if isinstance(t, str)} - {"null"}
    return set()


def _range(schema: Mapping[str, Any]) -> str:
    low, high = schema.get("minimum"), schema.get("maximum")
    number = (int, float)
    if isinstance(low, number) and isinstance(high, number):
        return f" from {low} to {high}"
    if isinstance(low, number):
        return f" of at least {low}"
    if isinstance(high, number):
        return f" of at most {high}"
    return ""


def _enum(schema: Mapping[str, Any]) -> list[Any] | None:
    enum = schema.get("enum")
    return cast(list[Any], enum) if isinstance(enum, list) and enum else None


def _item_enum(schema: Mapping[str, Any]) -> list[Any] | None:
    items = schema.get("items")
    if _types(schema) != {"array"} or not isinstance(items, Mapping):
        return None
    return _enum(cast(Mapping[str, Any], items))


def answer_hint(schema: Mapping[str, Any]) -> str:
    """What to type for an answer matching ``schema``, e.g. ``a whole number from 1 to 5``."""
    enum = _enum(schema)
    if enum is not None:
        return f"{_numbered(len(enum))} or the value"
    listed = _item_enum(schema)
    if listed is not None:
        return f"one or more, separated by commas: {_numbered(len(listed))} or the value"
    types = _types(schema)
    if types == {"boolean"}:
        return "y or n"
    if types == {"integer"}:
        return "a whole number" + _range(schema)
    if types and types <= {"integer", "number"}:
        return "a number" + _range(schema)
    if types == {"string"}:
        return "your answer"
    return "JSON"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _number(text: str, schema: Mapping[str, Any]) -> int | float:
    try:
        value: Any = json.loads(text.strip(), parse_constant=_refuse_constant)
    except ValueError:
        value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"Type {answer_hint(schema)}.")
    if isinstance(value, float) and value.is_integer() and _types(schema) == {"integer"}:
        return int(value)
    return value


def parse_by_schema(text: str, schema: Mapping[str, Any] | None) -> Any:
    """Typed text as an answer to a question whose answer follows ``schema`` (None: any JSON).

    Raises:
        ValueError: The text cannot be read as such an answer; the message says what to type.
    """
    schema = schema or {}
    enum = _enum(schema)
    if enum is not None:
        return _pick(text, enum)
    listed = _item_enum(schema)
    if listed is not None:
        return pick_options(text, listed)
    types = _types(schema)
    if types == {"boolean"}:
        return yes_no(text, YES_WORDS, NO_WORDS)
    if types and types <= {"integer", "number"}:
        return _number(text, schema)
    if types == {"string"}:
        return text
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("That JSON nests too deeply.") from None
    except ValueError as e:
        if not types or "string" in types:
            return text  # no JSON, but the schema takes text
        raise ValueError(f"That is not valid JSON: {e}") from None


def parse_typed(request: ClarificationRequest, text: str) -> Any:
    """What a person typed, as an answer to ``request`` (to be checked like any answer).

    The question's kind reads it when this process registered the kind (its ``parse_text``;
    a built-in kind's own rules), else the request's answer schema does (``parse_by_schema``).

    Raises:
        ValueError: The text cannot be read as an answer; the message says what to type.
    """
    kind = kind_named(request.question_kind)
    data: Mapping[str, Any] = request.data or {}
    if isinstance(kind, BuiltinKind):
        return kind.parse(text, data, request.options)
    if kind is not None and kind.parse_text is not None:
        try:
            return kind.parse_text(text, data)
        except ValueError as e:
            raise ValueError(bounded(str(e))) from None
        except Exception as e:  # the kind's own code: say so, in one bounded line
            raise ValueError(
                f"question kind {kind.name!r} could not read {shown(text)}: {error_text(e)}"
            ) from None
    return parse_by_schema(text, answer_schema_of(request))


_PERMISSION_HINT = (
    "type y (allow this call), run (allow the tool for the run), always (allow it from now "
    "on: a remembered grant) or n"
)


@dataclass(frozen=True, slots=True)
class AnswerPrompt:
    """What a request asks for and what to type to answer it.

    Attributes:
        label: What it asks for, in the words every surface uses: ``Question``,
            ``Choose one``, ``Choose any``, ``Yes or no``, ``Value needed``,
            ``Action needed``, ``Form``, ``Permission``, or a kind's own label
            (``Rate 1–5``).
        hint: What to type, e.g. ``type a number from 1 to 3 (as listed: 1 is the first)
            or the value``: what ``parse_typed`` reads (``to_decision`` for a permission).
    """

    label: str
    hint: str

    def __str__(self) -> str:
        return f"{self.label}: {self.hint}"


def question_label(request: ClarificationRequest) -> str:
    """What the question asks for (``AnswerPrompt.label``): a question with options is a
    choice (``Choose one``, ``Choose any``); any other has its kind's label (``Yes or no``,
    ``Rate 1–5``), else ``Question``."""
    kind = request.question_kind
    if kind == "choice" or (kind == "text" and request.options):
        return "Choose any" if (request.data or {}).get("multiple") else "Choose one"
    known = kind_named(kind)
    return request.label or (known.label if known is not None else None) or "Question"


def answer_prompt(request: RequestEvent) -> AnswerPrompt:
    """The request's label and what to type to answer it (see
    ``hpd_agent.questions.answer_prompt``)."""
    if not isinstance(request, ClarificationRequest):
        return AnswerPrompt("Permission", _PERMISSION_HINT)
    if request.question_kind == "action":
        return AnswerPrompt(question_label(request), "type y once it is done, or n to decline")
    hint = answer_hint(answer_schema_of(request))
    return AnswerPrompt(
        question_label(request), "answer with JSON" if hint == "JSON" else f"type {hint}"
    )
