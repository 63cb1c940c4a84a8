"""The agent loop: model turn, then that turn's tool calls run concurrently, then repeat.

This is the only control flow in the package. One agent's run, at any depth, is one call to
``run_agent``; nested agents are tools whose function calls ``run_agent`` again with the
same coordinator and a longer path. Hooks wrap the three steps (the agent's run, each model
request, each tool call); with no hooks the loop calls the model and the tools directly.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from ._context import Deadline, ToolContext, _current, request_model
from ._fanout import first_leaf, map_concurrently
from ._text import error_text
from .clarification import unanswered_text
from .coordinator import Coordinator
from .events import AgentFinished, AgentStarted, RunStatus, TextDelta
from .exceptions import MaxTurnsExceededError, NoUserAvailableError, QuestionNotAnswered
from .hooks import AgentInvocation, AgentOutcome, ToolExecution, ToolOutcome
from .messages import Message, ToolCall, ToolResultMessage, Usage
from .models._base import Model, ModelRequestParams, ModelResponse, ToolDefinition
from .tools import Tool, ToolArgumentsError, result_to_text

__all__ = ["AgentOutcome", "AgentSpec", "run_agent"]

# Exceptions that end the whole run instead of becoming one tool's error result.
_FATAL: tuple[type[BaseException], ...] = (NoUserAvailableError,)


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentSpec:
    """What the loop needs of an agent (built once per ``Agent``)."""

    name: str
    model: Model
    tools: Mapping[str, Tool]
    tool_definitions: tuple[ToolDefinition, ...]
    max_turns: int
    model_settings: Mapping[str, Any]


class _State:
    """Per-agent-run state shared by the turns and tool calls of that run."""

    __slots__ = ("agent_path", "coordinator", "deadlines", "depth", "scope_path", "spec", "usage")

    def __init__(
        self,
        spec: AgentSpec,
        coordinator: Coordinator,
        agent_path: tuple[str, ...],
        scope_path: str,
        deadlines: tuple[Deadline, ...],
    ) -> None:
        self.spec = spec
        self.coordinator = coordinator
        self.agent_path = agent_path
        self.depth = len(agent_path) - 1
        self.scope_path = scope_path
        self.deadlines = deadlines
        self.usage = Usage()
        """This agent's own usage so far (kept here so a failure can report it too)."""


async def run_agent(
    spec: AgentSpec,
    coordinator: Coordinator,
    *,
    agent_path: tuple[str, ...],
    scope_path: str,
    messages: list[Message],
    input: str,
    deadlines: tuple[Deadline, ...] = (),
    tool_call_id: str | None = None,
    resumed: bool = False,
) -> AgentOutcome:
    """Run one agent on ``messages`` (which it extends) until it gives a final answer.

    Emits ``AgentStarted``/``AgentFinished`` around the run; failures and cancellation are
    reported in ``AgentFinished`` and re-raised.
    """
    state = _State(spec, coordinator, agent_path, scope_path, deadlines)

    async def body(invocation: AgentInvocation) -> AgentOutcome:
        return await _observed_run(state, messages, invocation)

    invocation = AgentInvocation(
        run_id=coordinator.run_id,
        agent_name=spec.name,
        agent_path=agent_path,
        scope_path=scope_path,
        input=input,
        tool_call_id=tool_call_id,
        model=spec.model,
        resumed=resumed,
    )
    if not coordinator.hooks.agent_wrappers:
        return await body(invocation)
    return await coordinator.hooks.agent(body)(invocation)


def _agent_finished(
    state: _State, invocation: AgentInvocation, status: RunStatus, **fields: Any
) -> AgentFinished:
    """The one place an ``AgentFinished`` is built."""
    return AgentFinished(
        run_id=invocation.run_id,
        agent_path=state.agent_path,
        depth=state.depth,
        status=status,
        usage=state.usage,
        tool_call_id=invocation.tool_call_id,
        **fields,
    )


async def _observed_run(
    state: _State, messages: list[Message], invocation: AgentInvocation
) -> AgentOutcome:
    coordinator = state.coordinator
    coordinator.emit(
        AgentStarted(
            run_id=invocation.run_id,
            agent_path=state.agent_path,
            depth=state.depth,
            input=invocation.input,
            tool_call_id=invocation.tool_call_id,
        )
    )
    try:
        outcome = await _turns(state, messages)
    except anyio.get_cancelled_exc_class():
        status: RunStatus = "interrupted" if coordinator.quiescence.interrupted else "cancelled"
        coordinator.emit(_agent_finished(state, invocation, status))
        raise
    except Exception as e:
        coordinator.emit(_agent_finished(state, invocation, "failed", error=error_text(e)))
        raise
    coordinator.emit(_agent_finished(state, invocation, "completed", output=outcome.output))
    return outcome


def _text_sink(state: _State) -> Callable[[str], None]:
    coordinator = state.coordinator
    run_id = coordinator.run_id
    path = state.agent_path
    depth = state.depth

    def on_text(text: str) -> None:
        if text and coordinator.observed:
            coordinator.emit(TextDelta(run_id=run_id, agent_path=path, depth=depth, text=text))

    return on_text


async def _turns(state: _State, messages: list[Message]) -> AgentOutcome:
    spec = state.spec
    coordinator = state.coordinator
    on_text = _text_sink(state)
    for turn in range(spec.max_turns):
        params = ModelRequestParams(
            tools=spec.tool_definitions,
            settings=spec.model_settings,
            agent_name=spec.name,
            agent_path=state.agent_path,
            turn=turn,
            on_text=on_text,
        )
        response = await request_model(
            coordinator, state.agent_path, state.scope_path, spec.model, messages, params
        )
        state.usage = state.usage + response.usage
        if response.text and not response.streamed:
            on_text(response.text)
        calls = response.tool_calls
        if calls:
            calls = _normalise_ids(calls, turn)
            if calls is not response.tool_calls:
                response = ModelResponse(
                    text=response.text, tool_calls=calls, usage=response.usage, streamed=True
                )
        messages.append(response.to_message())
        if not calls:
            return AgentOutcome(output=response.text or "", messages=messages, usage=state.usage)
        coordinator.quiescence.enter(len(calls))
        messages.extend(await _run_batch(state, turn, calls))
    raise MaxTurnsExceededError(
        f"agent {spec.name!r} was still calling tools after max_turns={spec.max_turns} turns"
    )


def _normalise_ids(calls: tuple[ToolCall, ...], turn: int) -> tuple[ToolCall, ...]:
    """Give every call a unique id: results are matched to calls by id, never by position."""
    seen: set[str] = set()
    fixed: list[ToolCall] | None = None
    for i, call in enumerate(calls):
        if not call.id or call.id in seen:
            if fixed is None:
                fixed = list(calls)
            fixed[i] = ToolCall(id=f"call_{turn}_{i}", name=call.name, arguments=call.arguments)
        seen.add(fixed[i].id if fixed is not None else call.id)
    return calls if fixed is None else tuple(fixed)


async def _run_batch(
    state: _State, turn: int, calls: Sequence[ToolCall]
) -> list[ToolResultMessage]:
    if len(calls) == 1:
        return [await _run_call(state, turn, calls[0])]

    def start(call: ToolCall) -> Coroutine[Any, Any, ToolResultMessage]:
        return _run_call(state, turn, call)

    try:
        # One task group; a task is spawned only for calls that actually wait (see _fanout).
        return await map_concurrently(start, calls)
    except BaseExceptionGroup as group:
        # _run_call only raises run-ending errors; surface the first one unwrapped so it
        # keeps travelling up through the parent agents as itself.
        fatal = group.subgroup(lambda e: isinstance(e, _FATAL))
        if fatal is not None:
            raise first_leaf(fatal) from None
        raise


async def _run_call(state: _State, turn: int, call: ToolCall) -> ToolResultMessage:
    """One tool call: through the tool wrappers if any hook has one, else straight."""
    coordinator = state.coordinator
    call_path = f"{state.scope_path}@{turn}:{call.id}"
    try:
        if not coordinator.hooks.tool_wrappers and not coordinator.observed:
            # Unobserved, unhooked runs (plain run() without a handler) would only drop the
            # call's events: building them was a third of the cost of a trivial tool call.
            text, is_error = await _execute(state, call, call_path)
            return ToolResultMessage(
                tool_call_id=call.id, name=call.name, content=text, is_error=is_error
            )
        execution = ToolExecution(
            run_id=coordinator.run_id,
            agent_path=state.agent_path,
            call=call,
            call_path=call_path,
            known=call.name in state.spec.tools,
            emit=coordinator.emit,
        )
        if coordinator.hooks.tool_wrappers:
            outcome = await coordinator.hooks.tool(_live_call(state))(execution)
        else:
            outcome = await _live_call(state)(execution)
    finally:
        coordinator.quiescence.leave()  # entered for the whole batch, before any call started
    return ToolResultMessage(
        tool_call_id=call.id, name=call.name, content=outcome.text, is_error=outcome.is_error
    )


def _live_call(state: _State) -> Callable[[ToolExecution], Coroutine[Any, Any, ToolOutcome]]:
    async def live(execution: ToolExecution) -> ToolOutcome:
        coordinator = state.coordinator
        coordinator.emit(execution.started_event())
        text, is_error = await _execute(state, execution.call, execution.call_path)
        outcome = ToolOutcome(text=text, is_error=is_error)
        coordinator.emit(execution.finished_event(outcome))
        return outcome

    return live


async def _execute(state: _State, call: ToolCall, call_path: str) -> tuple[str, bool]:
    """Validate, ask permission, run; every failure becomes (text for the model, True)."""
    tool = state.spec.tools.get(call.name)
    if tool is None:
        available = ", ".join(state.spec.tools) or "none"
        return f"Unknown tool {call.name!r}. Available tools: {available}.", True
    try:
        arguments = tool.validate_arguments(call.arguments)
    except ToolArgumentsError as e:
        return str(e), True
    ctx = ToolContext(
        coordinator=state.coordinator,
        agent_path=state.agent_path,
        tool_name=tool.name,
        tool_call_id=call.id,
        call_path=call_path,
        scope_path=state.scope_path,
        deadlines=state.deadlines,
    )
    token = _current.set(ctx)
    try:
        if tool.needs_approval(arguments):
            refusal = await ctx.ask_permission(tool.name, arguments)
            if refusal is not None:
                return refusal, False
        return await _call_tool(tool, ctx, arguments)
    except QuestionNotAnswered as e:
        return unanswered_text(e), False
    except _FATAL:
        raise
    except Exception as e:
        return f"Error: {error_text(e)}", True
    finally:
        _current.reset(token)


async def _call_tool(tool: Tool, ctx: ToolContext, arguments: dict[str, Any]) -> tuple[str, bool]:
    if tool.timeout is None:
        return result_to_text(await tool.call(ctx, arguments)), False
    scope = anyio.CancelScope(deadline=anyio.current_time() + tool.timeout)
    ctx.deadlines = (*ctx.deadlines, Deadline(scope))
    value = None
    with scope:
        value = await tool.call(ctx, arguments)
    if scope.cancelled_caught:
        return f"Error: tool {tool.name!r} timed out after {tool.timeout:g} seconds.", True
    return result_to_text(value), False
