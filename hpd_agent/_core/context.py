"""The contextvar that holds the current call frame, and the frame itself (``ToolContext``).

While a tool runs, ``current_context()`` returns its ``ToolContext``: the root run's
coordinator, the path of agents down to this call, and the deadlines that enclose it. An
``Agent.run`` started inside a tool finds the frame here and becomes a nested run that emits
into the root's coordinator, at any depth, with no wiring by the caller. The frame's typed
questions (``ask``, ``confirm``, ...) are the ``Asking`` mixin, ``_core/asking.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Any, Generic

from typing_extensions import TypeVar

from ..coordinator import Coordinator
from ..events import Event, format_path, invocation_id
from ..exceptions import UserError
from ..hooks import ModelCall, StepCall, ToolExecution
from ..messages import Message
from ..models._base import Model, ModelRequestParams, ModelResponse
from ..text import TextMender, mend
from .asking import Asking
from .deadline import Deadline
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
_running: ContextVar[Coordinator | None] = ContextVar("hpd_agent_root_run", default=None)
"""The coordinator of the root run this task works for, set by a root run that has a tool
wrapper for its whole body (nested runs share their root's): what
``ToolContext.for_execution`` builds frames on."""


def current_context() -> ToolContext | None:
    """The ``ToolContext`` of the tool call running in this task, or None outside tools."""
    return _current.get()


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
        "_relayed",
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
        self._relayed: tuple[str, tuple[tuple[str, ...], ...]] | None = None
        """For a frame of ``on_behalf_of``: the call path of the tool call's own frame and
        the (names..., key) of each ``on_behalf_of`` from it down to this frame."""

    def __repr__(self) -> str:
        return f"ToolContext({self.tool_name!r}, path={format_path(self.agent_path)!r})"

    def on_behalf_of(self, *names: str, key: str) -> ToolContext[DepsT]:
        """A frame of this call for questions relayed for other agents (a remote agent over
        A2A): ``agent_path`` = this path + ``names``; request ids from this call's path,
        ``names`` and ``key`` (not a count), so a relayed question keeps its id on resume;
        different names or keys never share one, whatever text they hold (a remote's).
        A frame's own ``on_behalf_of`` relays one level further down.

        Args:
            *names: The agent names to append (at least one).
            key: What the question is, stable across a resume (e.g. the remote's request id).

        Raises:
            UserError: No name, or a name that is not non-empty text.
        """
        if not names or not all(isinstance(n, str) and n for n in names):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"on_behalf_of needs agent names (non-empty text), got {names!r}")
        key = str(key)
        own, levels = (self.call_path, ()) if self._relayed is None else self._relayed
        below, call_path = _relayed_paths(own, levels, names, key)
        frame = ToolContext(
            coordinator=self.coordinator,
            agent_path=(*self.agent_path, *names),
            tool_name=self.tool_name,
            tool_call_id=self.tool_call_id,
            call_path=call_path,
            scope_path=self.scope_path,
            deadlines=self.deadlines,
            deps=self.deps,
            invocation=invocation_id(below),
        )
        frame._relayed = (own, (*levels, (*names, key)))
        return frame

    @classmethod
    def for_execution(cls, execution: ToolExecution, tool_name: str | None = None) -> ToolContext:
        """The frame the loop gives the tool of ``execution`` (same path, same request ids),
        for a tool wrapper (``Hook.wrap_tool_call``) that does the call's checks itself: a
        Temporal hook that runs the tool as an activity asks its permission from it
        (``await ctx.ask_permission(...)``) exactly as the loop would.

        The frame has no deadlines and no deps of its own.

        Args:
            execution: The tool call, as the wrapper received it.
            tool_name: The tool's name (default: the name the model called).

        Raises:
            UserError: Not called inside a run (the execution belongs to no run here).
        """
        coordinator = _running.get()
        if coordinator is None or coordinator.run_id != execution.run_id:
            raise UserError(f"{execution.call_path!r} is no tool call of a run in this task")
        return cls(
            coordinator=coordinator,
            agent_path=execution.agent_path,
            tool_name=tool_name or execution.tool_name,
            tool_call_id=execution.call.id,
            call_path=execution.call_path,
            scope_path=execution.call_path.rsplit("@", 1)[0],
            invocation=execution.invocation_id or None,
        )

    def next_request_id(self) -> str:
        """A request id for the next request of this call, stable across replays."""
        n = self._asks
        self._asks += 1
        key = f"{self.call_path}?{n}".encode()
        return "req_" + hashlib.blake2b(key, digest_size=8).hexdigest()

    def emit(self, event: Event) -> None:
        """Put an event on the root run's stream."""
        self.coordinator.emit(event)

    def request(
        self, spec: RequestSpec, *, request_id: str | None = None, timeout: float | None = None
    ) -> Awaitable[Any]:
        """Raise a request of any kind (a ``RequestSpec``) from this call and wait for it
        (``await ctx.request(spec)``).

        The ``ask*`` helpers and permission checks go through here; the request id comes
        from this call's path, so a replay asks under the same id.

        Args:
            spec: The request.
            request_id: Its id when the caller took it beforehand (``next_request_id()``:
                several questions whose ids must follow the order a server sent them in,
                asked at once); by default the next id of this call.
            timeout: Seconds to wait for the answer; None waits as long as the run does.
        """
        # Not a coroutine of its own: one frame less for every suspended question.
        return self.coordinator.request(
            self,
            spec,
            request_id=self.next_request_id() if request_id is None else request_id,
            timeout=timeout,
        )

    def cancel_request(self, request_id: str) -> None:
        """End a pending request of the run without an answer (a question relayed for a
        remote agent that no longer asks it): its asker's ``request`` raises
        ``QuestionNotAnswered(status="cancelled")``; the run goes on (as ``Run.cancel_request``).

        Raises:
            RequestError: It has ended already (answered, expired, cancelled), is being
                answered, or is no request of the run.
        """
        self.coordinator.cancel_request(request_id)

    @property
    def cancelling(self) -> bool:
        """Whether the run is being cancelled on purpose (``Run.cancel``): it ends here.
        Any other cancellation of the call (an interrupt, the process shutting down) leaves
        a durable run to be resumed, this call replayed."""
        return self.coordinator.cancelling

    @property
    def durable(self) -> bool:
        """Whether the run keeps its requests in a store: stopped without ``cancelling``,
        it can be resumed, and this call runs again (its journaled steps replayed)."""
        return self.coordinator.backend.durable

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


def _relayed_paths(
    own: str, levels: tuple[tuple[str, ...], ...], names: tuple[str, ...], key: str
) -> tuple[str, str]:
    """The paths of a frame relaying for ``names`` under ``key`` (``on_behalf_of``): the
    agent's (its invocation id derives from it) and the frame's (its request ids do).

    Injective: different names, keys or levels never share a path, whatever text the names
    and keys hold (a remote chooses them). A first level whose names hold no ``/`` or ``#``
    keeps the form it always had, ``{own}>{names joined by /}#{key}``, because journals of
    durable runs replay answers by the request ids derived from it: the names end at the
    first ``#``, the key runs to the end, and the names are not empty, so no such path
    starts ``{own}>#``. Every other frame's paths do: ``{own}>#`` and the JSON list of its
    levels (the agent's path: the last level's names without the key).
    """
    if not levels and not any("/" in n or "#" in n for n in names):
        below = f"{own}>{'/'.join(names)}"
        return below, f"{below}#{key}"
    below = json.dumps([*levels, names], separators=(",", ":"))
    path = json.dumps([*levels, (*names, key)], separators=(",", ":"))
    return f"{own}>#{below}", f"{own}>#{path}"


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


def _call_model(call: ModelCall) -> Awaitable[ModelResponse]:
    # Not a coroutine of its own: one frame less held by every model call in flight.
    return _mended_request(call.model, call.messages, call.params)


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
