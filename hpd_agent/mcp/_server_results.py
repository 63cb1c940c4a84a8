"""What a served agent's ``tools/call`` returns: the run's result, or (2026-07-28) the
questions it waits on as an ``InputRequiredResult``.

A client reads a run's failure as ``hpd_agent.hosting.public_error`` words it when another
process drives the run: never the lease holder's host and process id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import mcp_types as types

from ..events import RequestEvent
from ..exceptions import RunLeasedError
from ..hosting import public_error
from ..run import RunResult, finished_event
from ..store import RunRecord
from ._server_forms import form_for

__all__ = ["asking", "record_result", "text_result", "tool_result"]


def tool_result(result: RunResult, agent_name: str, why: str | None = None) -> types.CallToolResult:
    """The ``tools/call`` result of a finished run: its output text, or what ended it."""
    finished = finished_event(result, agent_name)
    if result.status == "completed":
        return text_result(finished.output or "", error=False)
    if result.status == "cancelled":
        return text_result(f"The run was cancelled: {why or 'it was stopped'}.", error=True)
    error = finished.error
    if isinstance(result.error, RunLeasedError):
        error = public_error(result.error, result.run_id)
    return text_result(f"The run {result.status}: {error or 'no output'}", error=True)


def record_result(record: RunRecord) -> types.CallToolResult:
    """The result of a stored run that ended before this retry came."""
    if record.status == "completed":
        return text_result(record.output or "", error=False)
    return text_result(f"The run {record.status}: {record.error or 'no output'}", error=True)


def asking(
    run_id: str, requests: Sequence[RequestEvent], notes: dict[str, str]
) -> types.InputRequiredResult:
    """The ``InputRequiredResult`` asking ``requests`` (one elicitation each, keyed by its
    request id; a refused answer's reason, popped from ``notes``, added to its message),
    with the ``requestState`` naming the run. With no request it asks nothing: the client
    retries with the state alone."""
    asked: dict[str, types.InputRequest] = {}
    for request in requests:
        form = form_for(request, notes.pop(request.request_id, None))
        asked[request.request_id] = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=form.message, requested_schema=form.schema)
        )
    state = json.dumps({"run": run_id})
    return types.InputRequiredResult(input_requests=asked or None, request_state=state)


def text_result(text: str, *, error: bool) -> types.CallToolResult:
    """A result of one text block."""
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)
