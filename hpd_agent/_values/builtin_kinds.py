"""The built-in question kinds, registered like any kind (``register_kind``): their answer
checks, answer schemas and typed-text rules.

- ``text``: free text; with ``options`` the answer must be one of them, by value or by
  0-based index (an int; a bool is refused).
- ``input``: a value for a named tool argument (non-empty text, stripped).
- ``choice``: one of ``options`` by value or 0-based index; ``data={"multiple": bool}``,
  and a multiple choice takes a list of values or indices.
- ``confirm``: yes or no, as a bool (the strings yes/no/y/n/true/false also count).
- ``action``: True when done, False when declined.
- ``custom``: JSON, checked against ``data["schema"]`` when there is one.

A built-in check accepts more than its answer schema says (an index, any case, yes/no words)
and returns the canonical form, which matches the schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from ..text import shown
from .kinds import BuiltinKind, Options, check_json, register_kind
from .typed import parse_by_schema, pick_option, pick_options, yes_no
from .vocabulary import DECLINED_WORDS, DONE_WORDS, NO_WORDS, YES_WORDS, normalise

__all__ = ["BUILTIN_KINDS"]

_TYPED_TEXT = "Please type an answer."


# -- answer checks (work from the event's fields alone) ---------------------------------------
def _match_option(answer: str, options: tuple[str, ...]) -> str:
    if answer in options:
        return answer
    folded = answer.strip().casefold()
    for option in options:
        if option.strip().casefold() == folded:
            return option
    raise ValueError(f"{shown(answer)} is not one of the options {list(options)}")


def _pick(answer: Any, options: tuple[str, ...]) -> str:
    if isinstance(answer, bool):
        raise TypeError("expected an option (text) or its 0-based index (int), got a bool")
    if isinstance(answer, int):
        if 0 <= answer < len(options):
            return options[answer]
        raise ValueError(f"index {shown(answer)} is out of range: there are {len(options)} options")
    if isinstance(answer, str):
        return _match_option(answer, options)
    raise TypeError(
        f"expected an option (text) or its 0-based index (int), got {type(answer).__name__}"
    )


def _check_text(answer: Any, options: Options, data: Mapping[str, Any]) -> str:
    if options is not None:
        # One of the options, by its text or its 0-based index, as for a choice.
        return _pick(answer, options)
    if not isinstance(answer, str):
        raise TypeError(f"expected text, got {type(answer).__name__}")
    return answer


def _check_input(answer: Any, options: Options, data: Mapping[str, Any]) -> str:
    argument = data.get("argument", "the argument")
    if not isinstance(answer, str):
        raise TypeError(f"expected a text value for {argument!r}, got {type(answer).__name__}")
    value = answer.strip()
    if not value:
        raise ValueError(f"a value for {argument!r} is required; the answer was empty")
    return value


def _check_choice(answer: Any, options: Options, data: Mapping[str, Any]) -> Any:
    if not options:
        raise ValueError("the choice question has no options to choose from")
    if not data.get("multiple", False):
        if isinstance(answer, (list, tuple)):
            raise TypeError("this question takes one option, not a list")
        return _pick(answer, options)
    if not isinstance(answer, (list, tuple)):
        raise TypeError(f"expected a list of options, got {type(answer).__name__}")
    picked: list[str] = []
    for item in cast(Sequence[Any], answer):
        value = _pick(item, options)
        if value in picked:
            raise ValueError(f"option {value!r} was chosen twice")
        picked.append(value)
    if not picked:
        raise ValueError("choose at least one option")
    return picked


def _yes_no(answer: Any, yes: frozenset[str], no: frozenset[str], what: str) -> bool:
    if isinstance(answer, bool):
        return answer
    if isinstance(answer, str):
        word = normalise(answer)
        if word in yes:
            return True
        if word in no:
            return False
        raise ValueError(f"expected {what}, got {shown(answer)}")
    raise TypeError(f"expected {what} (a bool), got {type(answer).__name__}")


def _check_confirm(answer: Any, options: Options, data: Mapping[str, Any]) -> bool:
    return _yes_no(answer, YES_WORDS, NO_WORDS, "yes or no")


def _check_action(answer: Any, options: Options, data: Mapping[str, Any]) -> bool:
    return _yes_no(answer, DONE_WORDS, DECLINED_WORDS, "True (done) or False (declined)")


def _check_custom(answer: Any, options: Options, data: Mapping[str, Any]) -> Any:
    return check_json(answer, data.get("schema"))


# -- answer schemas -----------------------------------------------------------------------------
def _text_schema(data: Mapping[str, Any], options: Options) -> dict[str, Any]:
    if options:
        return {"type": "string", "enum": list(options)}
    return {"type": "string"}


def _input_schema(data: Mapping[str, Any], options: Options) -> dict[str, Any]:
    return {"type": "string", "minLength": 1}


def _choice_schema(data: Mapping[str, Any], options: Options) -> dict[str, Any]:
    if not options:
        return {"type": "string"}  # a choice without options takes no answer at all
    one: dict[str, Any] = {"type": "string", "enum": list(options)}
    if data.get("multiple"):
        return {"type": "array", "items": one, "minItems": 1}
    return one


def _boolean_schema(data: Mapping[str, Any], options: Options) -> dict[str, Any]:
    return {"type": "boolean"}


def _action_schema(data: Mapping[str, Any], options: Options) -> dict[str, Any]:
    url = data.get("url")
    if isinstance(url, str):
        return {"type": "boolean", "description": f"true once done at {url}"}
    return {"type": "boolean"}


def _custom_schema(data: Mapping[str, Any], options: Options) -> dict[str, Any]:
    schema = data.get("schema")
    return cast(dict[str, Any], schema) if isinstance(schema, dict) else {}


# -- typed text ---------------------------------------------------------------------------------
def _typed_text(text: str, data: Mapping[str, Any], options: Options) -> Any:
    if options:
        return pick_option(text, options)
    if not text.strip():
        raise ValueError(_TYPED_TEXT)
    return text


def _typed_choice(text: str, data: Mapping[str, Any], options: Options) -> Any:
    if not options:
        return text
    if data.get("multiple"):
        return pick_options(text, options)
    return pick_option(text, options)


def _typed_confirm(text: str, data: Mapping[str, Any], options: Options) -> bool:
    return yes_no(text, YES_WORDS | {"1"}, NO_WORDS | {"0"})


def _typed_action(text: str, data: Mapping[str, Any], options: Options) -> bool:
    return yes_no(
        text,
        DONE_WORDS | {"", "1"},
        DECLINED_WORDS | {"0"},
        "Type y once it is done, or n to decline.",
    )


def _typed_custom(text: str, data: Mapping[str, Any], options: Options) -> Any:
    return parse_by_schema(text, _custom_schema(data, options) or None)


_Check = Callable[[Any, Options, Mapping[str, Any]], Any]
_Schema = Callable[[Mapping[str, Any], Options], dict[str, Any]]
_Parse = Callable[[str, Mapping[str, Any], Options], Any]


def _builtin(
    name: str, label: str, check: _Check, schema_for: _Schema, parse: _Parse
) -> BuiltinKind:
    # The public fields answer as for a question without options (what a kind's user sees);
    # the package passes the options through schema_for and parse.
    return BuiltinKind(
        name=name,
        answer_schema=lambda data: schema_for(data, None),
        parse_text=lambda text, data: parse(text, data, None),
        label=label,
        check=check,
        schema_for=schema_for,
        parse=parse,
    )


BUILTIN_KINDS: tuple[BuiltinKind, ...] = (
    _builtin("text", "Question", _check_text, _text_schema, _typed_text),
    _builtin("input", "Value needed", _check_input, _input_schema, _typed_text),
    _builtin("choice", "Choice", _check_choice, _choice_schema, _typed_choice),
    _builtin("confirm", "Yes or no", _check_confirm, _boolean_schema, _typed_confirm),
    _builtin("action", "Action needed", _check_action, _action_schema, _typed_action),
    _builtin("custom", "Form", _check_custom, _custom_schema, _typed_custom),
)
"""The built-in kinds, in the order ``QUESTION_KINDS`` lists their names."""

for _kind in BUILTIN_KINDS:
    register_kind(_kind)
