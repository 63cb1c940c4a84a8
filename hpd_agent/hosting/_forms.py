"""A pending request as a form (an MCP elicitation, an ACP ``elicitation/create``: ACP's form
schema is MCP's), and the form's content back as an answer.

A question's form is drawn from its answer schema (``answer_schema_of``, any kind): a flat
object schema MCP allows is sent as it is; a schema MCP allows for one field (a string, an
enum of the options, an array of them, a boolean, a number...) is one required property
``answer``; any other asks for ``answer`` as a string holding JSON. A permission asks for
``decision`` (one of ``DECISIONS``). ``choices_of`` gives a question's answers as buttons
when they are a few (a client without forms).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from ..events import ClarificationRequest, PermissionRequest, RequestEvent, format_path
from ..questions import answer_schema_of
from ..text import permission_question, shown
from ._decisions import DECISIONS, decision_of

__all__ = ["Form", "choices_of", "form_for", "is_flat"]


@dataclass(frozen=True, slots=True)
class Form:
    """One pending request as an elicitation.

    Attributes:
        request_id: The request it asks (the key of its input request on 2026-07-28).
        message: What the client shows: the asker's path joined by `` > ``, then the question.
        schema: The ``requestedSchema``.
        read: The accepted content to the answer ``run.respond`` takes; ``ValueError``
            says why content does not fit.
        agent_path: Who asks (the request's ``agent_path``), for a client that shows it
            apart from the question (an adapter sends it beside the message: MCP's
            ``_meta``).
    """

    request_id: str
    message: str
    schema: dict[str, Any]
    read: Callable[[Mapping[str, Any] | None], Any]
    agent_path: tuple[str, ...] = ()


def form_for(request: RequestEvent, note: str | None = None, *, by: str = "the client") -> Form:
    """The form asking ``request``; ``note`` (why the last answer was refused) is added to
    its message; ``by`` names the client a permission is denied by (``decision_of``)."""
    path = format_path(request.agent_path)
    if isinstance(request, PermissionRequest):
        text = f"{path}: {permission_question(request.tool_name, request.arguments)}"
        schema = _one("decision", {"type": "string", "enum": list(DECISIONS)})
        read: Callable[[Mapping[str, Any] | None], Any] = partial(_read_decision, by=by)
    else:
        text = f"{path}: {request.question}"
        if request.context:
            text += f"\n{request.context}"
        schema, read = _question_schema(request)
    if note:
        text += f"\n(Your last answer was not accepted: {note})"
    return Form(
        request_id=request.request_id,
        message=text,
        schema=schema,
        read=read,
        agent_path=request.agent_path,
    )


def choices_of(request: ClarificationRequest) -> list[tuple[str, Any]] | None:
    """A question's answers when they are a few to pick from, as ``(label, answer)`` pairs in
    order: a confirm's ``Yes`` (True) and ``No`` (False), the options of a text question or
    of a single choice. None for any other (free text, an input, a multiple choice, a custom
    or action question): a client that only offers buttons cannot ask it."""
    kind = request.question_kind
    if kind == "confirm":
        return [("Yes", True), ("No", False)]
    single = not (request.data or {}).get("multiple")
    if request.options and (kind == "text" or (kind == "choice" and single)):
        return [(option, option) for option in request.options]
    return None


def _one(name: str, prop: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {name: prop}, "required": [name]}


def _question_schema(
    request: ClarificationRequest,
) -> tuple[dict[str, Any], Callable[[Mapping[str, Any] | None], Any]]:
    schema = answer_schema_of(request)
    if is_flat(schema):
        return dict(schema), _read_content
    prop: dict[str, Any] = {"title": "Answer", **schema}
    if _primitive(prop):
        return _one("answer", prop), _read_answer
    prop = {"type": "string", "title": "Answer", "description": "the answer as JSON"}
    return _one("answer", prop), _read_json


def _read_answer(content: Mapping[str, Any] | None) -> Any:
    if not content or "answer" not in content:
        raise ValueError("the form has no answer")
    return content["answer"]


def _read_json(content: Mapping[str, Any] | None) -> Any:
    value = _read_answer(content)
    if not isinstance(value, str):
        raise ValueError(f"the answer must be JSON text, got {type(value).__name__}")
    try:
        return json.loads(value)
    except RecursionError:
        raise ValueError("the answer nests too deeply to be read as JSON") from None
    except ValueError as e:
        raise ValueError(f"the answer is not JSON: {e}") from None


def _read_content(content: Mapping[str, Any] | None) -> Any:
    return dict(content or {})


def _read_decision(content: Mapping[str, Any] | None, *, by: str) -> Any:
    decision = (content or {}).get("decision")
    decided = decision_of(decision, by=by)
    if decided is None:
        raise ValueError(f"decision must be one of {', '.join(DECISIONS)}, got {shown(decision)}")
    return decided


# -- what MCP allows in a requestedSchema ---------------------------------------------------
_TOP = {"type", "properties", "required", "$schema", "title", "description"}
_COMMON = {"type", "title", "description", "default"}
_BY_TYPE: dict[str, set[str]] = {
    "string": _COMMON | {"minLength", "maxLength", "format", "enum", "enumNames", "oneOf"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
    "array": _COMMON | {"items", "minItems", "maxItems"},
}
_FORMATS = {"date", "date-time", "email", "uri"}


def is_flat(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` is a requestedSchema MCP allows as it is: an object of primitive
    properties (string with its formats, number, integer, boolean, single- and multi-select
    enums of strings), nothing nested, nothing else."""
    if schema.get("type") != "object" or not set(schema) <= _TOP:
        return False
    props = schema.get("properties")
    required = schema.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list):
        return False
    props = cast(dict[str, Any], props)
    if not all(isinstance(r, str) and r in props for r in cast(list[Any], required)):
        return False
    return all(isinstance(p, dict) and _primitive(cast(dict[str, Any], p)) for p in props.values())


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in cast(list[Any], value))


def _consts(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    return all(
        isinstance(v, dict) and isinstance(cast(dict[str, Any], v).get("const"), str)
        for v in cast(list[Any], value)
    )


def _primitive(prop: dict[str, Any]) -> bool:
    kind = prop.get("type")
    allowed = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if allowed is None or not set(prop) <= allowed:
        return False
    if kind == "string":
        if "format" in prop and prop["format"] not in _FORMATS:
            return False
        if "enum" in prop and not _strings(prop["enum"]):
            return False
        return "oneOf" not in prop or _consts(prop["oneOf"])
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, dict):
            return False
        items = cast(dict[str, Any], items)
        if items.get("type") == "string" and set(items) <= {"type", "enum"}:
            return _strings(items.get("enum"))
        return set(items) == {"anyOf"} and _consts(items["anyOf"])
    return True
