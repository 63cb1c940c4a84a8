"""What a served agent's ``tools/call`` returns: the run's result, or (2026-07-28) the
questions it waits on as an ``InputRequiredResult``.

A client reads how a run ended as ``hpd_agent.hosting.outcome_of`` says it (one run's
result or a stored run's record alike): its failure never names the lease holder's host and
process id, nor the run's id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import mcp_types as types

from ..events import RequestEvent
from ..hosting import Outcome, form_for, outcome_of
from ..store import RunRecord
from ._asker import result_meta
from ._server_runs import MCP_CLIENT

__all__ = ["asking", "record_result", "text_result", "tool_result"]


def tool_result(outcome: Outcome, why: str | None = None) -> types.CallToolResult:
    """The ``tools/call`` result of a finished run: its output text, or what ended it."""
    if outcome.status == "completed":
        return text_result(outcome.output or "", error=False)
    if outcome.status == "cancelled":
        return text_result(f"The run was cancelled: {why or 'it was stopped'}.", error=True)
    return text_result(f"The run {outcome.status}: {outcome.error or 'no output'}", error=True)


def record_result(record: RunRecord) -> types.CallToolResult:
    """The result of a stored run that ended before this retry came."""
    return tool_result(outcome_of(record))


def asking(
    run_id: str, requests: Sequence[RequestEvent], notes: dict[str, str]
) -> types.InputRequiredResult:
    """The ``InputRequiredResult`` asking ``requests`` (one elicitation each, keyed by its
    request id; a refused answer's reason, popped from ``notes``, added to its message),
    with the ``requestState`` naming the run. With no request it asks nothing: the client
    retries with the state alone."""
    forms = [form_for(r, notes.pop(r.request_id, None), by=MCP_CLIENT) for r in requests]
    asked: dict[str, types.InputRequest] = {
        form.request_id: types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=form.message, requested_schema=form.schema)
        )
        for form in forms
    }
    state = json.dumps({"run": run_id})
    return types.InputRequiredResult(
        input_requests=asked or None,
        request_state=state,
        _meta=result_meta(forms) if forms else None,  # who asks each (``_asker``)
    )


def text_result(text: str, *, error: bool) -> types.CallToolResult:
    """A result of one text block."""
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)
