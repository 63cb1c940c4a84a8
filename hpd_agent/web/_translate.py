"""A run's own events turned into AG-UI events, one hpd_agent event at a time.

Every agent-as-tool call becomes a subagent (``SUBAGENT_STARTED`` ... ``SUBAGENT_FINISHED`` /
``SUBAGENT_ERROR``) and every event of that agent carries its ``subagentRunId``; text becomes
``TEXT_MESSAGE_*``, tool calls ``TOOL_CALL_*``. Ids are derived from the (secret) run id and
the call ids, so a resumed run maps a call to the same AG-UI id as before: a tool call the
client already saw start is not announced again, and its result refers to the original id.
Run-level events (RUN_STARTED, snapshots, RUN_FINISHED) belong to the caller (``_threads``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from ..events import (
    AgentFinished,
    AgentStarted,
    ClarificationResolved,
    Event,
    PermissionResolved,
    RequestEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ._view import ThreadView

__all__ = ["Located", "Translator"]

Path = tuple[str, ...]


@dataclass(slots=True)
class Located:
    """Where a request was raised, in AG-UI ids."""

    tool_call_id: str | None
    subagent_run_id: str | None


@dataclass(slots=True)
class _Scope:
    """One agent invocation (the root, or a subagent) while it runs."""

    sid: str | None
    text_id: str | None = None
    turn_id: str | None = None
    requests: list[str] = field(default_factory=list[str])


def _digest(*parts: str) -> str:
    return hashlib.blake2b("|".join(parts).encode(), digest_size=8).hexdigest()


class Translator:
    """Translates one root run's events for a thread whose clients saw ``view`` so far.

    Args:
        run_id: The hpd_agent run id (never sent to clients; ids are derived from it).
        view: What the thread's clients already saw (tool calls started and finished).
    """

    def __init__(self, run_id: str, view: ThreadView) -> None:
        self._run_id = run_id
        self._view = view
        self._open: dict[Path, list[_Scope]] = {}
        self._root = _Scope(sid=None)
        self.located: dict[str, Located] = {}
        """Every request seen, by id: its tool call and subagent in AG-UI ids."""

    # -- ids -------------------------------------------------------------------------------
    def _scope(self, path: Path) -> _Scope:
        # Parallel calls of one agent share its path; events then go to the latest one.
        stack = self._open.get(path)
        if stack:
            return stack[-1]
        return self._root if len(path) <= 1 else self._scope(path[:-1])

    def tool_id(self, path: Path, call_id: str) -> str:
        """The AG-UI id of the tool call ``call_id`` made by the agent at ``path``."""
        scope = self._scope(path)
        return "tc_" + _digest(self._run_id, scope.sid or "", call_id)

    # -- translation -----------------------------------------------------------------------
    def translate(self, event: Event) -> list[BaseEvent]:
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
        return []

    def _text(self, event: TextDelta) -> list[BaseEvent]:
        scope = self._scope(event.agent_path)
        out: list[BaseEvent] = []
        if scope.text_id is None:
            if scope.turn_id is None:
                scope.turn_id = "msg_" + secrets.token_hex(8)
            scope.text_id = scope.turn_id
            out.append(
                TextMessageStartEvent(
                    message_id=scope.text_id, role="assistant", subagent_run_id=scope.sid
                )
            )
        out.append(
            TextMessageContentEvent(
                message_id=scope.text_id, delta=event.text, subagent_run_id=scope.sid
            )
        )
        return out

    def _end_text(self, scope: _Scope) -> list[BaseEvent]:
        if scope.text_id is None:
            return []
        end = TextMessageEndEvent(message_id=scope.text_id, subagent_run_id=scope.sid)
        scope.text_id = None
        return [end]

    def _tool_started(self, event: ToolCallStarted) -> list[BaseEvent]:
        scope = self._scope(event.agent_path)
        out = self._end_text(scope)
        call_id = self.tool_id(event.agent_path, event.tool_call_id)
        if call_id in self._view.started:
            return out  # a resumed run re-enters a call the client saw start
        if scope.turn_id is None:
            scope.turn_id = "msg_" + secrets.token_hex(8)
        sid = scope.sid
        out += [
            ToolCallStartEvent(
                tool_call_id=call_id,
                tool_call_name=event.tool_name,
                parent_message_id=scope.turn_id,
                subagent_run_id=sid,
            ),
            # AG-UI carries argument text that must parse as JSON (ag-ui-validate AGUI204):
            # the dict as JSON, so "{}" when the model's text did not parse (that text stays
            # on the run's own event, ``raw_arguments``; the call's result says what was wrong).
            ToolCallArgsEvent(
                tool_call_id=call_id,
                delta=json.dumps(event.arguments, ensure_ascii=False),
                subagent_run_id=sid,
            ),
            ToolCallEndEvent(tool_call_id=call_id, subagent_run_id=sid),
        ]
        return out

    def _tool_finished(self, event: ToolCallFinished) -> list[BaseEvent]:
        scope = self._scope(event.agent_path)
        scope.turn_id = None  # the batch runs: the agent's next words are a new message
        call_id = self.tool_id(event.agent_path, event.tool_call_id)
        if call_id in self._view.finished or call_id not in self._view.started:
            return []
        return [
            ToolCallResultEvent(
                message_id="tr_" + call_id,
                tool_call_id=call_id,
                content=event.result,
                role="tool",
                subagent_run_id=scope.sid,
            )
        ]

    def _agent_started(self, event: AgentStarted) -> list[BaseEvent]:
        parent = self._scope(event.agent_path[:-1])
        parent_call = self.tool_id(event.agent_path[:-1], event.tool_call_id or "")
        sid = "sa_" + _digest(self._run_id, parent_call)
        self._open.setdefault(event.agent_path, []).append(_Scope(sid=sid))
        return [
            SubagentStartedEvent(
                subagent_run_id=sid,
                name=event.agent_name,
                parent_subagent_run_id=parent.sid,
                parent_tool_call_id=parent_call,
            )
        ]

    def _agent_finished(self, event: AgentFinished) -> list[BaseEvent]:
        stack = self._open.get(event.agent_path)
        if event.depth == 0 or not stack:
            return self._end_text(self._scope(event.agent_path))
        scope = stack.pop()
        out = self._end_text(scope)
        assert scope.sid is not None
        if event.status == "completed":
            outcome = SubagentFinishedSuccessOutcome()
            out.append(
                SubagentFinishedEvent(
                    subagent_run_id=scope.sid, result=event.output, outcome=outcome
                )
            )
        elif event.status == "interrupted":
            suspended = SubagentFinishedSuspendedOutcome(interrupt_ids=scope.requests)
            out.append(SubagentFinishedEvent(subagent_run_id=scope.sid, outcome=suspended))
        else:
            message = event.error or f"{event.agent_name} {event.status}"
            out.append(
                SubagentErrorEvent(subagent_run_id=scope.sid, message=message, code=event.status)
            )
        return out

    def _request(self, event: RequestEvent) -> list[BaseEvent]:
        scope = self._scope(event.agent_path)
        call = event.tool_call_id
        tool_call = None if call is None else self.tool_id(event.agent_path, call)
        self.located[event.request_id] = Located(tool_call, scope.sid)
        if event.request_id not in scope.requests:
            scope.requests.append(event.request_id)
        return []  # the caller builds the request's CUSTOM event from the stored record

    def _resolved(self, event: ClarificationResolved | PermissionResolved) -> BaseEvent:
        scope = self._scope(event.agent_path)
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

    def close(self) -> list[BaseEvent]:
        """End every open text message (the run is over)."""
        out = self._end_text(self._root)
        for stack in self._open.values():
            for scope in stack:
                out += self._end_text(scope)
        return out
