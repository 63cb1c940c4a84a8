"""How litellm's failures become hpd_agent's ``ModelError`` types, and the API-key check
that fails before any request is sent. Imported only by ``hpd_agent.models.litellm``."""

from __future__ import annotations

import email.utils
import importlib
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ..exceptions import (
    ContextWindowExceededError,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from ._keys import no_key_error

__all__ = ["KEY_HINT", "check_credentials", "mapped", "refused", "retry_after"]

# Typed as Any: litellm resolves most names lazily, which a type checker cannot follow.
litellm: Any = importlib.import_module("litellm")
openai: Any = importlib.import_module("openai")

KEY_HINT = "or pass api_key=... to the model"

# Placeholder key for a keyless OpenAI-compatible server: the OpenAI client insists on one.
_NO_KEY = "sk-no-key"

# The key variable litellm reads, where it is not "<PROVIDER>_API_KEY".
_KEY_VARIABLES = {
    "gemini": "GEMINI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "vertex_ai": "GOOGLE_APPLICATION_CREDENTIALS",
    "bedrock": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    "sagemaker": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
    "huggingface": "HF_TOKEN",
}

# How providers and SDKs say that no key was found (litellm maps some of these to a 500).
_NO_KEY_PHRASES = (
    "missing credentials",
    "api_key client option must be set",
    "missing api key",
    "api key not found",
    "no api key",
)

# litellm's prefixes in front of the provider's message ("litellm.RateLimitError: ...").
_LITELLM_PREFIX = re.compile(r"^litellm\.\w+:\s*(\w+Error:\s*)?(\w+Exception\s*-\s*)?")


def _provider(model: str) -> str:
    try:
        return str(litellm.get_llm_provider(model)[1])
    except Exception:  # an unknown provider: litellm's own error comes with the request
        return model.split("/", 1)[0]


def _key_variable(model: str) -> str:
    """The environment variable that holds ``model``'s API key, as litellm reads it."""
    provider = _provider(model)
    return _KEY_VARIABLES.get(provider, f"{provider.upper()}_API_KEY")


def check_credentials(model: str, kwargs: dict[str, Any], *, hint: str = KEY_HINT) -> None:
    """Fail at once (no request, no retries) when the provider's API key is not set.

    With ``api_base`` and no key anywhere, a placeholder key goes instead: servers of one's
    own (llama.cpp, vLLM, ...) need none, and a server that does answers 401, which becomes
    ``ModelAuthenticationError`` like any rejected key.
    """
    if kwargs.get("api_key"):
        return
    try:
        env: Mapping[str, Any] = litellm.validate_environment(model)
    except Exception:  # an unknown provider: litellm's own error comes with the request
        return
    missing = [str(k) for k in env.get("missing_keys") or () if _is_secret(str(k))]
    if not missing:
        return
    if kwargs.get("api_base"):
        kwargs["api_key"] = _NO_KEY
        return
    raise no_key_error(model, missing, hint, provider=_provider(model))


def _is_secret(variable: str) -> bool:
    return any(word in variable for word in ("KEY", "TOKEN", "SECRET", "CREDENTIALS"))


def _auth_message(model: str, detail: str, api_key: str | None) -> str:
    if api_key == _NO_KEY:
        return f"{model}: the server wants an API key ({detail}): pass api_key=..."
    if api_key:
        return f"{model}: the provider rejected the api_key given to the model ({detail})"
    variable = _key_variable(model)
    if any(p in detail.lower() for p in _NO_KEY_PHRASES):
        return f"{model}: no API key: set the {variable} environment variable"
    return f"{model}: the provider rejected the API key ({detail}): check {variable}"


def retry_after(error: BaseException | None) -> float | None:
    """Seconds the provider asked us to wait (``Retry-After``/``retry-after-ms``), if any."""
    if error is None:
        return None
    headers: Any = getattr(error, "litellm_response_headers", None)
    if headers is None:
        response = getattr(error, "response", None)
        headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
    except (AttributeError, TypeError, ValueError):
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # an HTTP date
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def mapped(model: str, error: Exception, kwargs: Mapping[str, Any]) -> ModelError:
    """``_map_error`` for a request sent with ``kwargs``."""
    return _map_error(model, error, api_key=kwargs.get("api_key"), api_base=kwargs.get("api_base"))


def refused(error: BaseException) -> bool:
    """Whether ``error`` says a connection was refused: it is raised without litellm's chain
    of wrappers behind it (its one line names the address) and never retried."""
    return bool(getattr(error, "refused", False))


def _address(error: BaseException, api_base: str | None) -> str:
    """The address a refused connection went to: ``api_base``, else host:port if known."""
    for e in _chain(error):
        host, port = getattr(e, "host", None), getattr(e, "port", None)
        if api_base is None and isinstance(host, str) and port is not None:
            return f"{host}:{port}"
    return str(api_base or "the provider's address")


def _refused_error(model: str, error: Exception, api_base: str | None) -> ModelError:
    """Nobody listens at the address (a local server not started): said in one line, and
    marked so that it is raised without litellm's chain behind it and never retried."""
    refused = ModelUnavailableError(
        f"{model}: nothing is listening at {_address(error, api_base)} (connection refused): "
        "is the server running?",
        provider=str(getattr(error, "llm_provider", None) or model),
    )
    refused.refused = True  # pyright: ignore[reportAttributeAccessIssue]
    return refused


def _map_error(
    model: str, error: Exception, *, api_key: str | None = None, api_base: str | None = None
) -> ModelError:
    """Translate a litellm/openai exception into the matching ``ModelError`` subclass.

    ``api_key``: the key the request carried, if one was given (a rejection then names it
    instead of the environment variable). ``api_base``: the endpoint it went to, if given (a
    refused connection names it).
    """
    status: int | None = getattr(error, "status_code", None)
    detail = getattr(error, "message", None) or str(error) or type(error).__name__
    # One line, without litellm's class-name prefixes: what the provider said.
    detail = _LITELLM_PREFIX.sub("", " ".join(str(detail).split())) or type(error).__name__
    provider = getattr(error, "llm_provider", None) or model
    message = f"{model}: {detail}"
    kind: type[ModelError]
    # Classes first, then the HTTP status: litellm's class is not always the precise one
    # (a 401 can arrive as a BadRequestError, a refused connection as a 500).
    if isinstance(error, litellm.ContextWindowExceededError):
        kind = ContextWindowExceededError
    elif (
        status in (401, 403)
        or isinstance(error, (litellm.AuthenticationError, litellm.PermissionDeniedError))
        or any(p in detail.lower() for p in _NO_KEY_PHRASES)
    ):
        kind = ModelAuthenticationError
        message = _auth_message(model, detail, api_key)
    elif status == 429 or isinstance(error, litellm.RateLimitError):
        kind = ModelRateLimitError
    elif _caused_by(error, (ConnectionRefusedError,)):
        # Before the timeout test: litellm wraps a refused connection as a 500 or a timeout.
        return _refused_error(model, error, api_base)
    elif _caused_by(error, _timeout_types()):
        kind = ModelTimeoutError
        message = f"{model}: timed out: {detail}"
    elif _caused_by(error, _connection_types()):
        kind = ModelTimeoutError
        message = f"{model}: could not reach the provider: {detail}"
    elif status == 404 or isinstance(error, litellm.NotFoundError):
        kind = ModelNotFoundError
    elif (status is not None and status >= 500) or isinstance(
        error,
        (litellm.InternalServerError, litellm.ServiceUnavailableError, litellm.BadGatewayError),
    ):
        kind = ModelUnavailableError
    elif isinstance(
        error, (litellm.BadRequestError, litellm.UnprocessableEntityError)
    ) or status in (400, 422):
        kind = ModelBadRequestError
    elif isinstance(error, litellm.APIConnectionError):
        kind = ModelTimeoutError
        message = f"{model}: could not reach the provider: {detail}"
    else:
        kind = ModelError
    return kind(message, status_code=status, provider=str(provider))


def _timeout_types() -> tuple[type[BaseException], ...]:
    httpx: Any = importlib.import_module("httpx")
    return (litellm.Timeout, openai.APITimeoutError, httpx.TimeoutException, TimeoutError)


def _connection_types() -> tuple[type[BaseException], ...]:
    httpx: Any = importlib.import_module("httpx")
    # Not openai.APIConnectionError: litellm raises its subclass for failures of every kind.
    return (httpx.ConnectError, ConnectionError)


def _caused_by(error: BaseException, types: tuple[type[BaseException], ...]) -> bool:
    """Whether ``error`` or anything in its cause chain is one of ``types``."""
    return any(isinstance(e, types) for e in _chain(error))


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every error linked to it (causes, contexts, litellm's originals)."""
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        linked: list[Any] = [e.__cause__, e.__context__, getattr(e, "original_exception", None)]
        todo.extend(x for x in linked if isinstance(x, BaseException))
