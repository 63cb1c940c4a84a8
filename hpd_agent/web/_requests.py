"""A pending request as the web sees it: its JSON shape, answer schema and answer checks.

One place says how a question or permission request looks to a browser or an AG-UI client
(the ``hpd_agent.request`` CUSTOM value and the ``Interrupt`` of an interrupt outcome), which
JSON Schema its answer follows, and turns a client's answer into what the store accepts.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import Interrupt

from ..events import ClarificationRequest, PermissionRequest, RequestEvent
from ..exceptions import InvalidAnswerError
from ..permissions import Approve, Decision, Deny
from ..questions import answer_prompt, answer_schema_of, validate_answer
from ..store import RequestRecord
from ._translate import iso_time, locate

__all__ = ["check_web_answer", "interrupt_of", "request_value", "response_schema"]

_PERMISSION_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "properties": {
                "kind": {"const": "approve"},
                "scope": {"enum": ["once", "run", "always"]},
                "match": {"type": "object", "additionalProperties": {"type": "string"}},
                "ttl": {"type": "number", "exclusiveMinimum": 0},
            },
            "required": ["kind"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"kind": {"const": "deny"}, "reason": {"type": "string"}},
            "required": ["kind"],
            "additionalProperties": False,
        },
    ]
}


def response_schema(event: RequestEvent) -> dict[str, Any]:
    """The JSON Schema of a valid answer to ``event``: its kind's (see ``answer_schema_of``)."""
    if isinstance(event, PermissionRequest):
        return _PERMISSION_SCHEMA
    return answer_schema_of(event)


def request_value(record: RequestRecord) -> dict[str, Any]:
    """The ``hpd_agent.request`` CUSTOM value (also listed by ``GET .../requests``).

    ``subagentRunId`` is the asking agent call's (its ``invocation_id``; None for the root
    agent), so two parallel calls of one agent asking at once are told apart.
    """
    event = record.event
    where = locate(event)
    value: dict[str, Any] = {
        "id": record.request_id,
        "kind": record.kind,
        "agentPath": list(record.agent_path),
        "question": record.question,
        "options": list(record.options) if record.options else None,
        "responseSchema": response_schema(event),
        "toolCallId": where.tool_call_id,
        "subagentRunId": where.subagent_run_id,
        "invocationId": event.invocation_id or None,
        "expiresAt": iso_time(record.expires_at),
        # What the card says it wants: the words the console and ``hpd-agent pending`` use.
        "label": answer_prompt(event).label,
    }
    if isinstance(event, ClarificationRequest):
        value["context"] = event.context
        value["data"] = event.data
    else:
        value["toolName"] = event.tool_name
        value["arguments"] = dict(event.arguments)
    return value


def interrupt_of(record: RequestRecord) -> Interrupt:
    """The AG-UI ``Interrupt`` for a pending request of an interrupted run."""
    event = record.event
    where = locate(event)
    confirmation = isinstance(event, PermissionRequest) or event.question_kind == "confirm"
    return Interrupt(
        id=record.request_id,
        reason="confirmation" if confirmation else "input_required",
        message=record.question,
        tool_call_id=where.tool_call_id,
        subagent_run_id=where.subagent_run_id,
        response_schema=response_schema(event),
        expires_at=iso_time(record.expires_at),
    )


def _decision(request_id: str, answer: Any) -> Decision:
    def bad(why: str) -> InvalidAnswerError:
        return InvalidAnswerError(
            f"invalid answer for request {request_id}: {why}", request_id=request_id
        )

    if not isinstance(answer, dict):
        raise bad(
            'expected {"kind": "approve", "scope": "once"|"run"|"always"} or {"kind": "deny"}'
        )
    data: dict[str, Any] = answer  # type: ignore[assignment]
    kind = data.get("kind")
    allowed = {"approve": {"kind", "scope", "match", "ttl"}, "deny": {"kind", "reason"}}.get(
        str(kind)
    )
    if allowed is None:
        raise bad(f'"kind" must be "approve" or "deny", not {kind!r}')
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise bad(f"unknown fields {unknown}")
    if kind == "deny":
        reason = data.get("reason", "")
        if not isinstance(reason, str):
            raise bad('"reason" must be a string')
        return Deny(reason=reason)
    scope = data.get("scope", "once")
    if scope not in ("once", "run", "always"):
        raise bad('"scope" must be "once", "run" or "always"')
    try:
        # "always" (a grant remembered in the server's store) may carry match and ttl.
        return Approve(scope=scope, match=data.get("match"), ttl=data.get("ttl"))
    except ValueError as e:
        raise bad(str(e)) from None


def check_web_answer(record: RequestRecord, answer: Any) -> Any:
    """Check a client's answer without writing it; return what to hand the store.

    Permission answers must be ``{"kind": "approve", "scope": ...}`` or ``{"kind": "deny",
    "reason": ...}`` exactly (no loose words over the wire).

    Raises:
        InvalidAnswerError: The answer does not fit the request.
    """
    event = record.event
    if isinstance(event, PermissionRequest):
        return _decision(record.request_id, answer)
    validate_answer(event, answer)
    return answer
