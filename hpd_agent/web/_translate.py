"""A run's own events turned into AG-UI events, one hpd_agent event at a time.

Every agent-as-tool call becomes a subagent (``SUBAGENT_STARTED`` ... ``SUBAGENT_FINISHED`` /
``SUBAGENT_ERROR``) and every event of that call carries its ``subagentRunId``: the call's
``invocation_id``, so two parallel calls of one agent are two subagents, each with its own
text, tool calls and requests (an ``invocation_id`` is a digest: it does not reveal the
secret run id). Text becomes ``TEXT_MESSAGE_*``, tool calls ``TOOL_CALL_*``. Tool call ids are
derived from the (secret) run id, the call's ``invocation_id`` and the model's call id, so a
resumed run maps a call to the same AG-UI id as before: a tool call the client already saw
start is not announced again, and its result refers to the original id. Run-level events
(RUN_STARTED, snapshots, RUN_FINISHED) belong to the caller (``_threads``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ag_ui.core import CustomEvent

from ..events import (
    AgentFinished,
    AgentStarted,
    ClarificationResolved,
    Event,
    PermissionResolved,
    RequestEvent,
    RequestExpiring,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ._view import ThreadView
from ._wire import CONTENT_FRAME, Out, Wire, content_keys, json_string

__all__ = ["Located", "Translator", "iso_time", "locate", "subagent_run_id", "tool_call_id"]

_DESCRIPTION_CHARS = 200


@dataclass(slots=True)
class Located:
    """Where a request was raised, in AG-UI ids."""

    tool_call_id: str | None
    subagent_run_id: str | None


def iso_time(seconds: float | None) -> str | None:
    """Seconds since the epoch as the wire writes a time (ISO 8601, UTC, ``Z``)."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def subagent_run_id(event: Event) -> str | None:
    """The AG-UI ``subagentRunId`` of the agent call that produced ``event``: its
    ``invocation_id``; None for the root agent (its events belong to the run itself)."""
    return (event.invocation_id or None) if event.depth > 0 else None


def tool_call_id(run_id: str, sid: str | None, call_id: str) -> str:
    """The AG-UI id of the model's tool call ``call_id`` made by the call ``sid``."""
    return "tc_" + _digest(run_id, sid or "", call_id)


def locate(event: RequestEvent) -> Located:
    """Where ``event`` was raised, from the event alone (live, or a stored request after a
    restart: the same ids)."""
    sid = subagent_run_id(event)
    call = event.tool_call_id
    return Located(None if call is None else tool_call_id(event.run_id, sid, call), sid)


@dataclass(slots=True)
class _Scope:
    """One agent invocation (the root, or a subagent) while it runs."""

    sid: str | None
    text_id: str | None = None
    text_keys: str = ""
    """The open text message's ``content_keys``."""
    pieces: list[str] | None = None
    """The open text message's pieces in the thread's view (``ThreadView.open_pieces``)."""
    turn_id: str | None = None
    requests: list[str] = field(default_factory=list[str])


def _digest(*parts: str) -> str:
    return hashlib.blake2b("|".join(parts).encode(), digest_size=8).hexdigest()


_CONTENT = "TEXT_MESSAGE_CONTENT"


def _event(kind: str, sid: str | None, **fields: Any) -> Wire:
    """The wire dict of an AG-UI event (``_wire``): ``type``, ``timestamp`` (set when it is
    recorded), ``subagentRunId`` when there is one, then ``fields`` without the None ones."""
    out: Wire = {"type": kind, "timestamp": 0}
    if sid is not None:
        out["subagentRunId"] = sid
    for key, value in fields.items():
        if value is not None:
            out[key] = value
    return out


def _content(sid: str, message_id: str, delta: str) -> Wire:
    return {
        "type": _CONTENT,
        "timestamp": 0,
        "subagentRunId": sid,
        "messageId": message_id,
        "delta": delta,
    }


class Translator:
    """Translates one root run's events for a thread whose clients saw ``view`` so far.

    Args:
        run_id: The hpd_agent run id (never sent to clients; ids are derived from it).
        view: What the thread's clients already saw (tool calls started and finished).
    """

    def __init__(self, run_id: str, view: ThreadView) -> None:
        self._run_id = run_id
        self._view = view
        self._root = _Scope(sid=None)
        self._scopes: dict[str, _Scope] = {}  # by invocation_id: one per agent call

    # -- ids -------------------------------------------------------------------------------
    def _scope(self, event: Event) -> _Scope:
        # By invocation_id, not agent path: parallel calls of one agent share their path.
        scope = self._scopes.get(event.invocation_id)
        if scope is None:
            sid = subagent_run_id(event)
            scope = self._root if sid is None else _Scope(sid=sid)
            self._scopes[event.invocation_id] = scope
        return scope

    def _tool_id(self, scope: _Scope, call_id: str) -> str:
        return tool_call_id(self._run_id, scope.sid, call_id)

    # -- translation -----------------------------------------------------------------------
    def translate(self, event: Event) -> list[Out]:
        """The AG-UI events for one run event (often none)."""
        if isinstance(event, TextDelta):
            return [] if event.replayed or not event.text else self._text(event)
        if isinstance(event, ToolCallStarted):
            return self._tool_started(event)
        if isinstance(event, ToolCallFinished):
            return self._tool_finished(event)
        if isinstance(event, AgentStarted):
            return self._agent_started(event) if event.depth > 0 else []
        if isinstance(event, AgentFinished):
            return self._agent_finished(event)
        if isinstance(event, RequestEvent):
            return self._request(event)
        if isinstance(event, ClarificationResolved | PermissionResolved):
            return [] if event.replayed else [self._resolved(event)]
        if isinstance(event, RequestExpiring):
            value = {"id": event.request_id, "expiresAt": iso_time(event.expires_at)}
            sid = self._scope(event).sid
            return [
                CustomEvent(name="hpd_agent.request_expiring", value=value, subagent_run_id=sid)
            ]
        return []

    def piece(self, event: TextDelta, frames: list[str]) -> bool:
        """The run's most frequent event, one more piece of an open text message, made
        straight into its ``TEXT_MESSAGE_CONTENT`` frame, appended to ``frames`` (stamped
        now), and folded into the thread's view: no wire dict, no dispatch. False when it is
        not one (then ``translate`` it)."""
        scope = self._scopes.get(event.invocation_id)
        if scope is None:
            return False
        pieces, text = scope.pieces, event.text
        if pieces is None or not text or event.replayed:
            return False
        now = int(time.time() * 1000)
        frames.append(CONTENT_FRAME % (now, scope.text_keys, json_string(text)))
        pieces.append(text)
        return True

    def _text(self, event: TextDelta) -> list[Out]:
        scope = self._scope(event)
        sid, text_id = scope.sid, scope.text_id
        if text_id is not None:  # the hot path: one more piece of an open message
            if sid is None:
                return [
                    {"type": _CONTENT, "timestamp": 0, "messageId": text_id, "delta": event.text}
                ]
            return [_content(sid, text_id, event.text)]
        if scope.turn_id is None:
            scope.turn_id = "msg_" + secrets.token_hex(8)
        text_id = scope.text_id = scope.turn_id
        scope.text_keys = content_keys(sid, text_id)
        # Folded as the START recorded next made the message (the view's ``open_pieces``).
        scope.pieces = self._view.open_pieces(text_id)
        start = _event("TEXT_MESSAGE_START", sid, messageId=text_id, role="assistant")
        return [start, _event(_CONTENT, sid, messageId=text_id, delta=event.text)]

    def _end_text(self, scope: _Scope) -> list[Out]:
        if scope.text_id is None:
            return []
        end = _event("TEXT_MESSAGE_END", scope.sid, messageId=scope.text_id)
        scope.text_id = scope.pieces = None
        return [end]

    def _tool_started(self, event: ToolCallStarted) -> list[Out]:
        scope = self._scope(event)
        out = self._end_text(scope)
        call_id = self._tool_id(scope, event.tool_call_id)
        if call_id in self._view.started:
            return out  # a resumed run re-enters a call the client saw start
        if scope.turn_id is None:
            scope.turn_id = "msg_" + secrets.token_hex(8)
        sid = scope.sid
        name, parent = event.tool_name, scope.turn_id
        out += [
            _event(
                "TOOL_CALL_START",
                sid,
                toolCallId=call_id,
                toolCallName=name,
                parentMessageId=parent,
            ),
            # AG-UI carries argument text that must parse as JSON (ag-ui-validate AGUI204):
            # the dict as JSON, so "{}" when the model's text did not parse (that text stays
            # on the run's own event, ``raw_arguments``; the call's result says what was wrong).
            _event(
                "TOOL_CALL_ARGS",
                sid,
                toolCallId=call_id,
                delta=json.dumps(event.arguments, ensure_ascii=False),
            ),
            _event("TOOL_CALL_END", sid, toolCallId=call_id),
        ]
        return out

    def _tool_finished(self, event: ToolCallFinished) -> list[Out]:
        scope = self._scope(event)
        scope.turn_id = None  # the batch runs: the agent's next words are a new message
        call_id = self._tool_id(scope, event.tool_call_id)
        if call_id in self._view.finished or call_id not in self._view.started:
            return []
        result = _event(
            "TOOL_CALL_RESULT",
            scope.sid,
            messageId="tr_" + call_id,
            toolCallId=call_id,
            content=event.result,
            role="tool",
        )
        return [result]

    def _agent_started(self, event: AgentStarted) -> list[Out]:
        parent_sid = (event.parent_invocation_id or None) if event.depth > 1 else None
        parent_call = tool_call_id(self._run_id, parent_sid, event.tool_call_id or "")
        scope = self._scope(event)
        if scope.sid is None:
            return []  # no invocation_id: nothing to tell its events apart by
        description = " ".join(event.input.split())
        if len(description) > _DESCRIPTION_CHARS:
            description = description[: _DESCRIPTION_CHARS - 1] + "…"
        started = _event(
            "SUBAGENT_STARTED",
            scope.sid,
            name=event.agent_name,
            description=description or None,
            parentSubagentRunId=parent_sid,
            parentToolCallId=parent_call,
        )
        return [started]

    def _agent_finished(self, event: AgentFinished) -> list[Out]:
        scope = self._scope(event)
        out = self._end_text(scope)
        if scope.sid is None:
            return out
        del self._scopes[event.invocation_id]
        sid = scope.sid
        if event.status == "completed":
            success = {"type": "success"}
            out.append(_event("SUBAGENT_FINISHED", sid, result=event.output, outcome=success))
        elif event.status == "interrupted":
            suspended = {"type": "suspended", "interruptIds": list(scope.requests)}
            out.append(_event("SUBAGENT_FINISHED", sid, outcome=suspended))
        else:
            message = event.error or f"{event.agent_name} {event.status}"
            out.append(_event("SUBAGENT_ERROR", sid, message=message, code=event.status))
        return out

    def _request(self, event: RequestEvent) -> list[Out]:
        scope = self._scope(event)
        if event.request_id not in scope.requests:
            scope.requests.append(event.request_id)
        return []  # the caller builds the request's CUSTOM event from the stored record

    def _resolved(self, event: ClarificationResolved | PermissionResolved) -> Out:
        scope = self._scope(event)
        if event.request_id in scope.requests:
            scope.requests.remove(event.request_id)
        if isinstance(event, PermissionResolved):
            answer: object = {"approved": event.approved, "scope": event.scope}
        else:
            answer = event.answer
        return CustomEvent(
            name="hpd_agent.request_resolved",
            value={"id": event.request_id, "status": event.status, "answer": answer},
            subagent_run_id=scope.sid,
        )

    def close(self) -> list[Out]:
        """End every open text message (the run is over)."""
        out = self._end_text(self._root)
        for scope in self._scopes.values():
            if scope is not self._root:
                out += self._end_text(scope)
        return out
