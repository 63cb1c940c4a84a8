"""A remote agent's question as the question the human is asked (``question_spec``)."""

from __future__ import annotations

from typing import Any, cast

from ..exceptions import UserError
from ..questions import (
    QUESTION_KINDS,
    ActionQuestion,
    ChoiceQuestion,
    ConfirmQuestion,
    CustomQuestion,
    InputQuestion,
    KindQuestion,
    Question,
    TextQuestion,
)
from ._wire import RemoteQuestion

__all__ = ["MAX_URL", "question_spec", "refused_url"]

MAX_URL = 8_000
"""Longest URL an action question takes from a remote (a URL cut short opens the wrong page)."""


def question_spec(question: RemoteQuestion, tool_name: str) -> Question:
    """The question of the kind the remote named, with its options, schema and details (a
    kind of the remote's own keeps its name, answer schema and label: the human answers it
    as the remote will check it).

    What the remote sent is untrusted: details that do not fit the kind (a custom schema
    or a kind's answer schema that is not a valid JSON schema, an action with no URL or one
    ``ActionQuestion`` refuses) make it a plain text question, which any answer fits. (An authentication step
    is checked first, ``refused_url``: it cannot become text.)
    """
    try:
        return _typed(question, tool_name)
    except UserError:
        return TextQuestion(question=question.question, context=_context(question))


def _typed(question: RemoteQuestion, tool_name: str) -> Question:
    details = question.details
    text = question.question
    context = _context(question)
    kind = question.kind
    if kind == "choice" and question.options:
        multiple = details.get("multiple") is True
        return ChoiceQuestion(
            question=text, options=question.options, multiple=multiple, context=context
        )
    if kind == "confirm":
        return ConfirmQuestion(question=text, context=context)
    if kind == "action":
        return ActionQuestion(
            url=_url(details.get("url")),
            label=_string(details.get("label")),
            question=text,
            context=context,
        )
    if kind == "input":
        argument = _string(details.get("argument")) or "value"
        return InputQuestion(argument=argument, tool=tool_name, question=text, context=context)
    if kind == "custom":
        payload = details.get("payload")
        return CustomQuestion(
            name=_string(details.get("name")) or "custom",
            question=text,
            payload=cast(dict[str, Any], payload) if isinstance(payload, dict) else None,
            schema=question.schema,
            context=context,
        )
    if kind not in QUESTION_KINDS:  # the remote's own kind, with its answer schema
        return KindQuestion(
            kind,
            question=text,
            data=question.data,
            context=context,
            schema=question.schema,
            label=question.label,
        )
    return TextQuestion(question=text, options=question.options, context=context)


def refused_url(question: RemoteQuestion) -> str | None:
    """Why the action question ``question`` (an authentication step) cannot be asked: its
    URL is missing, too long, or not a web page (``ActionQuestion``'s rule); None if it can."""
    try:
        _typed(question, "")
    except UserError as e:
        return str(e)
    return None


def _url(value: Any) -> str:
    if isinstance(value, str) and len(value) > MAX_URL:
        raise UserError(f"the URL is {len(value):,} characters long (at most {MAX_URL:,})")
    return value if isinstance(value, str) else ""


def _context(question: RemoteQuestion) -> str | None:
    return _string(question.details.get("context"))


def _string(value: Any) -> str | None:
    return value[:2_000] if isinstance(value, str) and value else None
