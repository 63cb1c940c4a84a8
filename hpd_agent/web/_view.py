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
    ToolCall,
    ToolMessage,
)
from pydantic import TypeAdapter

from ._wire import Out

__all__ = ["ThreadView"]

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


class ThreadView:
    """The messages of one thread and the tool call ids its clients have seen."""

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self.started: set[str] = set()
        """Tool call ids announced with TOOL_CALL_START (or known from a snapshot)."""
        self.finished: set[str] = set()
        """Tool call ids whose TOOL_CALL_RESULT was sent."""
        self._assistant: dict[str, AssistantMessage] = {}
        self._calls: dict[str, ToolCall] = {}
        # Text pieces not yet joined into their message: a long answer costs one join,
        # not one copy of everything so far per piece.
        self._pieces: dict[str, list[str]] = {}

    @property
    def messages(self) -> list[Message]:
        """The thread's messages so far."""
        for message_id, pieces in self._pieces.items():
            message = self._assistant.get(message_id)
            if pieces and message is not None:
                message.content = (message.content or "") + "".join(pieces)
                pieces.clear()  # in place: a translator holds it (``open_pieces``)
        return self._messages

    def fold(self, event: Out) -> None:
        """Take one sent event into account (a wire dict, or a model)."""
        if isinstance(event, BaseEvent):
            if isinstance(event, MessagesSnapshotEvent):
                self._snapshot(list(event.messages))
            return  # the translator's events are wire dicts; no other model changes the view
        kind = event["type"]
        if kind == "TEXT_MESSAGE_CONTENT":
            self.piece(event["messageId"], event["delta"])
        elif kind == "TEXT_MESSAGE_START":
            self._message(event["messageId"], event.get("subagentRunId"))
        elif kind == "TEXT_MESSAGE_END":
            self._end_message(event["messageId"])
        elif kind == "TOOL_CALL_START":
            self._start_call(event)
        elif kind == "TOOL_CALL_ARGS":
            call = self._calls.get(event["toolCallId"])
            if call is not None:
                call.function.arguments += event["delta"]
        elif kind == "TOOL_CALL_RESULT":
            self.finished.add(event["toolCallId"])
            self._messages.append(
                ToolMessage(
                    id=event["messageId"],
                    tool_call_id=event["toolCallId"],
                    content=event["content"],
                    subagent_run_id=event.get("subagentRunId"),
                )
            )
        elif kind == "MESSAGES_SNAPSHOT":
            self._snapshot(_MESSAGES.validate_python(event["messages"]))

    def piece(self, message_id: str, delta: str) -> None:
        """Fold a ``TEXT_MESSAGE_CONTENT``: ``delta`` added to message ``message_id``."""
        pieces = self._pieces.get(message_id)
        if pieces is not None:
            pieces.append(delta)
        elif message_id in self._assistant:
            self._pieces[message_id] = [delta]

    def open_pieces(self, message_id: str) -> list[str]:
        """The list the text pieces of message ``message_id`` (about to start) are folded
        into: appending a piece to it folds its ``TEXT_MESSAGE_CONTENT``. The translator's
        hot path holds it while the message is open (``Translator.piece``); it stays the
        message's until its ``TEXT_MESSAGE_END`` is folded (or a snapshot without it)."""
        pieces = self._pieces.get(message_id)
        if pieces is None:
            pieces = self._pieces[message_id] = []
        return pieces

    def _end_message(self, message_id: str) -> None:
        """Fold a ``TEXT_MESSAGE_END``: the message's pieces joined into it."""
        pieces = self._pieces.pop(message_id, None)
        message = self._assistant.get(message_id)
        if pieces and message is not None:
            message.content = (message.content or "") + "".join(pieces)

    def _message(self, message_id: str, subagent_run_id: str | None) -> AssistantMessage:
        message = self._assistant.get(message_id)
        if message is None:
            message = AssistantMessage(id=message_id, subagent_run_id=subagent_run_id)
            self._assistant[message_id] = message
            self._messages.append(message)
        return message

    def _start_call(self, event: dict[str, Any]) -> None:
        call_id: str = event["toolCallId"]
        self.started.add(call_id)
        parent = event.get("parentMessageId") or f"msg_{call_id}"
        message = self._message(parent, event.get("subagentRunId"))
        call = ToolCall(id=call_id, function=FunctionCall(name=event["toolCallName"], arguments=""))
        message.tool_calls = [*(message.tool_calls or []), call]
        self._calls[call_id] = call

    def _snapshot(self, messages: list[Any]) -> None:
        pieces = self._pieces
        for held in pieces.values():
            held.clear()  # what was not joined is not in the snapshot's messages
        self._messages = list(messages)
        self._assistant = {}
        self._calls = {}
        for m in self._messages:
            if isinstance(m, AssistantMessage):
                self._assistant[m.id] = m
                for call in m.tool_calls or []:
                    self._calls[call.id] = call
                    self.started.add(call.id)
            elif isinstance(m, ToolMessage):
                self.finished.add(m.tool_call_id)
        # An open message the snapshot holds goes on taking pieces (into the list held).
        self._pieces = {k: v for k, v in pieces.items() if k in self._assistant}

    def snapshot(self) -> MessagesSnapshotEvent:
        """A ``MESSAGES_SNAPSHOT`` of the thread so far, holding the view's own messages (no
        copies: a run's end makes one): record it at once (``ThreadLog.append`` encodes it
        and folds it back, which changes nothing), later folds change them."""
        return MessagesSnapshotEvent(messages=list(self.messages))
