"""``LiteLLMModel``: any provider litellm knows, streamed, with retries and clear errors.

This module (with ``_litellm_errors``, which it imports) is the only place hpd_agent imports
litellm, and it is imported only when a string model is first used
(``Agent(model="openai/gpt-4o-mini")``) or on ``from hpd_agent.models import LiteLLMModel``:
offline paths never pay litellm's import time.

litellm is asyncio-only, so this module is the one place in the package that uses asyncio
directly (to say so clearly when a run is on another event loop such as trio).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import random
from collections.abc import Mapping, Sequence
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
    ModelError,
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
from ._litellm_errors import KEY_HINT, check_credentials, mapped, refused, retry_after  # noqa: E402

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

    def check_credentials(self, *, hint: str = KEY_HINT) -> None:
        """Raise ``ModelAuthenticationError`` now if no API key is set for the provider.

        No request is made: the environment is read, as the first request would read it. A
        model with ``api_base`` (a server of one's own) needs no key and always passes.

        Args:
            hint: The other way to give a key, said after the variable to set.
        """
        check_credentials(self.model, dict(self.settings), hint=hint)

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
        check_credentials(self.model, kwargs)
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
                if attempt >= self.max_retries or progress.emitted or refused(e):
                    raise
                delay = self._delay(attempt, retry_after(e.__cause__))
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
            error = mapped(self.model, e, kwargs)
            raise error from (None if refused(error) else e)
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
            error = mapped(self.model, e, kwargs)
            raise error from (None if refused(error) else e)
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
