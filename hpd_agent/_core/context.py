"""The contextvar that holds the current call frame, and the frame itself (``ToolContext``).

While a tool runs, ``current_context()`` returns its ``ToolContext``: the root run's
coordinator, the path of agents down to this call, and the deadlines that enclose it. An
``Agent.run`` started inside a tool finds the frame here and becomes a nested run that emits
into the root's coordinator, at any depth, with no wiring by the caller.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Any, Generic

import anyio
from typing_extensions import TypeVar

from ..coordinator import Coordinator
from ..events import Event
from ..exceptions import QuestionNotAnswered
from ..hooks import ModelCall, StepCall
from ..messages import Message
from ..models._base import Model, ModelRequestParams, ModelResponse
from ..permissions import Deny, PermissionSpec
from ..text import TextMender, mend
from .asking import Asking
from .requests import RequestSpec

__all__ = [
    "Deadline",
    "DepsT",
    "ToolContext",
    "current_context",
    "invocation_id",
    "request_model",
]

DepsT = TypeVar("DepsT", default=Any)
"""The type of ``ToolContext.deps`` (``Agent(deps_type=...)``); ``Any`` when not given."""

_current: ContextVar[ToolContext | None] = ContextVar("hpd_agent_tool_context", default=None)


def current_context() -> ToolContext | None:
    """The ``ToolContext`` of the tool call running in this task, or None outside tools."""
    return _current.get()


def invocation_id(scope_path: str) -> str:
    """The ``invocation_id`` of the agent call whose stable path is ``scope_path``.

    A digest, not the path: the path holds the run id, which may be a secret (the web
    server's), and events leave the process.
    """
    return "inv_" + hashlib.blake2b(scope_path.encode(), digest_size=8).hexdigest()


class Deadline:
    """A cancel scope's deadline that stops running while a human is being waited for.

    Several questions may wait under one deadline at once (parallel sub-agents), so pauses
    are counted and the clock restarts only when the last one ends.
    """

    __slots__ = ("_pauses", "_remaining", "scope")

    def __init__(self, scope: anyio.CancelScope) -> None:
        self.scope = scope
        self._pauses = 0
        self._remaining = math.inf

    def pause(self) -> None:
        """Stop the clock (nested pauses are counted)."""
        if self._pauses == 0:
            self._remaining = self.scope.deadline - anyio.current_time()
            self.scope.deadline = math.inf
        self._pauses += 1

    def resume(self) -> None:
        """Restart the clock with the time that was left when it stopped."""
        self._pauses -= 1
        if self._pauses == 0:
            self.scope.deadline = anyio.current_time() + self._remaining


class ToolContext(Asking, Generic[DepsT]):
    """What a tool knows about the call it serves. Declare a parameter of this type to get it.

    Annotate it ``ToolContext[MyDeps]`` to type ``ctx.deps``.

    Attributes:
        deps: What the run was given as ``deps=`` (``Agent.run(..., deps=...)``), or what the
            calling agent's run had, for a nested agent given none of its own; None when the
            run has none.
        run_id: Id of the root run.
        agent_path: Agent names from the root down to the agent that called the tool.
        depth: Depth of that agent (0 for the root agent).
        tool_name: Name of the tool being called.
        tool_call_id: The model's id for this call.
        invocation_id: Which call of the agent that called the tool this is (the
            ``invocation_id`` its events carry).
        call_path: Stable path of this call inside the run (run, agents, turns, call ids);
            request ids derive from it, so a replay gets the same ids.
    """

    __slots__ = (
        "_asks",
        "_steps",
        "agent_path",
        "call_path",
        "coordinator",
        "deadlines",
        "deps",
        "depth",
        "invocation_id",
        "run_id",
        "scope_path",
        "tool_call_id",
        "tool_name",
    )

    def __init__(
        self,
        *,
        coordinator: Coordinator,
        agent_path: tuple[str, ...],
        tool_name: str,
        tool_call_id: str,
        call_path: str,
        scope_path: str,
        deadlines: Sequence[Deadline] = (),
        deps: Any = None,
        invocation: str | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.deps: DepsT = deps
        self.run_id = coordinator.run_id
        self.agent_path = agent_path
        self.depth = len(agent_path) - 1
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.call_path = call_path
        self.scope_path = scope_path
        """Path of the agent run that made this call (conversations are kept per scope)."""
        self.invocation_id = invocation_id(scope_path) if invocation is None else invocation
        """The ``invocation_id`` of that agent run (its events carry it)."""
        self.deadlines = tuple(deadlines)
        self._asks = 0
        self._steps = 0

    def __repr__(self) -> str:
        return f"ToolContext({self.tool_name!r}, path={'/'.join(self.agent_path)!r})"

    def next_request_id(self) -> str:
        """A request id for the next request of this call, stable across replays."""
        n = self._asks
        self._asks += 1
        key = f"{self.call_path}?{n}".encode()
        return "req_" + hashlib.blake2b(key, digest_size=8).hexdigest()

    def emit(self, event: Event) -> None:
        """Put an event on the root run's stream."""
        self.coordinator.emit(event)

    def request(self, spec: RequestSpec, *, timeout: float | None = None) -> Awaitable[Any]:
        """Raise a request of any kind (a ``RequestSpec``) from this call and wait for it
        (``await ctx.request(spec)``).

        The ``ask*`` helpers and permission checks go through here; the request id comes
        from this call's path, so a replay asks under the same id.
        """
        # Not a coroutine of its own: one frame less for every suspended question.
        return self.coordinator.request(
            self, spec, request_id=self.next_request_id(), timeout=timeout
        )

    async def _request_as(self, spec: RequestSpec, request_id: str, timeout: float | None) -> Any:
        return await self.coordinator.request(self, spec, request_id=request_id, timeout=timeout)

    async def _respond(self, request_id: str, answer: Any) -> Any:
        return await self.coordinator.respond(request_id, answer)

    async def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Do a side effect once, even if the run is resumed: a journaled step.

        ``fn(*args, **kwargs)`` (sync or async) runs and its result is returned. In a run
        with a store the result is journaled the moment it exists; when a resumed run
        replays this tool call (because it asked the human after the step and the process
        died), the step returns the recorded result without calling ``fn`` again. Use it for
        every side effect a tool makes before it asks mid-way (a charge, an email, a write).

        Args:
            name: What the step does (it names the step in the journal and in traces).
            fn: The side effect; its result must be JSON data (it is stored as JSON, and a
                replay returns the stored JSON).
            *args: Positional arguments for ``fn``.
            **kwargs: Keyword arguments for ``fn``.

        Returns:
            What ``fn`` returned (as JSON data when replayed from a store).
        """
        index = self._steps
        self._steps += 1

        async def run() -> Any:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
            return value

        wrappers = self.coordinator.hooks.step_wrappers
        if not wrappers:
            return await run()
        call = StepCall(
            run_id=self.run_id,
            agent_path=self.agent_path,
            invocation_id=self.invocation_id,
            name=name,
            key=f"{self.call_path}!{index}:{name}",
            run=run,
        )
        return await self.coordinator.hooks.step(_run_step)(call)

    async def ask_permission(
        self, tool_name: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> str | None:
        """Ask the human whether ``tool_name`` may run with ``arguments``.

        Returns:
            None when the call may run; otherwise the text the model gets instead of a result.
        """
        if (self.agent_path, tool_name) in self.coordinator.run_approvals:
            return None
        try:
            decision = await self.request(PermissionSpec(tool_name, arguments), timeout=timeout)
        except QuestionNotAnswered as e:
            return f"The tool {tool_name!r} did not run: it needs the user's approval. {e}"
        if isinstance(decision, Deny):
            reason = f" Reason: {decision.reason}" if decision.reason else ""
            return f"The user denied permission to run {tool_name!r}.{reason}"
        return None

    async def request_model(
        self, model: Model, messages: Sequence[Message], params: ModelRequestParams
    ) -> ModelResponse:
        """Call ``model`` from this frame as the run's agents do: through the run's hooks
        (a durable run journals it and replays it on resume), counted in the run's usage.

        The request's stable key is ``f"{scope_path}@{params.turn}"``: give each request of
        this frame its own ``turn``.
        """
        return await request_model(
            self.coordinator,
            self.agent_path,
            self.scope_path,
            model,
            messages,
            params,
            self.invocation_id,
        )


async def request_model(
    coordinator: Coordinator,
    agent_path: tuple[str, ...],
    scope_path: str,
    model: Model,
    messages: Sequence[Message],
    params: ModelRequestParams,
    invocation: str | None = None,
) -> ModelResponse:
    """One model request of a run: through the run's model wrappers (if any), counted busy
    while it is live, journal write included (an interrupt waits for it), and added to the
    run's usage."""
    quiescence = coordinator.quiescence
    quiescence.busy += 1
    try:
        if not coordinator.hooks.model_wrappers:
            response = await _mended_request(model, messages, params)
        else:
            call = ModelCall(
                run_id=coordinator.run_id,
                agent_path=agent_path,
                scope_path=scope_path,
                invocation_id=invocation_id(scope_path) if invocation is None else invocation,
                turn=params.turn,
                model=model,
                messages=messages,
                params=params,
                emit=coordinator.emit,
            )
            response = await coordinator.hooks.model(_call_model)(call)
    finally:
        # What the response asks for (tool calls, the agent's end) takes over.
        quiescence.hand_over()
    coordinator.add_usage(response.usage)
    return response


async def _call_model(call: ModelCall) -> ModelResponse:
    return await _mended_request(call.model, call.messages, call.params)


async def _mended_request(
    model: Model, messages: Sequence[Message], params: ModelRequestParams
) -> ModelResponse:
    """The model's response with its text mended (``hpd_agent.text.mend``) as it streams
    and as a whole, so every hook, event, journal entry and store sees the same text."""
    mender = None if params.on_text is None else TextMender(params.on_text)
    if mender is not None:
        params = dataclasses.replace(params, on_text=mender)
    response = await model.request(messages, params)
    if mender is not None:
        mender.close()
    if response.text:
        text = mend(response.text)
        if text is not response.text:
            response = dataclasses.replace(response, text=text)
    return response


async def _run_step(call: StepCall) -> Any:
    return await call.run()
