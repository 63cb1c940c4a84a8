"""The body rules of the POST routes beyond the guard's (``hpd_agent.hosting.Guard``: Host,
Origin, token, ``Content-Type: application/json``, at most ``MAX_BODY`` bytes): a body is
JSON nesting at most ``MAX_DEPTH`` arrays/objects deep (400 otherwise).
"""

from __future__ import annotations

import json
from typing import Any

from ..hosting import nests_deeper

__all__ = ["MAX_BODY", "MAX_DEPTH", "BodyError", "parse_body"]

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
