"""Which environment variable holds a model's API key, told from the model string alone.

Importing litellm takes seconds; the ``hpd-agent`` command says a missing key before it
loads it. The providers here are the common ones whose key litellm reads from fixed
variables (``litellm.validate_environment``: a test checks they agree); a model string whose
provider is not here (or cannot be told without litellm) is left to litellm's own check
(``_litellm_errors.check_credentials``), which every request runs anyway.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from ..exceptions import ModelAuthenticationError

__all__ = ["key_variables", "missing_key", "no_key_error"]

# provider: the variables litellm names when the key is missing (any one will do).
_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    # servers of one's own: litellm wants no key (their address is no secret)
    "ollama": (),
    "ollama_chat": (),
}

# Variables litellm also accepts, unnamed in its message.
_ALSO: dict[str, tuple[str, ...]] = {"anthropic": ("ANTHROPIC_AUTH_TOKEN",)}

# `provider/model`, or `provider:model` (the colon form of other frameworks, whose provider
# ``litellm_name`` reads in any case).
_PREFIXED = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)(/|:)(.+)")


def _provider(model: str) -> str | None:
    prefixed = _PREFIXED.fullmatch(model)
    if prefixed is not None:
        provider = prefixed.group(1)
        return provider.lower() if prefixed.group(2) == ":" else provider
    return None  # a bare name (`gpt-4o-mini`): litellm places it by its lists of models


def key_variables(model: str) -> tuple[str, ...] | None:
    """The environment variables litellm names for ``model``'s key (any one will do; ``()``:
    none is needed); None when that cannot be told without litellm (another provider, a
    bare name such as ``gpt-4o-mini``, which litellm places by its lists of models)."""
    provider = _provider(model)
    return None if provider is None else _VARIABLES.get(provider)


def missing_key(model: str, environ: Mapping[str, str] | None = None) -> tuple[str, ...] | None:
    """The variables to set when ``model`` has no key in ``environ`` (default: the process's);
    ``()`` when one is set (or none is needed); None when litellm must tell (see
    ``key_variables``)."""
    variables = key_variables(model)
    if variables is None:
        return None
    accepted = (*variables, *_ALSO.get(_provider(model) or "", ()))
    env = os.environ if environ is None else environ
    # Set, even empty, counts as litellm counts it: the provider then refuses the key.
    return () if not variables or any(name in env for name in accepted) else variables


def no_key_error(
    model: str, missing: Sequence[str], hint: str, *, provider: str | None = None
) -> ModelAuthenticationError:
    """The error for ``model`` without a key: which variable to set, and ``hint`` (the other
    way to give one); ``provider`` as litellm names it, when known."""
    return ModelAuthenticationError(
        f"{model}: no API key: set the {' or '.join(missing)} environment variable ({hint})",
        provider=provider or _provider(model) or model.split("/", 1)[0],
    )
