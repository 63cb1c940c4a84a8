"""A pending request as the A2A server describes it, and a user message back as its answer.

A question is described by its text and metadata ``request_id``, ``question``,
``question_kind``, ``options``, ``schema`` (the JSON Schema of its answer: a custom
question's, or that of a kind of the app's own), ``agent_path``, and, when it has them, its
kind's details nested as ``data`` (``multiple``, ``url``, ``label``, ``argument``, ``name``,
``payload``...), the ``kind_label`` of a kind of the app's own and ``context``: what
``RemoteAgent`` reads. A permission is a ``choice`` among ``approve_once``, ``approve_run``
and ``deny``.

An answer is the message's data part if it has one (a bool, a list of options, JSON), else
its text; metadata ``"decline": true`` declines the question.

A refusal quotes at most ``SHOWN_CHARS`` characters of what it refuses (an answer can be
megabytes), and the note it adds to the question is bounded as a whole (``NOTE_CHARS``),
whatever said it.
"""

from __future__ import annotations

from typing import Any, cast

from a2a.types import Message
from google.protobuf.json_format import MessageToDict

from ..events import ClarificationRequest, PermissionRequest, RequestEvent
from ..hosting import DECISIONS, decision_of
from ..questions import QUESTION_KINDS, Decline, answer_schema_of, parse_typed
from ..text import bounded, permission_question

__all__ = [
    "DECISIONS",
    "NOTE_CHARS",
    "SHOWN_CHARS",
    "answer_of",
    "describe",
    "message_metadata",
    "shown",
]

SHOWN_CHARS = 200
"""Longest piece of a refused answer (or request id) quoted back, as ``run.respond`` does."""
NOTE_CHARS = 1_000
"""Longest note saying why an answer was refused (it is in the question and ``error``)."""


def shown(value: Any) -> str:
    """``repr(value)`` for a refusal, bounded to ``SHOWN_CHARS`` (see ``bounded``)."""
    return bounded(repr(value), SHOWN_CHARS)


def describe(request: RequestEvent, note: str | None = None) -> dict[str, Any]:
    """The metadata describing ``request`` (JSON data); ``note`` (why the last answer was
    refused) is added to its question."""
    if isinstance(request, PermissionRequest):
        question = permission_question(request.tool_name, request.arguments)
        entry: dict[str, Any] = {
            "request_id": request.request_id,
            "question": question,
            "question_kind": "choice",
            "options": list(DECISIONS),
            "schema": None,
        }
    else:
        entry = _question(request)
    if note:
        note = bounded(note, NOTE_CHARS)
        entry["question"] += f"\n(Your last answer was not accepted: {note})"
        entry["error"] = note
    entry["agent_path"] = list(request.agent_path)
    return entry


def _question(request: ClarificationRequest) -> dict[str, Any]:
    kind = request.question_kind
    builtin = kind in QUESTION_KINDS
    schema: Any = None  # the other built-in kinds' answers are said by kind and options
    if kind == "custom":
        schema = (request.data or {}).get("schema")
    elif not builtin:
        schema = answer_schema_of(request)
    entry: dict[str, Any] = {
        "request_id": request.request_id,
        "question": request.question,
        "question_kind": kind,
        "options": list(request.options) if request.options else None,
        "schema": schema if isinstance(schema, dict) else None,
    }
    if request.data:
        entry["data"] = request.data
    if not builtin and request.label:
        entry["kind_label"] = request.label
    if request.context:
        entry["context"] = request.context
    return entry


def message_metadata(message: Message) -> dict[str, Any]:
    """A message's metadata as JSON data."""
    return MessageToDict(message.metadata) if message.metadata.fields else {}


def answer_of(
    request: RequestEvent, message: Message, metadata: dict[str, Any] | None = None
) -> Any:
    """The answer ``message`` gives to ``request``, as ``run.respond`` takes it
    (``metadata``: the message's, when the caller has read it already).

    Raises:
        ValueError: It cannot be an answer (a permission answered with something else than
            one of ``DECISIONS``).
    """
    if metadata is None:
        metadata = message_metadata(message)
    if metadata.get("decline") is True:
        return Decline()
    value = _value(message)
    if isinstance(request, PermissionRequest):
        if isinstance(value, dict):
            value = cast(dict[str, Any], value).get("decision")
        decided = decision_of(value, by="the A2A client")
        if decided is None:
            raise ValueError(
                f"the answer must be one of {', '.join(DECISIONS)}, got {shown(value)}"
            )
        return decided
    if isinstance(value, str) and request.question_kind not in QUESTION_KINDS:
        # A kind of the app's own (a rating, say) answered in words: read as a person's
        # typed answer is, by the kind or its answer schema ("4" is the number 4).
        return parse_typed(request, value)
    return value


def _value(message: Message) -> Any:
    texts: list[str] = []
    for part in message.parts:
        if part.HasField("data"):
            return _whole(MessageToDict(part.data))
        if part.HasField("text"):
            texts.append(part.text)
    return "\n".join(texts)


def _whole(value: Any) -> Any:
    """``value`` with every whole float an int: a protobuf ``Struct`` has only doubles, so a
    client's 4 arrives as 4.0 (a tool asking for an integer would get a float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in cast(dict[str, Any], value).items()}
    if isinstance(value, list):
        return [_whole(v) for v in cast(list[Any], value)]
    return value
