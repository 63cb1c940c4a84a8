"""Question kinds: ``QuestionKind``, the one registry every path reads, and the answer check
that holds for any kind.

A kind is a name, the JSON Schema of a valid answer (a function of the question's ``data``),
how a person's typed text becomes an answer, and a label. ``register_kind`` adds one; the
built-in kinds (``hpd_agent._values.builtin_kinds``) are registered through the same call.

When a question is asked, its kind's answer schema is resolved (``asked_schema``) and
travels with the request (``ClarificationRequest.answer_schema``, ``label``), so a process
that never imported the kind (a store's ``respond`` in another process, a web worker, a
Temporal workflow) checks an answer exactly as the asking process does: a kind other than
the built-ins has no check of its own, its answer schema is its check (``check_kind``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from ..events import ClarificationRequest
from ..exceptions import UserError
from ..text import error_text, shown
from .schemas import nesting_problem, schema_mismatch, schema_problem

__all__ = [
    "BuiltinKind",
    "QuestionKind",
    "answer_schema_of",
    "asked_schema",
    "check_json",
    "check_kind",
    "kind_named",
    "register_kind",
]

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")
_MAX_LABEL = 200

Options = tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class QuestionKind:
    """A kind of question: what answer fits it and how a person types one.

    Register it once (``register_kind``), then ask it from a tool with
    ``ctx.ask_kind(name, question, data=...)``.

    Args:
        name: The kind's name, as ``ClarificationRequest.question_kind`` carries it: a letter,
            then at most 63 letters, digits or ``_.:-``.
        answer_schema: ``answer_schema(data)`` gives the JSON Schema of a valid answer to a
            question with this ``data`` (a dict, maybe empty). It is resolved when the
            question is asked and kept with the request, so it is the check everywhere, in
            any process: local ``$ref``s only, at most 65,536 bytes and 32 levels deep.
        parse_text: ``parse_text(text, data)`` turns what a person typed (the console,
            ``hpd-agent answer``) into an answer, raising ``ValueError`` with a message
            saying what to type; None: the answer schema decides (a number for an integer
            schema, yes/no for a boolean, an option's 1-based number for an enum, JSON...).
            A process that never imported the kind reads typed text by the schema.
        label: Short text naming what the question wants (``"Rate 1–5"``), shown by the
            console, ``pending`` and the web page; None: the kind's name.

    Raises:
        UserError: A field is not of the form above.
    """

    name: str
    answer_schema: Callable[[Mapping[str, Any]], Mapping[str, Any]]
    parse_text: Callable[[str, Mapping[str, Any]], Any] | None = field(default=None, kw_only=True)
    label: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _NAME.fullmatch(self.name) is None:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(
                f"a question kind's name is a letter, then at most 63 letters, digits or "
                f"'_.:-'; got {shown(self.name)}"
            )
        if not callable(self.answer_schema):
            raise UserError(f"question kind {self.name!r}: answer_schema must be a function")
        if self.parse_text is not None and not callable(self.parse_text):
            raise UserError(f"question kind {self.name!r}: parse_text must be a function or None")
        if self.label is not None and (
            not isinstance(self.label, str) or not 0 < len(self.label) <= _MAX_LABEL  # pyright: ignore[reportUnnecessaryIsInstance]
        ):
            raise UserError(
                f"question kind {self.name!r}: label must be text of 1 to {_MAX_LABEL} "
                f"characters, got {shown(self.label)}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltinKind(QuestionKind):
    """A kind this package defines: its answers and typed text also depend on ``options``,
    and its own ``check`` accepts more than its schema says (an option's 0-based index, any
    case, yes/no words) and returns the canonical form, which matches the schema."""

    check: Callable[[Any, Options, Mapping[str, Any]], Any]
    schema_for: Callable[[Mapping[str, Any], Options], dict[str, Any]]
    parse: Callable[[str, Mapping[str, Any], Options], Any]


_KINDS: dict[str, QuestionKind] = {}


def register_kind(kind: QuestionKind) -> QuestionKind:
    """Make ``kind`` known to this process: ``ctx.ask_kind(kind.name, ...)`` can ask it.

    Registering the same object again does nothing, so a module may register its kind at
    import. Another kind of a registered name is refused, and a built-in kind (``text``,
    ``input``, ``choice``, ``confirm``, ``action``, ``custom``) cannot be replaced.

    Returns:
        ``kind``, so ``RATING = register_kind(QuestionKind(...))`` reads as one line.

    Raises:
        UserError: ``kind`` is not a ``QuestionKind``, or its name is taken.
    """
    if not isinstance(kind, QuestionKind):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"register_kind takes a QuestionKind, got {type(kind).__name__}")
    known = _KINDS.get(kind.name)
    if known is kind:
        return kind
    if isinstance(known, BuiltinKind):
        raise UserError(f"{kind.name!r} is a built-in question kind: it cannot be replaced")
    if known is not None:
        raise UserError(
            f"another question kind named {kind.name!r} is already registered; register "
            "each kind once (a module's global, imported under one name; a Temporal workflow "
            "passes its module through the sandbox) or give it another name"
        )
    _KINDS[kind.name] = kind
    return kind


def kind_named(name: str) -> QuestionKind | None:
    """The kind registered under ``name`` in this process, or None."""
    return _KINDS.get(name)


def _json_schema(kind: QuestionKind, data: Mapping[str, Any]) -> dict[str, Any]:
    """``kind.answer_schema(data)`` as plain JSON data, checked; ``UserError`` says why not."""
    try:
        schema: Any = kind.answer_schema(data)
    except Exception as e:  # the kind's own code: any failure is its author's to fix
        raise UserError(
            f"question kind {kind.name!r}: answer_schema failed: {error_text(e)}"
        ) from None
    if not isinstance(schema, Mapping):
        raise UserError(
            f"question kind {kind.name!r}: answer_schema must return a JSON Schema (a dict), "
            f"got {type(schema).__name__}"
        )
    problem = nesting_problem(schema, 32, "the answer schema")
    if problem is None:
        try:
            schema = json.loads(json.dumps(dict(cast(Mapping[str, Any], schema)), allow_nan=False))
        except (TypeError, ValueError) as e:
            problem = f"the answer schema is not JSON: {e}"
        else:
            problem = schema_problem(schema)
    if problem is not None:
        raise UserError(f"question kind {kind.name!r}: {problem}")
    return cast(dict[str, Any], schema)


def asked_schema(
    name: str, data: Mapping[str, Any] | None, options: Options
) -> tuple[dict[str, Any], str | None]:
    """The answer schema and label a question of kind ``name`` is asked with.

    Raises:
        UserError: No kind of that name is registered, or its answer schema is not a safe,
            valid JSON Schema.
    """
    kind = _KINDS.get(name)
    if kind is None:
        raise UserError(
            f"no question kind named {name!r} is registered: register a QuestionKind "
            "(hpd_agent.questions.register_kind) before asking it"
        )
    if isinstance(kind, BuiltinKind):
        return kind.schema_for(data or {}, options), kind.label
    return _json_schema(kind, data or {}), kind.label


def answer_schema_of(request: ClarificationRequest) -> dict[str, Any]:
    """The JSON Schema of a valid answer to ``request``: what a form or a hint is drawn from.

    A built-in kind's comes from its kind; any other's is the one the request was asked with
    (or, for a request from before schemas travelled with requests, its registered kind's).
    ``{}`` (any JSON) for a kind this process cannot tell, which no answer fits anyway.
    """
    kind = _KINDS.get(request.question_kind)
    if isinstance(kind, BuiltinKind):
        return kind.schema_for(request.data or {}, request.options)
    if request.answer_schema is not None:
        return request.answer_schema
    if kind is not None:
        try:
            return _json_schema(kind, request.data or {})
        except UserError:
            return {}
    return {}


def _to_json(answer: Any) -> Any:
    try:
        return json.loads(json.dumps(answer, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise TypeError(f"the answer must be JSON data: {e}") from None


def check_json(answer: Any, schema: Any) -> Any:
    """``answer`` as plain JSON data if it matches ``schema`` (None: any JSON).

    Raises:
        ValueError, TypeError: It is not JSON data, nests too deeply, or does not match; or
            the schema cannot check answers (a schema from a store passed no check yet).
    """
    deep = nesting_problem(answer, what="the answer")
    if deep is not None:
        raise ValueError(deep)
    value = _to_json(answer)
    if schema is None:
        return value
    problem = schema_problem(schema)
    if problem is not None:
        raise ValueError(f"the question's JSON schema is invalid: {problem}")
    mismatch = schema_mismatch(schema, value)
    if mismatch is not None:
        raise ValueError(mismatch)
    return value


def check_kind(
    name: str,
    answer: Any,
    *,
    options: Options = None,
    data: Mapping[str, Any] | None = None,
    schema: Mapping[str, Any] | None = None,
) -> Any:
    """The one answer check of a question: its kind ``name``, ``options``, ``data`` and the
    answer ``schema`` it was asked with (None: the registered kind's).

    A built-in kind checks with its own rules; any other kind's answer must match the schema.

    Raises:
        ValueError, TypeError: The answer does not fit (or the kind is unknown here and the
            question carries no schema); the message says why.
    """
    kind = _KINDS.get(name)
    if isinstance(kind, BuiltinKind):
        return kind.check(answer, options, data or {})
    if schema is None and kind is not None:
        try:
            schema = _json_schema(kind, data or {})
        except UserError as e:
            raise ValueError(str(e)) from None
    if schema is None:
        known = ", ".join(_KINDS)  # the built-ins first, in their order
        raise ValueError(f"unknown question kind {name!r}; known kinds: {known}")
    return check_json(answer, schema)
