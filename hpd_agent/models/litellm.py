"""``LiteLLMModel``: any provider litellm knows, streamed, with retries and clear errors.

This is the only module of hpd_agent that imports litellm, and it is imported only when a
string model is first used (``Agent(model="openai/gpt-4o-mini")``) or on
``from hpd_agent.models import LiteLLMModel``: offline paths never pay litellm's import time.

litellm is asyncio-only, so this module is the one place in the package that uses asyncio
directly (to say so clearly when a run is on another event loop such as trio).
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import logging
import os
import random
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

# Before litellm is imported: use the price map shipped in the package instead of fetching
# one from the internet on import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")

import anyio

# Typed as Any: litellm resolves most names lazily, which a type checker cannot follow.
litellm: Any = importlib.import_module("litellm")
openai: Any = importlib.import_module("openai")

from ..exceptions import (  # noqa: E402
    ContextWindowExceededError,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
    TransientModelError,
    UserError,
)
from ..messages import Message, ToolCall, Usage, to_openai  # noqa: E402
from ._base import (  # noqa: E402
    Model,
    ModelRequestParams,
    ModelResponse,
    check_allow_model_requests,
)

__all__ = ["LiteLLMModel"]

# What litellm imports lazily during a process's first request (about 0.8 s of it on a
# 2-core VM: proxy types and the tokenizer's encoding), measured with `python -X importtime`.
# ``preload`` imports them ahead of time, in the background thread that imports this module.
_FIRST_REQUEST_MODULES = (
    "litellm.proxy.openai_files_endpoints.common_utils",
    "litellm.litellm_core_utils.default_encoding",
    "litellm._service_logger",
    "litellm.llms.openai_like.chat.handler",
)


def preload() -> None:
    """Import what litellm would import during the first request; best effort (a module a
    later litellm moved is skipped: the first request then imports whatever it needs)."""
    for name in _FIRST_REQUEST_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


# Quiet by default: no "Give Feedback / Get Help" banners on errors, no debug logging. Our
# own exceptions carry what the caller needs. Callbacks the user configured are left alone,
# and LITELLM_LOG still sets litellm's log level.
litellm.suppress_debug_info = True
if not os.environ.get("LITELLM_LOG"):
    for _name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logging.getLogger(_name).setLevel(logging.ERROR)


_KEY_HINT = "or pass api_key=... to the model"


class LiteLLMModel(Model):
    """A model served through litellm: ``"openai/gpt-4o-mini"``, ``"anthropic/..."``, ...

    Streams by default: text reaches the run's stream as ``TextDelta`` events while it
    arrives, and streamed tool calls are assembled by index, so several parallel calls whose
    argument fragments interleave come out whole. Token usage is recorded on every response.

    Provider failures raise ``ModelError`` subclasses (``ModelAuthenticationError``,
    ``ModelRateLimitError``, ``ModelTimeoutError``, ``ModelBadRequestError``,
    ``ContextWindowExceededError``, ...). Transient ones (rate limit, timeout, connection,
    5xx) are retried with exponential backoff, unless text was already streamed to the user;
    a refused connection (nothing listening at ``api_base``) fails at once with a
    ``ModelUnavailableError`` naming the address;
    a ``Retry-After`` header on a 429 or 503 sets the wait (capped at ``retry_max_delay``).
    A missing or rejected API key fails at once with a ``ModelAuthenticationError`` naming
    the environment variable to set.

    Any OpenAI-compatible server (llama.cpp, vLLM, Ollama, LM Studio, a proxy) is one
    argument away: ``LiteLLMModel("openai/<served-name>", api_base="http://127.0.0.1:8080/v1")``.
    With ``api_base`` and no key anywhere, a placeholder key is sent (local servers need none).

    ``ModelResponse.finish_reason`` is the provider's: a tool call cut off by the token limit
    (``"length"``) is marked truncated and is not run.

    Needs asyncio (litellm does): on trio it raises ``UserError``.

    Args:
        model: The litellm model string.
        stream: Stream responses (default) or ask for whole responses.
        max_retries: Extra attempts for transient failures (0: none).
        retry_base_delay: Seconds before the first retry; doubled each time.
        retry_max_delay: Cap on one retry delay.
        timeout: Seconds one request may take.
        api_base: Endpoint URL of an OpenAI-compatible (or proxy) server, e.g.
            ``"http://127.0.0.1:8080/v1"``.
        api_key: The key; by default litellm reads the provider's environment variable
            (``OPENAI_API_KEY`` for ``openai/...``, ``ANTHROPIC_API_KEY`` for ``anthropic/...``).
        **settings: Passed to ``litellm.acompletion`` (temperature, max_tokens, ...).
    """

    def __init__(
        self,
        model: str,
        *,
        stream: bool = True,
        max_retries: int = 3,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 30.0,
        timeout: float | None = 120.0,
        api_base: str | None = None,
        api_key: str | None = None,
        **settings: Any,
    ) -> None:
        if not model:
            raise UserError("LiteLLMModel needs a model name, e.g. 'openai/gpt-4o-mini'")
        if max_retries < 0 or retry_base_delay < 0:
            raise UserError("max_retries and retry_base_delay must not be negative")
        self.name = model
        self.model = model
        self.stream = stream
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self.timeout = timeout
        self.settings: dict[str, Any] = dict(settings)
        if api_base is not None:
            self.settings["api_base"] = api_base
        if api_key is not None:
            self.settings["api_key"] = api_key

    def __repr__(self) -> str:
        return f"LiteLLMModel({self.model!r})"

    def check_credentials(self, *, hint: str = _KEY_HINT) -> None:
        """Raise ``ModelAuthenticationError`` now if no API key is set for the provider.

        No request is made: the environment is read, as the first request would read it. A
        model with ``api_base`` (a server of one's own) needs no key and always passes.

        Args:
            hint: The other way to give a key, said after the variable to set.
        """
        _check_credentials(self.model, dict(self.settings), hint=hint)

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParams
    ) -> ModelResponse:
        """Send the conversation through litellm and return the next turn (streamed or not).

        Raises:
            ModelError: A subclass saying what failed, after retries of transient failures.
            UserError: The run is not on asyncio.
        """
        check_allow_model_requests(self.model)
        _require_asyncio(self.model)
        kwargs = self._kwargs(messages, params)
        _check_credentials(self.model, kwargs)
        attempt = 0
        while True:
            progress = _Progress()
            try:
                if self.stream:
                    return await self._streamed(kwargs, params, progress)
                return await self._whole(kwargs)
            except TransientModelError as e:
                # Text already shown to the user cannot be taken back: retrying would repeat it.
                # A refused connection is nobody listening (a local server not started):
                # retrying would only make the user wait for the same answer.
                if attempt >= self.max_retries or progress.emitted or _refused(e):
                    raise
                delay = self._delay(attempt, _retry_after(e.__cause__))
            await anyio.sleep(delay)
            attempt += 1

    def _delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            # The provider said when to come back; still never longer than our cap.
            return min(retry_after, self.retry_max_delay)
        delay = min(self.retry_base_delay * (2**attempt), self.retry_max_delay)
        # Jitter spreads retries of parallel agents so they don't hit the limit together.
        return delay * random.uniform(0.5, 1.0)

    def _kwargs(self, messages: Sequence[Message], params: ModelRequestParams) -> dict[str, Any]:
        kwargs: dict[str, Any] = {**self.settings, **params.settings}
        kwargs["model"] = self.model
        kwargs["messages"] = to_openai(messages)
        if params.tools:
            kwargs["tools"] = [t.to_openai() for t in params.tools]
        if self.timeout is not None:
            kwargs.setdefault("timeout", self.timeout)
        # Retries are ours (with backoff and the streamed-text rule): turn off the SDK's.
        kwargs["max_retries"] = 0
        kwargs["num_retries"] = 0
        return kwargs

    async def _whole(self, kwargs: dict[str, Any]) -> ModelResponse:
        try:
            response: Any = await litellm.acompletion(**kwargs)
        except Exception as e:
            error = _mapped(self.model, e, kwargs)
            raise error from (None if _refused(error) else e)
        choice = response.choices[0]
        message = choice.message
        raw_calls: list[Any] = list(message.tool_calls or [])
        calls = tuple(
            ToolCall(
                id=str(c.id or ""),
                name=str(c.function.name or ""),
                arguments=str(c.function.arguments or "{}"),
            )
            for c in raw_calls
        )
        return ModelResponse(
            text=message.content or None,
            tool_calls=calls,
            usage=_usage(getattr(response, "usage", None)),
            finish_reason=getattr(choice, "finish_reason", None),
        )

    async def _streamed(
        self, kwargs: dict[str, Any], params: ModelRequestParams, progress: _Progress
    ) -> ModelResponse:
        on_text = params.on_text
        texts: list[str] = []
        calls = _CallAssembler()
        usage: Any = None
        finish_reason: str | None = None
        try:
            stream: Any = await litellm.acompletion(
                **kwargs, stream=True, stream_options={"include_usage": True}
            )
            async for chunk in stream:
                chunk_usage = getattr(chunk, "usage", None)
                if chunk_usage is not None:
                    usage = chunk_usage
                for choice in chunk.choices or ():
                    finish_reason = getattr(choice, "finish_reason", None) or finish_reason
                    delta = choice.delta
                    if delta is None:
                        continue
                    content = getattr(delta, "content", None)
                    if content:
                        texts.append(content)
                        if on_text is not None:
                            progress.emitted = True
                            on_text(content)
                    for tc in getattr(delta, "tool_calls", None) or ():
                        calls.add(tc)
        except ModelError:
            raise
        except Exception as e:
            error = _mapped(self.model, e, kwargs)
            raise error from (None if _refused(error) else e)
        text = "".join(texts)
        return ModelResponse(
            text=text or None,
            tool_calls=calls.result(),
            usage=_usage(usage),
            streamed=on_text is not None,
            finish_reason=finish_reason,
        )


@dataclass
class _Progress:
    emitted: bool = False


@dataclass
class _Slot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list[str])


class _CallAssembler:
    """Rebuilds tool calls from streamed deltas, keyed by the delta's ``index``.

    Parallel calls stream their fragments interleaved (index 0, 1, 0, 1, ...); only the
    first delta of a call carries its id and name. A new id arriving at an index already in
    use starts a new call (some providers number every call 0).
    """

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}

    def add(self, delta: Any) -> None:
        index = getattr(delta, "index", None)
        if index is None:
            index = (
                len(self._slots) - 1
                if self._slots and not getattr(delta, "id", None)
                else len(self._slots)
            )
        cid: str | None = getattr(delta, "id", None)
        slot = self._by_index.get(index)
        if slot is None or (cid and slot.id and cid != slot.id):
            slot = _Slot()
            self._slots.append(slot)
            self._by_index[index] = slot
        if cid:
            slot.id = cid
        function = getattr(delta, "function", None)
        if function is not None:
            name = getattr(function, "name", None)
            if name:
                slot.name = name
            arguments = getattr(function, "arguments", None)
            if arguments:
                slot.arguments.append(arguments)

    def result(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(id=s.id, name=s.name, arguments="".join(s.arguments) or "{}")
            for s in self._slots
            if s.name
        )


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage(requests=1)
    if isinstance(raw, Mapping):
        data = cast(Mapping[str, Any], raw)
        prompt, completion = data.get("prompt_tokens"), data.get("completion_tokens")
    else:
        prompt = getattr(raw, "prompt_tokens", None)
        completion = getattr(raw, "completion_tokens", None)
    return Usage(requests=1, input_tokens=int(prompt or 0), output_tokens=int(completion or 0))


def _require_asyncio(model: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise UserError(
            f"LiteLLMModel ({model!r}) needs asyncio: litellm does not run on trio. "
            "Run with asyncio (anyio.run(..., backend='asyncio'))."
        ) from None


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


def _check_credentials(model: str, kwargs: dict[str, Any], *, hint: str = _KEY_HINT) -> None:
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
    names = missing[0] if len(missing) == 1 else " or ".join(missing)
    raise ModelAuthenticationError(
        f"{model}: no API key: set the {names} environment variable ({hint})",
        provider=_provider(model),
    )


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


def _retry_after(error: BaseException | None) -> float | None:
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


def _mapped(model: str, error: Exception, kwargs: Mapping[str, Any]) -> ModelError:
    """``_map_error`` for a request sent with ``kwargs``."""
    return _map_error(model, error, api_key=kwargs.get("api_key"), api_base=kwargs.get("api_base"))


def _refused(error: BaseException) -> bool:
    """Whether ``error`` says a connection was refused: it is raised without litellm's chain
    of wrappers behind it (its one line names the address) and never retried."""
    return bool(getattr(error, "_refused", False))


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
    refused._refused = True  # pyright: ignore[reportAttributeAccessIssue]
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
