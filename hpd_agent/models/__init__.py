"""The model seam: what the agent loop needs from an LLM, and how a model string resolves.

``Model`` is the one interface the loop calls. ``LiteLLMModel`` (in ``hpd_agent.models.litellm``,
the only module that imports litellm) serves any provider litellm knows; the scripted models
of ``hpd_agent.testing`` serve tests and offline demos.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError
from ._base import (
    Model,
    ModelRequestParams,
    ModelResponse,
    ToolDefinition,
    check_allow_model_requests,
    infer_model,
    register_model_resolver,
    set_allow_model_requests,
)

if TYPE_CHECKING:
    from .litellm import LiteLLMModel

__all__ = [
    "LiteLLMModel",
    "Model",
    "ModelRequestParams",
    "ModelResponse",
    "ToolDefinition",
    "check_allow_model_requests",
    "infer_model",
    "litellm_name",
    "set_allow_model_requests",
]


def _litellm_model(name: str, **endpoint: Any) -> Model:
    # Imported on first use of a model string: importing litellm takes seconds.
    from .litellm import LiteLLMModel, litellm

    providers = frozenset(str(getattr(p, "value", p)) for p in litellm.provider_list)
    return LiteLLMModel(litellm_name(name, providers), **endpoint)


# `provider:model` as other frameworks spell it; a prefix with a dot or a slash is part of
# a name litellm reads itself (`ollama/llama3:8b`, Bedrock's `...-v1:0`).
_COLON_FORM = re.compile(r"([A-Za-z][A-Za-z0-9_-]*):(.+)")


def litellm_name(name: str, providers: Collection[str]) -> str:
    """``name`` in litellm's ``provider/model`` spelling: ``"openai:gpt-4o"`` becomes
    ``"openai/gpt-4o"``; a name already in litellm's spelling is returned as it is.

    Args:
        name: The model string given to ``Agent(model=...)``.
        providers: The providers litellm knows (``litellm.provider_list``).

    Raises:
        UserError: ``name`` is ``prefix:model`` and ``prefix`` is no provider litellm knows.
    """
    m = _COLON_FORM.fullmatch(name)
    if m is None or m.group(1) == "ft":  # `ft:gpt-4o-mini:org:...`: OpenAI's fine-tunes
        return name
    provider, model = m.group(1), m.group(2)
    if provider in providers:
        return f"{provider}/{model}"
    if provider.lower() in providers:
        return f"{provider.lower()}/{model}"
    raise UserError(
        f"model {name!r}: {provider!r} is not a provider litellm knows. litellm spells a "
        f"model 'provider/model' (for example 'openai/gpt-4o'; here '{provider}/{model}' if "
        f"{provider!r} is the provider); see https://docs.litellm.ai/docs/providers"
    )


register_model_resolver(_litellm_model)


def __getattr__(name: str) -> Any:
    # LiteLLMModel is loaded on first access: importing litellm takes seconds.
    if name == "LiteLLMModel":
        from .litellm import LiteLLMModel

        return LiteLLMModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
