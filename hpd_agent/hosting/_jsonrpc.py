"""JSON-RPC 2.0's words, for an adapter that speaks it itself (ACP's stdio wire; the A2A
server's body check): the standard error codes, ``RPCError``, and what the other side sent
read without trusting it (``parse_message``, ``valid_id``, ``error_of``, ``as_object``).
"""

from __future__ import annotations

import json
from typing import Any, cast

from ..exceptions import HpdAgentError
from ..text import bounded
from ._guard import nests_deeper

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RPCError",
    "as_object",
    "error_of",
    "parse_message",
    "valid_id",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RPCError(HpdAgentError):
    """A JSON-RPC error: one received in a response, or one a handler raises to answer.

    Attributes:
        code: The JSON-RPC error code.
        message: What went wrong (bounded when sent).
        data: Optional details.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def payload(self) -> dict[str, Any]:
        """The ``error`` member of a response carrying it."""
        error: dict[str, Any] = {"code": self.code, "message": bounded(self.message, 1_000)}
        if self.data is not None:
            error["data"] = self.data
        return error


def parse_message(line: bytes, max_depth: int) -> dict[str, Any] | RPCError:
    """One message (a JSON object) of ``line``, or the error to answer it with: not JSON,
    not an object, or nesting deeper than ``max_depth`` (checked before parsing)."""
    if nests_deeper(line, max_depth):
        return RPCError(PARSE_ERROR, f"the message nests deeper than {max_depth} levels")
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return RPCError(PARSE_ERROR, "the message is not JSON")
    if not isinstance(value, dict):
        return RPCError(INVALID_REQUEST, "a message must be a JSON object")
    return cast(dict[str, Any], value)


def valid_id(value: Any) -> bool:
    """Whether ``value`` may be a request's id (a string or an integer)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def error_of(error: Any) -> RPCError:
    """The ``error`` member of a response received, as an ``RPCError`` (its message
    bounded; a malformed one an internal error)."""
    if not isinstance(error, dict):
        return RPCError(INTERNAL_ERROR, "the other side sent a malformed error")
    fields = cast(dict[str, Any], error)
    code = fields.get("code")
    message = fields.get("message")
    return RPCError(
        code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
        bounded(message, 1_000) if isinstance(message, str) else "error",
        fields.get("data"),
    )


def as_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one: what the other side sent as
    params or a result, read without trusting its shape."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}
