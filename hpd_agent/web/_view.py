"""A thread's conversation folded from its AG-UI events: messages and the tool calls sent.

The server records every AG-UI event it sends on a thread; folding them gives the thread's
messages (for ``MESSAGES_SNAPSHOT`` and ``GET /threads/{id}/messages``) and which tool calls
a client has already seen start or finish, so a resumed run does not announce them again. The
fold works the same on events just sent and on events reloaded after a server restart.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    Message,
    MessagesSnapshotEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)

__all__ = ["ThreadView"]


class ThreadView:
    """The messages of one thread and the tool call ids its clients have seen."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.started: set[str] = set()
        """Tool call ids announced with TOOL_CALL_START (or known from a snapshot)."""
        self.finished: set[str] = set()
        """Tool call ids whose TOOL_CALL_RESULT was sent."""
        self._assistant: dict[str, AssistantMessage] = {}
        self._calls: dict[str, ToolCall] = {}

    def fold(self, event: BaseEvent) -> None:
        """Take one sent event into account."""
        if isinstance(event, TextMessageStartEvent):
            self._message(event.message_id, event.subagent_run_id)
        elif isinstance(event, TextMessageContentEvent):
            message = self._assistant.get(event.message_id)
            if message is not None:
                message.content = (message.content or "") + event.delta
        elif isinstance(event, ToolCallStartEvent):
            self._start_call(event)
        elif isinstance(event, ToolCallArgsEvent):
            call = self._calls.get(event.tool_call_id)
            if call is not None:
                call.function.arguments += event.delta
        elif isinstance(event, ToolCallResultEvent):
            self.finished.add(event.tool_call_id)
            self.messages.append(
                ToolMessage(
                    id=event.message_id,
                    tool_call_id=event.tool_call_id,
                    content=event.content,
                    subagent_run_id=event.subagent_run_id,
                )
            )
        elif isinstance(event, MessagesSnapshotEvent):
            self._snapshot(event.messages)

    def _message(self, message_id: str, subagent_run_id: str | None) -> AssistantMessage:
        message = self._assistant.get(message_id)
        if message is None:
            message = AssistantMessage(id=message_id, subagent_run_id=subagent_run_id)
            self._assistant[message_id] = message
            self.messages.append(message)
        return message

    def _start_call(self, event: ToolCallStartEvent) -> None:
        self.started.add(event.tool_call_id)
        parent = event.parent_message_id or f"msg_{event.tool_call_id}"
        message = self._message(parent, event.subagent_run_id)
        call = ToolCall(
            id=event.tool_call_id,
            function=FunctionCall(name=event.tool_call_name, arguments=""),
        )
        message.tool_calls = [*(message.tool_calls or []), call]
        self._calls[event.tool_call_id] = call

    def _snapshot(self, messages: list[Any]) -> None:
        self.messages = list(messages)
        self._assistant = {}
        self._calls = {}
        for m in self.messages:
            if isinstance(m, AssistantMessage):
                self._assistant[m.id] = m
                for call in m.tool_calls or []:
                    self._calls[call.id] = call
                    self.started.add(call.id)
            elif isinstance(m, ToolMessage):
                self.finished.add(m.tool_call_id)

    def snapshot(self) -> MessagesSnapshotEvent:
        """A ``MESSAGES_SNAPSHOT`` of the thread so far (deep copies: later folds don't leak)."""
        return MessagesSnapshotEvent(messages=[m.model_copy(deep=True) for m in self.messages])
