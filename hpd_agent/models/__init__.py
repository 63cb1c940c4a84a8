"""The model seam: what the agent loop needs from an LLM, and how a model string resolves.

``Model`` is the one interface the loop calls. ``LiteLLMModel`` (in ``hpd_agent.models.litellm``,
the only module that imports litellm) serves any provider litellm knows; the scripted models
of ``hpd_agent.testing`` serve tests and offline demos.
"""

from __future__ import annotations

import importlib
import re
import sys
import threading
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ..exceptions import ModelError, UserError
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
    # Imported on first use of a model string: importing litellm takes seconds. If building
    # the agent started that import in the background, this waits for it to finish.
    _loader.wait(name)
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


class _Loader:
    """Imports ``hpd_agent.models.litellm`` (and so litellm, seconds of work) in a
    thread, started when the first agent with a model string is built: by the agent's first
    request the import is done or under way, and the request waits only for what is left."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._imported = threading.Event()

    def start(self, name: str) -> None:
        with self._lock:
            if self._thread is not None or _LITELLM_MODULE in sys.modules:
                return
            # Not a daemon: the interpreter must not shut down while it holds an import
            # lock (an exit handler that imports would wait for it forever), so a process
            # that ends right after building an agent first lets the import finish.
            self._thread = threading.Thread(
                target=self._load, name="hpd-agent: import litellm", daemon=False
            )
            self._thread.start()

    def _load(self) -> None:
        try:
            module: Any = importlib.import_module(_LITELLM_MODULE)
        except BaseException as e:  # said at first use, in the thread that uses the model
            self._error = e
            return
        finally:
            self._imported.set()
        # What the first request would import: a request already on its way imports it too,
        # each module once (the import lock makes the second importer wait for the first).
        module.preload()

    def wait(self, name: str) -> None:
        """Wait for the background import, if one was started; raise what it raised."""
        if self._thread is None:
            return
        self._imported.wait()
        if self._error is not None:
            error = self._error
            raise ModelError(
                f"model {name!r}: importing litellm failed (in the background, when the agent "
                f"was built): {type(error).__name__}: {error}"
            ) from error


_LITELLM_MODULE = f"{__name__}.litellm"
_loader = _Loader()
register_model_resolver(_litellm_model, prepare=_loader.start)


def __getattr__(name: str) -> Any:
    # LiteLLMModel is loaded on first access: importing litellm takes seconds.
    if name == "LiteLLMModel":
        from .litellm import LiteLLMModel

        return LiteLLMModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
