"""The body rules of the POST routes beyond the guard's (``hpd_agent.hosting.Guard``: Host,
Origin, token, ``Content-Type: application/json``, at most ``MAX_BODY`` bytes): a body is
JSON nesting at most ``MAX_DEPTH`` arrays/objects deep (400 otherwise); an answer route's is
``{"answer": ...}`` or ``{"decline": true}`` (``answer_in``; the inbox's too).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from ..hosting import nests_deeper
from ..questions import Decline

__all__ = ["MAX_BODY", "MAX_DEPTH", "BodyError", "answer_in", "parse_body"]

MAX_BODY = 1 << 20
"""Largest request body accepted (bytes); more gets 413."""

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in a JSON body; deeper gets 400."""


class BodyError(Exception):
    """A refused body: ``status`` (400) and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_body(body: bytes) -> Any:
    """The JSON value of a body already within ``MAX_BODY``.

    Raises:
        BodyError: 400, not JSON or nested deeper than ``MAX_DEPTH``.
    """
    # Counted on the text, before a recursive parser sees it (as the A2A server counts).
    if nests_deeper(body, MAX_DEPTH):
        raise BodyError(400, f"body nests deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(body)
    except ValueError:
        raise BodyError(400, "body is not JSON") from None


def answer_in(body: Any, allowed: Collection[str] = ("answer", "decline")) -> Any:
    """The answer an answer route's body gives: ``{"answer": ...}``, or ``Decline()`` for
    ``{"decline": true}``.

    Args:
        body: The body's JSON value (``parse_body``).
        allowed: The fields the route reads (``answer`` and ``decline``, and any of its own).

    Raises:
        BodyError: 400, anything else.
    """
    if not isinstance(body, dict):
        raise BodyError(400, "body must be a JSON object")
    fields: dict[str, Any] = body  # type: ignore[assignment]
    if ("answer" in fields) == ("decline" in fields):
        raise BodyError(400, 'body must be {"answer": ...} or {"decline": true}')
    unknown = sorted(set(fields) - set(allowed))
    if unknown:
        raise BodyError(400, f"unknown fields {unknown}")
    if "answer" in fields:
        return fields["answer"]
    if fields["decline"] is not True:
        raise BodyError(400, '"decline" must be true (to answer, send {"answer": ...})')
    return Decline()
