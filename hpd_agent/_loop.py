"""The agent loop: model turn, then that turn's tool calls run concurrently, then repeat.

This is the only control flow in the package. One agent's run, at any depth, is one call to
``run_agent``; nested agents are tools whose function calls ``run_agent`` again with the
same coordinator and a longer path.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio

from ._context import Deadline, ToolContext, _current
from ._fanout import map_concurrently
from .clarification import unanswered_text
from .coordinator import Coordinator
from .events import AgentFinished, AgentStarted, TextDelta, ToolCallFinished, ToolCallStarted
from .exceptions import MaxTurnsExceededError, NoUserAvailableError, QuestionNotAnswered
from .messages import Message, ToolCall, ToolResultMessage, Usage, truncated_call_text
from .models import Model, ModelRequestParams, ModelResponse, ToolDefinition
from .permissions import ask_permission
from .tools import Tool, ToolArgumentsError, result_to_text

if TYPE_CHECKING:
    from collections.abc import Callable

    from .store._journal import Journal

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


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentOutcome:
    """How one agent's run ended."""

    output: str
    messages: list[Message]
    usage: Usage
    truncated: bool = False


class _State:
    """Per-agent-run state shared by the turns and tool calls of that run."""

    __slots__ = (
        "agent_path",
        "coordinator",
        "deadlines",
        "depth",
        "journal",
        "scope_path",
        "spec",
        "usage",
    )

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
        self.journal: Journal | None = coordinator.journal
        # Kept here, not returned, so a failed or cancelled run still reports what it spent.
        self.usage = Usage()


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
) -> AgentOutcome:
    """Run one agent on ``messages`` (which it extends) until it gives a final answer.

    Emits ``AgentStarted``/``AgentFinished`` around the run; failures and cancellation are
    reported in ``AgentFinished`` and re-raised.
    """
    state = _State(spec, coordinator, agent_path, scope_path, deadlines)
    run_id = coordinator.run_id
    depth = state.depth
    coordinator.emit(
        AgentStarted(
            run_id=run_id,
            agent_path=agent_path,
            depth=depth,
            input=input,
            tool_call_id=tool_call_id,
        )
    )
    try:
        output, truncated = await _turns(state, messages)
    except anyio.get_cancelled_exc_class():
        coordinator.emit(
            AgentFinished(
                run_id=run_id,
                agent_path=agent_path,
                depth=depth,
                status="interrupted" if coordinator.interrupted else "cancelled",
                tool_call_id=tool_call_id,
                usage=state.usage,
            )
        )
        raise
    except Exception as e:
        coordinator.emit(
            AgentFinished(
                run_id=run_id,
                agent_path=agent_path,
                depth=depth,
                status="failed",
                error=f"{type(e).__name__}: {e}",
                tool_call_id=tool_call_id,
                usage=state.usage,
            )
        )
        raise
    coordinator.emit(
        AgentFinished(
            run_id=run_id,
            agent_path=agent_path,
            depth=depth,
            status="completed",
            output=output,
            usage=state.usage,
            tool_call_id=tool_call_id,
            truncated=truncated,
        )
    )
    return AgentOutcome(output=output, messages=messages, usage=state.usage, truncated=truncated)


def _text_sink(state: _State) -> Callable[[str], None]:
    coordinator = state.coordinator
    run_id = coordinator.run_id
    path = state.agent_path
    depth = state.depth

    def on_text(text: str) -> None:
        if text and coordinator.observed:
            coordinator.emit(TextDelta(run_id=run_id, agent_path=path, depth=depth, text=text))

    return on_text


async def _turns(state: _State, messages: list[Message]) -> tuple[str, bool]:
    """The turns of one agent run; returns the final text and whether it was truncated."""
    spec = state.spec
    coordinator = state.coordinator
    model = spec.model
    on_text = _text_sink(state)
    journal = state.journal
    for turn in range(spec.max_turns):
        params = ModelRequestParams(
            tools=spec.tool_definitions,
            settings=spec.model_settings,
            agent_name=spec.name,
            agent_path=state.agent_path,
            turn=turn,
            on_text=on_text,
        )
        if journal is None:
            response = await model.request(messages, params)
        else:
            response = await _journaled_request(state, journal, turn, messages, params)
        state.usage = state.usage + response.usage
        coordinator.add_usage(response.usage)
        if response.text and not response.streamed:
            on_text(response.text)
        calls = response.tool_calls
        if calls:
            calls = _normalise_ids(calls, turn)
            if calls is not response.tool_calls:
                response = replace(response, tool_calls=calls, streamed=True)
        messages.append(response.to_message())
        if not calls:
            return response.text or "", response.truncated
        if journal is not None:
            journal.enter(len(calls))
        messages.extend(await _run_batch(state, turn, calls))
    raise MaxTurnsExceededError(
        f"agent {spec.name!r} was still calling tools after max_turns={spec.max_turns} turns"
    )


async def _journaled_request(
    state: _State,
    journal: Journal,
    turn: int,
    messages: list[Message],
    params: ModelRequestParams,
) -> ModelResponse:
    """The model call of this turn: replayed from the journal, or made and then recorded."""
    spec = state.spec
    response, replayed = await journal.model_call(
        f"{state.scope_path}@{turn}", lambda: spec.model.request(messages, params)
    )
    if replayed and response.text:
        coordinator = state.coordinator
        coordinator.emit(
            TextDelta(
                run_id=coordinator.run_id,
                agent_path=state.agent_path,
                depth=state.depth,
                text=response.text,
                replayed=True,
            )
        )
    return response


def _normalise_ids(calls: tuple[ToolCall, ...], turn: int) -> tuple[ToolCall, ...]:
    """Give every call a unique id: results are matched to calls by id, never by position."""
    seen: set[str] = set()
    fixed: list[ToolCall] | None = None
    for i, call in enumerate(calls):
        if not call.id or call.id in seen:
            if fixed is None:
                fixed = list(calls)
            fixed[i] = replace(call, id=f"call_{turn}_{i}")
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


def first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first non-group exception inside a (possibly nested) exception group."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        inner: BaseExceptionGroup[BaseException] = exc  # pyright: ignore[reportUnknownVariableType]
        exc = inner.exceptions[0]
    return exc


async def _run_call(state: _State, turn: int, call: ToolCall) -> ToolResultMessage:
    journal = state.journal
    if journal is not None:
        return await _journaled_call(state, journal, turn, call)
    coordinator = state.coordinator
    run_id = coordinator.run_id
    path = state.agent_path
    depth = state.depth
    # Unobserved runs (plain run() without a handler) would only drop these two events:
    # building them was a third of the cost of a trivial tool call.
    observed = coordinator.observed
    if observed:
        coordinator.emit(
            ToolCallStarted(
                run_id=run_id,
                agent_path=path,
                depth=depth,
                tool_call_id=call.id,
                tool_name=call.name,
                arguments=call.arguments,
            )
        )
    text, is_error = await _execute(state, turn, call)
    if observed:
        coordinator.emit(
            ToolCallFinished(
                run_id=run_id,
                agent_path=path,
                depth=depth,
                tool_call_id=call.id,
                tool_name=call.name,
                result=text,
                is_error=is_error,
            )
        )
    return ToolResultMessage(tool_call_id=call.id, name=call.name, content=text, is_error=is_error)


async def _journaled_call(
    state: _State, journal: Journal, turn: int, call: ToolCall
) -> ToolResultMessage:
    """A tool call in a run with a store: a recorded result is replayed, never re-run."""
    coordinator = state.coordinator
    key = f"{state.scope_path}@{turn}:{call.id}"
    recorded = journal.tool_result(key)
    replayed = recorded is not None
    common: dict[str, Any] = {
        "run_id": coordinator.run_id,
        "agent_path": state.agent_path,
        "depth": state.depth,
        "tool_call_id": call.id,
        "tool_name": call.name,
        "replayed": replayed,
    }
    coordinator.emit(ToolCallStarted(arguments=call.arguments, **common))
    if recorded is not None:
        text, is_error = recorded
        journal.leave()
    else:
        try:
            text, is_error = await _execute(state, turn, call)
        finally:
            journal.leave()  # entered for the whole batch, before any call started
        # Recorded the moment it exists: a crash while a sibling still waits must not
        # lose it, or the side effect would run again on resume.
        await journal.record_tool(key, text, is_error)
    coordinator.emit(ToolCallFinished(result=text, is_error=is_error, **common))
    return ToolResultMessage(tool_call_id=call.id, name=call.name, content=text, is_error=is_error)


async def _execute(state: _State, turn: int, call: ToolCall) -> tuple[str, bool]:
    """Validate, ask permission, run; every failure becomes (text for the model, True)."""
    if call.truncated:
        return truncated_call_text(call), True
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
        call_path=f"{state.scope_path}@{turn}:{call.id}",
        scope_path=state.scope_path,
        deadlines=state.deadlines,
    )
    token = _current.set(ctx)
    try:
        if tool.needs_approval(arguments):
            refusal = await ask_permission(ctx, tool.name, arguments)
            if refusal is not None:
                return refusal, False
        if tool.timeout is None:
            value = await tool.call(ctx, arguments)
        else:
            scope = anyio.CancelScope(deadline=anyio.current_time() + tool.timeout)
            ctx.deadlines = (*ctx.deadlines, Deadline(scope))
            value = None
            with scope:
                value = await tool.call(ctx, arguments)
            if scope.cancelled_caught:
                return f"Error: tool {tool.name!r} timed out after {tool.timeout:g} seconds.", True
        return result_to_text(value), False
    except QuestionNotAnswered as e:
        return unanswered_text(e), False
    except _FATAL:
        raise
    except Exception as e:
        return f"Error: {type(e).__name__}: {e}", True
    finally:
        _current.reset(token)
