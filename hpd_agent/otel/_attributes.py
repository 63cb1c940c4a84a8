"""Span and metric names, attribute keys and values, and content as GenAI-conventions JSON.

The attribute names are written out as strings: the semantic-conventions package marks its
GenAI constants as deprecated (and is not a dependency). The message JSON follows the GenAI
conventions' input/output message shape: ``{"role": ..., "parts": [...]}``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..events import ClarificationRequest, PermissionRequest, RequestEvent
from ..messages import AssistantMessage, Message, SystemMessage, ToolCall, UserMessage
from ..models import Model, ModelResponse
from ..permissions import Approve, Deny
from ..text import printable

__all__ = [
    "NAME_LIMIT",
    "SCOPE",
    "UNKNOWN_TOOL",
    "finish_reason",
    "input_messages_json",
    "name",
    "output_messages_json",
    "provider_name",
    "request_kind",
    "request_outcome",
    "request_question",
    "to_json",
]

SCOPE = "hpd_agent"
"""Instrumentation scope name of the tracer and meter."""

NAME_LIMIT = 128
"""Longest name (agent, tool, model, provider, id) kept in a span name or attribute."""

UNKNOWN_TOOL = "unknown_tool"
"""What a call of a tool the agent does not have is named with capture off: the model chose
that name, so it is content."""

# -- attribute keys --------------------------------------------------------------------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"
AGENT_PATH = "hpd_agent.agent.path"
RESUMED = "hpd_agent.resumed"
INVOCATION_ID = "hpd_agent.invocation_id"
PARENT_INVOCATION_ID = "hpd_agent.parent_invocation_id"
REQUEST_ID = "hpd_agent.request.id"
REQUEST_KIND = "hpd_agent.request.kind"
REQUEST_OUTCOME = "hpd_agent.request.outcome"
REQUEST_QUESTION = "hpd_agent.request.question"
REQUEST_ANSWER = "hpd_agent.request.answer"
ANSWERED_BY = "hpd_agent.answered_by"
CHANNEL = "hpd_agent.channel"

# -- metric names ----------------------------------------------------------------------------
TOKEN_USAGE = "gen_ai.client.token.usage"
OPERATION_DURATION = "gen_ai.client.operation.duration"
HUMAN_WAIT = "hpd_agent.human.wait.duration"
REQUESTS_PENDING = "hpd_agent.requests.pending"

# Bucket advice: the GenAI conventions' for tokens and durations; human waits run from a
# scripted instant to a day.
TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]
DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48]
WAIT_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 14400, 86400]

SCRIPTED_PROVIDER = "hpd_agent.scripted"


def provider_name(model: Model) -> str:
    """``gen_ai.provider.name`` of ``model``: its ``provider``, else litellm's for its model
    string (the part before ``/``, or what litellm infers when it is loaded), else the class."""
    if model.provider:
        return model.provider
    spec = getattr(model, "model", None)
    if isinstance(spec, str):
        if "/" in spec:
            return spec.split("/", 1)[0]
        return _litellm_provider(spec) or "openai"
    return type(model).__name__


def _litellm_provider(spec: str) -> str | None:
    import sys

    litellm: Any = sys.modules.get("litellm")  # never imported here: it is slow to load
    if litellm is None:
        return None
    try:
        found: Any = litellm.get_llm_provider(spec)
    except Exception:  # an unknown model: the fallback names it
        return None
    return str(found[1]) if found and found[1] else None


def finish_reason(response: ModelResponse) -> str:
    """The response's finish reason; a model that does not say gets the one its shape implies."""
    if response.finish_reason:
        return response.finish_reason
    return "tool_calls" if response.tool_calls else "stop"


def request_kind(event: RequestEvent) -> str:
    """``permission`` or the question kind (``text``, ``input``, ``choice``, ...)."""
    if isinstance(event, ClarificationRequest):
        return event.question_kind
    return "permission"


def request_outcome(event: RequestEvent, status: str, answer: Any) -> str:
    """``hpd_agent.request.outcome`` of a request that ended with ``status``."""
    if status == "answered":
        if isinstance(event, PermissionRequest):
            return "denied" if isinstance(answer, Deny) else "approved"
        return "answered"
    if status == "expired":
        return "timeout"
    return status  # declined (the human's decision, not an error), cancelled, unavailable


def request_question(event: RequestEvent) -> str:
    """What the human was asked (content: recorded only with capture on)."""
    if isinstance(event, ClarificationRequest):
        return event.question
    return to_json({"tool": event.tool_name, "arguments": event.arguments})


def _plain(value: Any) -> Any:
    if isinstance(value, (Approve, Deny)):
        return {"decision": type(value).__name__.lower(), **dataclasses.asdict(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def to_json(value: Any) -> str:
    """``value`` as compact JSON (dataclasses as objects, anything else as its text)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=_plain, ensure_ascii=False, separators=(",", ":"))


def _tool_call_part(call: ToolCall) -> dict[str, Any]:
    try:
        arguments: Any = json.loads(call.arguments)
    except ValueError:
        arguments = call.arguments  # malformed JSON from the model: kept as sent
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}


def _message(m: Message) -> dict[str, Any]:
    if isinstance(m, AssistantMessage):
        parts: list[dict[str, Any]] = []
        if m.content:
            parts.append({"type": "text", "content": m.content})
        parts.extend(_tool_call_part(c) for c in m.tool_calls)
        return {"role": "assistant", "parts": parts}
    if isinstance(m, (SystemMessage, UserMessage)):
        return {"role": m.kind, "parts": [{"type": "text", "content": m.content}]}
    part = {"type": "tool_call_response", "id": m.tool_call_id, "response": m.content}
    return {"role": "tool", "parts": [part]}


def input_messages_json(messages: Iterable[Message]) -> str:
    """``gen_ai.input.messages``: the conversation sent, instructions included."""
    return to_json([_message(m) for m in messages])


def output_messages_json(response: ModelResponse) -> str:
    """``gen_ai.output.messages``: the model's one output message."""
    message = _message(AssistantMessage(content=response.text, tool_calls=response.tool_calls))
    message["finish_reason"] = finish_reason(response)
    return to_json([message])


def name(text: str) -> str:
    """``text`` fit for a span name or attribute: at most ``NAME_LIMIT`` characters (a longer
    one is cut, ending in ``…``), controls and lone surrogates spelled out (an exporter could
    not encode a lone surrogate)."""
    if len(text) <= NAME_LIMIT and text.isprintable():
        return text  # the usual name: nothing to do
    cut = len(text) > NAME_LIMIT
    text = printable(text[:NAME_LIMIT], one_line=True)
    return text[: NAME_LIMIT - 1] + "…" if cut or len(text) > NAME_LIMIT else text


def path_attribute(path: Sequence[str]) -> tuple[str, ...]:
    """``hpd_agent.agent.path``: agent names, root first, as a string array."""
    return tuple(map(name, path))
