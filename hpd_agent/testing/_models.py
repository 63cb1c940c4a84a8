"""Scripted models: ``ScriptedModel`` plays a fixed script, ``FunctionModel`` asks a function."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import anyio.lowlevel

from ..exceptions import ScriptExhaustedError, UserError
from ..messages import Message, ToolCall, Usage
from ..models._base import Model, ModelRequestParams, ModelResponse

__all__ = ["FunctionModel", "ScriptedModel", "Step", "text", "tool_call"]


@dataclass(frozen=True, kw_only=True, slots=True)
class _PlannedCall:
    name: str
    arguments: str
    id: str | None


Step = ModelResponse | _PlannedCall | Sequence[_PlannedCall]
"""One scripted model turn: ``text(...)``, ``tool_call(...)``, or a list of tool calls
(several calls in one turn run in parallel)."""

_ONE_USAGE = Usage(requests=1)


def text(content: str, *, input_tokens: int = 0, output_tokens: int = 0) -> ModelResponse:
    """A scripted turn that answers with text (a final answer, unless tool calls follow)."""
    return ModelResponse(
        text=content,
        usage=Usage(requests=1, input_tokens=input_tokens, output_tokens=output_tokens),
        finish_reason="stop",
    )


def tool_call(
    name: str, /, _id: str | None = None, _raw: str | None = None, **arguments: Any
) -> _PlannedCall:
    """A scripted call of tool ``name`` with keyword ``arguments``.

    Args:
        name: The tool to call (unknown names are allowed: the loop must cope).
        _id: The call id; generated when omitted.
        _raw: Send this exact argument text instead (e.g. malformed JSON).
        **arguments: The arguments, sent as a JSON object.
    """
    raw = _raw if _raw is not None else json.dumps(arguments)
    return _PlannedCall(name=name, arguments=raw, id=_id)


class _Responder:
    """Turns steps into responses, numbering call ids per model instance."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._next_id = 0

    def to_response(self, step: Step) -> ModelResponse:
        if isinstance(step, ModelResponse):
            return step
        planned: Sequence[_PlannedCall] = [step] if isinstance(step, _PlannedCall) else step
        calls: list[ToolCall] = []
        for p in planned:
            if not isinstance(p, _PlannedCall):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise UserError(f"a script step must be text(...) or tool_call(...), got {p!r}")
            self._next_id += 1
            calls.append(
                ToolCall(id=p.id or f"call_{self._next_id}", name=p.name, arguments=p.arguments)
            )
        return ModelResponse(tool_calls=tuple(calls), usage=_ONE_USAGE, finish_reason="tool_calls")


def _deliver(
    response: ModelResponse, params: ModelRequestParams, chunk: int | None
) -> ModelResponse:
    """Stream the text through ``on_text`` in pieces, as a real streaming model would."""
    on_text = params.on_text
    if chunk is None or not response.text or on_text is None:
        return response
    t = response.text
    for i in range(0, len(t), chunk):
        on_text(t[i : i + chunk])
    return replace(response, streamed=True)


class ScriptedModel(Model):
    """A model that plays a fixed script of turns, for tests and offline demos.

    It records every request (``requests``: the messages of each call; ``params``: the rest)
    so a test can check what the agent sent, and ``assert_complete()`` checks that every
    step was used: a test thereby proves a model was called exactly as often as scripted.

    One model object plays one script, across every request made to it: a second run of
    the same agent continues where the first stopped, it does not start again. That is what
    a multi-turn conversation (``run(..., history=...)``), a sub-agent called twice, and a
    resumed run need, and the model cannot tell those from a fresh run. To play the script
    again from its first step, call ``reset()`` or build a new ``ScriptedModel`` per run;
    for a model that answers every run alike, use ``FunctionModel``. A resumed run replays
    its recorded turns without asking the model, so a new ``ScriptedModel`` built for the
    resume would start at the first step again: give durable runs a ``FunctionModel``.

    Args:
        steps: The turns, in order: ``text(...)``, ``tool_call(...)`` or a list of calls.
        name: A label for error messages.
        chunk_size: Stream text in pieces of this many characters (None: one piece).
    """

    provider = "hpd_agent.scripted"

    def __init__(
        self, steps: Iterable[Step], *, name: str = "scripted", chunk_size: int | None = None
    ) -> None:
        self.name = name
        self.steps: list[Step] = list(steps)
        self.requests: list[list[Message]] = []
        self.params: list[ModelRequestParams] = []
        self._responder = _Responder(name)
        self._chunk = chunk_size

    @property
    def remaining(self) -> int:
        """Steps not used yet."""
        return len(self.steps) - len(self.requests)

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParams
    ) -> ModelResponse:
        """Return the next scripted turn."""
        await anyio.lowlevel.checkpoint()
        index = len(self.requests)
        self.requests.append(list(messages))
        self.params.append(params)
        if index >= len(self.steps):
            last = messages[-1] if messages else None
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r} has {len(self.steps)} steps but agent "
                f"{params.agent_name!r} made request #{index + 1}; last message: {last!r}. "
                "The script is shared by every run using this model object and is not "
                "replayed for a new run: call reset() to play it again from the start, or "
                "use one ScriptedModel per run"
            )
        return _deliver(self._responder.to_response(self.steps[index]), params, self._chunk)

    def reset(self) -> None:
        """Play the script again from its first step, forgetting the recorded requests.

        Call ids keep counting up, so a conversation that goes on after a reset never sees
        one id twice.
        """
        self.requests.clear()
        self.params.clear()

    def assert_complete(self) -> None:
        """Fail unless every scripted step was used, no more and no less."""
        if len(self.requests) != len(self.steps):
            raise AssertionError(
                f"ScriptedModel {self.name!r}: {len(self.steps)} steps scripted, "
                f"{len(self.requests)} requests made"
            )


ModelFunction = Callable[[Sequence[Message], ModelRequestParams], Step | Awaitable[Step]]
"""``fn(messages, info)`` returning a step, sync or async."""


class FunctionModel(Model):
    """A model whose every turn is computed by your function from the conversation.

    ``fn(messages, info)`` gets the messages sent and the request's ``ModelRequestParams``
    (agent name and path, turn index, tools) and returns a step like ``ScriptedModel``'s.
    Use it for models that react to what happened (a user's answer, a tool's result).

    Args:
        fn: The function, sync or async.
        name: A label.
        chunk_size: Stream text in pieces of this many characters (None: one piece).
    """

    provider = "hpd_agent.scripted"

    def __init__(
        self, fn: ModelFunction, *, name: str | None = None, chunk_size: int | None = None
    ) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")
        self.calls = 0
        self._is_async = inspect.iscoroutinefunction(fn)
        self._responder = _Responder(self.name)
        self._chunk = chunk_size

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParams
    ) -> ModelResponse:
        """Ask the function for the next turn."""
        self.calls += 1
        if self._is_async:
            step = await cast(Awaitable[Step], self.fn(messages, params))
        else:
            await anyio.lowlevel.checkpoint()
            step = cast(Step, self.fn(messages, params))
        return _deliver(self._responder.to_response(step), params, self._chunk)
