"""Conversation messages, and their conversion to the OpenAI/litellm chat format.

Messages are frozen keyword-only dataclasses with a ``kind`` literal; ``Message`` is their
union and ``message_adapter()`` the one pydantic ``TypeAdapter`` that turns them into JSON
and back (the run journal stores them this way).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

__all__ = [
    "AssistantMessage",
    "Message",
    "SystemMessage",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "message_adapter",
    "to_openai",
    "truncated_call_text",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """One tool call requested by the model.

    Attributes:
        id: The model's id for the call; results are matched to calls by it.
        name: The tool's name.
        arguments: The arguments as the model sent them: a JSON text, possibly malformed.
        truncated: The model hit its token limit in the middle of this call (its response
            ended with ``finish_reason="length"`` before the arguments were complete). The
            loop does not run such a call; the model gets ``truncated_call_text`` instead.
    """

    id: str
    name: str
    arguments: str = "{}"
    truncated: bool = False


def truncated_call_text(call: ToolCall) -> str:
    """The tool result a model gets for a call its token limit cut off."""
    return (
        f"Error: the call to {call.name!r} was cut off by the token limit (max_tokens) before "
        "its arguments were complete, so it was not run. Retry with shorter arguments, or "
        "split the work into several smaller calls."
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Token usage of one or more model requests.

    Attributes:
        requests: Number of model requests.
        input_tokens: Prompt tokens.
        output_tokens: Completion tokens.
    """

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, kw_only=True, slots=True)
class SystemMessage:
    """The agent's instructions."""

    content: str
    kind: Literal["system"] = "system"


@dataclass(frozen=True, kw_only=True, slots=True)
class UserMessage:
    """Input from the caller: the prompt of a run, or the query an agent-as-tool received."""

    content: str
    kind: Literal["user"] = "user"


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantMessage:
    """One model turn: text, tool calls, or both."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    kind: Literal["assistant"] = "assistant"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResultMessage:
    """The result of one tool call, sent back to the model keyed by ``tool_call_id``."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    kind: Literal["tool"] = "tool"


Message = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage
"""Any conversation message."""


@functools.cache
def message_adapter() -> TypeAdapter[list[Message]]:
    """The pydantic adapter that (de)serialises a list of messages (built on first use)."""
    return TypeAdapter(list[Annotated[Message, Field(discriminator="kind")]])


def to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Convert messages to the OpenAI chat-completions format that litellm takes."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            item: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _sendable_arguments(c)},
                    }
                    for c in m.tool_calls
                ]
            elif m.content is None:
                # An assistant message needs content or tool calls (an empty, cut-off turn).
                item["content"] = ""
            out.append(item)
        elif isinstance(m, ToolResultMessage):
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif isinstance(m, UserMessage):
            out.append({"role": "user", "content": m.content})
        else:
            out.append({"role": "system", "content": m.content})
    return out


def _sendable_arguments(call: ToolCall) -> str:
    """The call's arguments if they are a JSON object, else ``"{}"``.

    Arguments that do not parse (a call cut off by the token limit, a model's malformed JSON)
    are never echoed back: providers reject them, and a llama.cpp server answers HTTP 500 to
    every later request of the conversation. The call's tool result already told the model
    what was wrong with them.
    """
    if call.truncated:
        return "{}"
    try:
        parsed = json.loads(call.arguments)
    except (ValueError, RecursionError):
        return "{}"
    return call.arguments if isinstance(parsed, dict) else "{}"


def last_user_text(messages: Sequence[Message]) -> str | None:
    """The content of the last user message, if any (handy in FunctionModel functions)."""
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            return m.content
    return None
