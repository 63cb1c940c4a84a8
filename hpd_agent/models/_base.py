"""``Model``, the request/response types it speaks, and model-string resolution."""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..exceptions import ModelError, UserError
from ..messages import AssistantMessage, Message, ToolCall, Usage

__all__ = [
    "Model",
    "ModelRequestParams",
    "ModelResolver",
    "ModelResponse",
    "ToolDefinition",
    "check_allow_model_requests",
    "infer_model",
    "prepare_model",
    "register_model_resolver",
    "set_allow_model_requests",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDefinition:
    """What the model is told about one tool.

    Attributes:
        name: The tool's name.
        description: What the tool does, for the model.
        parameters: JSON schema of the arguments object.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI/litellm ``tools`` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRequestParams:
    """Everything besides the messages that one model request carries.

    Attributes:
        tools: The tools the model may call.
        settings: Provider settings (temperature, max_tokens, ...), passed through.
        agent_name: Name of the agent making the request.
        agent_path: Agent names from the root run to this agent.
        turn: Index of this model turn within the agent's run (0 first).
        on_text: Call with each piece of text as it streams, if the model streams.
    """

    tools: Sequence[ToolDefinition] = ()
    settings: Mapping[str, Any] = field(default_factory=dict[str, Any])
    agent_name: str = ""
    agent_path: tuple[str, ...] = ()
    turn: int = 0
    on_text: Callable[[str], None] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelResponse:
    """One model turn's output.

    Attributes:
        text: Text content, if any.
        tool_calls: Tool calls, in the model's order (several mean parallel calls).
        usage: Tokens used by this request.
        streamed: True when ``text`` was already delivered through ``on_text``.
        finish_reason: Why the model stopped, as the provider said (``"stop"``,
            ``"tool_calls"``, ``"length"``, ``"content_filter"``, ...); None if unknown.
            With ``"length"`` (the token limit), a tool call whose arguments do not parse
            is marked ``truncated`` and is not run.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    streamed: bool = False
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        if self.finish_reason == "length" and self.tool_calls:
            marked = tuple(_mark_truncated(c) for c in self.tool_calls)
            object.__setattr__(self, "tool_calls", marked)

    @property
    def truncated(self) -> bool:
        """Whether the token limit cut this response off (``finish_reason == "length"``)."""
        return self.finish_reason == "length"

    def to_message(self) -> AssistantMessage:
        """The assistant message that records this response in the conversation."""
        return AssistantMessage(content=self.text, tool_calls=self.tool_calls, usage=self.usage)


def _mark_truncated(call: ToolCall) -> ToolCall:
    """``call``, marked truncated when its arguments are not a whole JSON object."""
    if call.truncated:
        return call
    try:
        whole = isinstance(json.loads(call.arguments), dict)
    except (ValueError, RecursionError):
        whole = False
    return call if whole else replace(call, truncated=True)


class Model(ABC):
    """An LLM the agent loop can call. Subclass it to plug in any backend.

    Attributes:
        name: A label for logs, traces and events.
        provider: Who serves the model, for traces (``gen_ai.provider.name``); None if
            unknown.
    """

    name: str = "model"
    provider: str | None = None

    @abstractmethod
    async def request(
        self, messages: Sequence[Message], params: ModelRequestParams
    ) -> ModelResponse:
        """Send the conversation and return the model's next turn.

        Implementations that stream call ``params.on_text`` with each text piece and return
        ``streamed=True``. Failures raise a ``ModelError`` subclass.
        """


_allow_model_requests = os.environ.get("HPD_AGENT_ALLOW_MODEL_REQUESTS", "1") != "0"


def set_allow_model_requests(allow: bool) -> bool:
    """Allow or forbid requests to real LLM providers process-wide; returns the old setting.

    Test suites call ``set_allow_model_requests(False)`` so no test can reach a real API; the
    environment variable ``HPD_AGENT_ALLOW_MODEL_REQUESTS=0`` does the same from outside.
    """
    global _allow_model_requests
    old = _allow_model_requests
    _allow_model_requests = allow
    return old


def check_allow_model_requests(model_name: str) -> None:
    """Raise ``ModelError`` if real model requests are forbidden (see the setter)."""
    if not _allow_model_requests:
        raise ModelError(
            f"Real model requests are disabled (model {model_name!r}); "
            "use hpd_agent.testing.ScriptedModel or FunctionModel, or "
            "set_allow_model_requests(True)."
        )


ModelResolver = Callable[..., Model]
"""Turns a model string into a ``Model`` (see ``register_model_resolver``): called as
``resolver(name)``, or ``resolver(name, api_base=..., api_key=...)`` with those given."""

_resolvers: list[tuple[ModelResolver, Callable[[str], None] | None]] = []


def register_model_resolver(
    resolver: ModelResolver, *, prepare: Callable[[str], None] | None = None
) -> None:
    """Make ``resolver`` the one that turns model strings into models (the last one wins).

    ``hpd_agent.models`` registers the litellm resolver, which imports litellm only on first
    use of a string model, so offline paths never pay for it. A resolver gets ``api_base``
    and ``api_key`` as keyword arguments when the agent was given them.

    Args:
        resolver: Turns a model string into a ``Model``.
        prepare: Called with the model string when an agent is built with one, long before
            the model is first used; it must return at once (litellm's starts importing
            litellm in a background thread, so the first request does not wait for it).
    """
    _resolvers.append((resolver, prepare))


def prepare_model(model: str | Model) -> None:
    """Let the registered resolver get ready for ``model`` (see ``register_model_resolver``);
    returns at once. Nothing happens for a ``Model`` object."""
    if isinstance(model, str) and model and _resolvers:
        prepare = _resolvers[-1][1]
        if prepare is not None:
            prepare(model)


def infer_model(
    model: str | Model, *, api_base: str | None = None, api_key: str | None = None
) -> Model:
    """Resolve ``Agent(model=...)``: a ``Model`` is used as is; a string goes to the resolver
    registered last (litellm's by default: any provider litellm knows).

    Args:
        model: A ``Model``, or a model string such as ``"openai/gpt-4o-mini"``.
        api_base: For a string: the endpoint of an OpenAI-compatible server (passed to the
            resolver; litellm's makes a ``LiteLLMModel`` served there).
        api_key: For a string: the API key (default: the provider's environment variable).

    Raises:
        UserError: ``model`` is neither, or ``api_base``/``api_key`` came with a ``Model``.
    """
    if isinstance(model, Model):
        if api_base is not None or api_key is not None:
            raise UserError("api_base/api_key go with a model string; a Model object takes its own")
        return model
    if isinstance(model, str) and model:  # pyright: ignore[reportUnnecessaryIsInstance]
        if not _resolvers:
            raise UserError(
                f"no model resolver is registered for {model!r}: import hpd_agent.models"
            )
        given = (("api_base", api_base), ("api_key", api_key))
        return _resolvers[-1][0](model, **{k: v for k, v in given if v is not None})
    raise UserError(f"model must be a litellm model string or a Model, got {model!r}")
