"""The model seam: what the agent loop needs from an LLM, and how a model string resolves.

``Model`` is the one interface the loop calls. ``LiteLLMModel`` (in ``hpd_agent.models.litellm``,
the only module that imports litellm) serves any provider litellm knows; the scripted models
of ``hpd_agent.testing`` serve tests and offline demos.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    "set_allow_model_requests",
]


def _litellm_model(name: str, **endpoint: Any) -> Model:
    # Imported on first use of a model string: importing litellm takes seconds.
    from .litellm import LiteLLMModel

    return LiteLLMModel(name, **endpoint)


register_model_resolver(_litellm_model)


def __getattr__(name: str) -> Any:
    # LiteLLMModel is loaded on first access: importing litellm takes seconds.
    if name == "LiteLLMModel":
        from .litellm import LiteLLMModel

        return LiteLLMModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
