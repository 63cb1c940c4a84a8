"""The agent loop: model turn, then that turn's tool calls run concurrently, then repeat.

This is the only control flow in the package. One agent's run, at any depth, is one call to
``run_agent``; nested agents are tools whose function calls ``run_agent`` again with the
same coordinator and a longer path. Hooks wrap the three steps (the agent's run, each model
request, each tool call); with no hooks the loop calls the model and the tools directly.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio

from .._values.fanout import first_leaf, map_concurrently
from ..clarification import unanswered_text
from ..coordinator import Coordinator
from ..events import AgentFinished, AgentStarted, RunStatus, TextDelta
from ..exceptions import MaxTurnsExceededError, NoUserAvailableError, QuestionNotAnswered
from ..hooks import AgentInvocation, AgentOutcome, ToolExecution, ToolOutcome
from ..messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    truncated_call_text,
)
from ..models._base import Model, ModelRequestParams, ModelResponse, ToolDefinition
from ..text import TextMender, error_text
from ..tools import Tool, ToolArgumentsError, Toolset, result_to_text
from .context import Deadline, ToolContext, _current, invocation_id
from .model_request import direct_request, journaled, request_model
from .output import OutputSpec, output_text
from .services import RunServices
from .toolsets import resolve_tools

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
    output: OutputSpec | None = None
    """The check of the final answer (``Agent(output_type=...)``); None for plain text."""
    toolsets: tuple[Toolset, ...] = ()
    """Tools resolved when a call starts (``tools.Toolset``), added to ``tools`` per run."""


class _State:
    """Per-agent-run state shared by the turns and tool calls of that run."""

    __slots__ = (
        "agent_path",
        "coordinator",
        "deadlines",
        "deps",
        "depth",
        "ids",
        "invocation",
        "scope_path",
        "spec",
        "tool_chain",
        "usage",
    )

    def __init__(
        self,
        spec: AgentSpec,
        coordinator: Coordinator,
        agent_path: tuple[str, ...],
        scope_path: str,
        deadlines: tuple[Deadline, ...],
        deps: Any,
    ) -> None:
        self.spec = spec
        self.deps = deps
        self.coordinator = coordinator
        self.agent_path = agent_path
        self.depth = len(agent_path) - 1
        self.scope_path = scope_path
        self.invocation = invocation_id(scope_path)
        """This agent run's ``invocation_id`` (computed once: every event carries it)."""
        self.deadlines = deadlines
        self.usage = Usage()
        """This agent's own usage so far (kept here so a failure can report it too)."""
        self.ids: set[str] = set()
        """Tool-call ids already in this agent's conversation."""
        self.tool_chain: Callable[[ToolExecution], Awaitable[ToolOutcome]] | None = None
        """This run's tools behind the run's tool wrappers (built at the first call)."""

    def text(self, text: str) -> None:
        """A piece of this agent's streamed text, as a ``TextDelta`` (when observed)."""
        coordinator = self.coordinator
        if text and coordinator.observed:
            coordinator.emit(
                TextDelta(
                    run_id=coordinator.run_id, agent_path=self.agent_path, depth=self.depth,
                    invocation_id=self.invocation, text=text,
                )
            )  # fmt: skip


def run_agent(
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
    deps: Any = None,
    parent_invocation: str | None = None,
) -> Coroutine[Any, Any, AgentOutcome]:
    """Run one agent on ``messages`` (which it extends) until it gives a final answer.

    Emits ``AgentStarted``/``AgentFinished`` around the run; failures and cancellation are
    reported in ``AgentFinished`` and re-raised. ``deps`` is what its tools get as
    ``ctx.deps``. ``parent_invocation`` is the calling agent run's ``invocation_id``.
    An agent with toolsets has them resolved first (``_with_toolsets``); a toolset that
    cannot be resolved raises before the agent starts.

    Returns the coroutine that runs it (await it): not a coroutine of its own, so a run
    waiting in a model call keeps one frame less for every agent of its tree.
    """
    if spec.toolsets:
        again = partial(
            run_agent, coordinator=coordinator, agent_path=agent_path, scope_path=scope_path,
            messages=messages, input=input, deadlines=deadlines, tool_call_id=tool_call_id,
            resumed=resumed, deps=deps, parent_invocation=parent_invocation,
        )  # fmt: skip
        return _with_toolsets(spec, coordinator, again)
    state = _State(spec, coordinator, agent_path, scope_path, deadlines, deps)
    for m in messages:
        if isinstance(m, AssistantMessage):
            state.ids.update(c.id for c in m.tool_calls)

    if not coordinator.hooks.agent_wrappers:
        return _observed_run(state, messages, input, tool_call_id, parent_invocation)
    return _wrapped_run(state, messages, input, tool_call_id, resumed, parent_invocation)


async def _wrapped_run(
    state: _State,
    messages: list[Message],
    input: str,
    tool_call_id: str | None,
    resumed: bool,
    parent_invocation: str | None,
) -> AgentOutcome:
    """``_observed_run`` through the run's agent wrappers (a function of its own: the
    closure's cells would otherwise be made for every agent run, wrapped or not)."""
    coordinator, spec = state.coordinator, state.spec

    async def body(invocation: AgentInvocation) -> AgentOutcome:
        return await _observed_run(state, messages, input, tool_call_id, parent_invocation)

    invocation = AgentInvocation(
        run_id=coordinator.run_id,
        agent_name=spec.name,
        agent_path=state.agent_path,
        scope_path=state.scope_path,
        input=input,
        tool_call_id=tool_call_id,
        model=spec.model,
        resumed=resumed,
        invocation_id=state.invocation,
        parent_invocation_id=parent_invocation,
    )
    return await coordinator.hooks.agent(body)(invocation)


def _agent_finished(
    state: _State,
    tool_call_id: str | None,
    status: RunStatus,
    output: str | None = None,
    error: str | None = None,
    truncated: bool = False,
) -> AgentFinished:
    """The one place an ``AgentFinished`` is built."""
    return AgentFinished(
        run_id=state.coordinator.run_id,
        agent_path=state.agent_path,
        depth=state.depth,
        invocation_id=state.invocation,
        status=status,
        output=output,
        error=error,
        usage=state.usage,
        tool_call_id=tool_call_id,
        truncated=truncated,
    )


def _agent_started(
    state: _State, input: str, tool_call_id: str | None, parent: str | None
) -> AgentStarted:
    return AgentStarted(
        run_id=state.coordinator.run_id,
        agent_path=state.agent_path,
        depth=state.depth,
        invocation_id=state.invocation,
        input=input,
        tool_call_id=tool_call_id,
        parent_invocation_id=parent,
    )


async def _observed_run(
    state: _State,
    messages: list[Message],
    input: str,
    tool_call_id: str | None,
    parent_invocation: str | None,
) -> AgentOutcome:
    """The turns of one agent's run, announced by ``AgentStarted``/``AgentFinished``: one
    coroutine for the whole loop (each suspension resumes through every frame of the chain)."""
    coordinator, spec = state.coordinator, state.spec
    path, scope, quiescence = state.agent_path, state.scope_path, coordinator.quiescence
    coordinator.emit(_agent_started(state, input, tool_call_id, parent_invocation))
    wrapped = bool(coordinator.hooks.model_wrappers) or coordinator.journal is not None
    on_text = TextMender(state.text) if wrapped else state.text  # one for the whole run
    first, limit, refused = 0, spec.max_turns, 0
    try:
        while True:  # more than once only when an output_type check sends the model back
            for turn in range(first, limit):
                params = _params(state, turn, on_text)
                call = (
                    direct_request(coordinator, scope, spec.model, messages, params)
                    if wrapped
                    else spec.model.request(messages, params)
                )
                if call is None:  # model wrappers, or a replayed response
                    response = await request_model(
                        coordinator, path, scope, spec.model, messages, params, state.invocation
                    )
                else:  # awaited here, not in a coroutine of its own: a frame less in flight
                    quiescence.busy += 1
                    try:
                        response = await call
                        if wrapped:
                            response = await journaled(coordinator, scope, params, response)
                    finally:
                        quiescence.hand_over()  # its tool calls or the agent's end take over
                    coordinator.add_usage(response.usage)
                calls = _take(state, messages, response, turn, on_text)
                if not calls:
                    break
                quiescence.busy += len(calls)
                messages.extend(await _run_batch(state, turn, calls))
            else:
                raise _too_many_turns(spec)
            if spec.output is None:
                output: Any = response.text or ""
                break
            output, retry = spec.output.check(response.text, refused)
            if retry is None:
                break
            messages.append(retry)
            first, limit, refused = turn + 1, limit + 1, refused + 1  # a turn on top of max_turns
    except BaseException as e:
        _ended(state, tool_call_id, e)
        raise
    finally:
        # The chain holds the state (a cycle): freed now, not by the next full GC.
        state.tool_chain = None
    return _completed(state, tool_call_id, output, messages, response)


def _ended(state: _State, tool_call_id: str | None, error: BaseException) -> None:
    """``AgentFinished`` emitted for an agent run that a cancellation (or an interrupt)
    or a failure ended."""
    coordinator = state.coordinator
    if isinstance(error, anyio.get_cancelled_exc_class()):
        status: RunStatus = "interrupted" if coordinator.quiescence.interrupted else "cancelled"
        coordinator.emit(_agent_finished(state, tool_call_id, status))
    elif isinstance(error, Exception):
        coordinator.emit(_agent_finished(state, tool_call_id, "failed", error=error_text(error)))


def _completed(
    state: _State,
    tool_call_id: str | None,
    output: Any,
    messages: list[Message],
    response: ModelResponse,
) -> AgentOutcome:
    """``AgentFinished`` emitted for an agent run that completed; its outcome."""
    cut = response.truncated  # the token limit cut the final answer off
    text = output if state.spec.output is None else output_text(output)
    state.coordinator.emit(
        _agent_finished(state, tool_call_id, "completed", output=text, truncated=cut)
    )
    return AgentOutcome(output=output, messages=messages, usage=state.usage, truncated=cut)


async def _with_toolsets(
    spec: AgentSpec,
    coordinator: Coordinator,
    run: Callable[[AgentSpec], Awaitable[AgentOutcome]],
) -> AgentOutcome:
    """``run`` the agent with its toolsets' tools, as resolved for this root run (and kept
    for it) in the run's ``RunServices``; an agent the root run could not see (run from
    inside a plain tool function) gets services of its own, closed when this call ends."""
    services = coordinator.services
    if services is None:
        async with RunServices(coordinator.run_id) as own:
            return await run(await _resolved(spec, own))
    return await run(await _resolved(spec, services))


async def _resolved(spec: AgentSpec, services: RunServices) -> AgentSpec:
    """``spec`` with its toolsets' tools, as resolved for this run (kept for the run)."""

    async def merge() -> AgentSpec:
        tools = await resolve_tools(spec.name, spec.tools, spec.toolsets, services)
        definitions = tuple(t.definition for t in tools.values())
        return dataclasses.replace(spec, tools=tools, tool_definitions=definitions, toolsets=())

    return await services.once(spec, merge)


def _too_many_turns(spec: AgentSpec) -> MaxTurnsExceededError:
    return MaxTurnsExceededError(
        f"agent {spec.name!r} was still calling tools after max_turns={spec.max_turns} turns"
    )


def _params(state: _State, turn: int, on_text: Callable[[str], None]) -> ModelRequestParams:
    spec = state.spec
    return ModelRequestParams(
        tools=spec.tool_definitions,
        settings=spec.model_settings,
        agent_name=spec.name,
        agent_path=state.agent_path,
        turn=turn,
        on_text=on_text,
    )


def _take(
    state: _State,
    messages: list[Message],
    response: ModelResponse,
    turn: int,
    on_text: Callable[[str], None],
) -> tuple[ToolCall, ...]:
    """Take in one model response: usage, text, the assistant message; its tool calls."""
    state.usage = state.usage + response.usage
    if response.text and not response.streamed:
        on_text(response.text)
    calls = response.tool_calls
    if calls:
        calls = _normalise_ids(calls, turn, state.ids)
        if calls is not response.tool_calls:
            response = dataclasses.replace(response, tool_calls=calls, streamed=True)
    messages.append(response.to_message())
    return calls


_SAFE_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _normalise_ids(calls: tuple[ToolCall, ...], turn: int, used: set[str]) -> tuple[ToolCall, ...]:
    """Give every call an id of its own: results are matched to calls by id, never by position.

    Model-supplied ids are untrusted. One that is empty, used before in the conversation
    (this turn or an earlier one: ``used`` holds them, and gets this turn's), too long, or
    holds anything but letters, digits, ``_``, ``-`` and ``.`` (our call paths use ``@ : / ?
    |`` as separators, so such an id could collide with another call's path) is replaced by
    ``hpd_{turn}_{i}``, made unique against the turn's other ids.
    """
    seen = used
    fixed: list[ToolCall] | None = None
    for i, call in enumerate(calls):
        cid = call.id
        if cid in seen or not (cid.isascii() and _SAFE_ID.fullmatch(cid)):
            if fixed is None:
                fixed = list(calls)
            taken = seen | {c.id for c in calls}
            cid = f"hpd_{turn}_{i}"
            while cid in taken:
                cid += "_"
            fixed[i] = dataclasses.replace(call, id=cid)
        seen.add(cid)
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
        # A tool's own failure never gets here (_execute makes it that call's error result):
        # only run-ending errors (_FATAL) and a tool wrapper's exception do, and the first
        # cancelled the others. Surface it unwrapped, as a single call would, so it keeps
        # travelling up through the parent agents as itself.
        cancelled = anyio.get_cancelled_exc_class()
        errors = group.subgroup(lambda e: not isinstance(e, cancelled))
        raise first_leaf(group if errors is None else errors) from None


async def _run_call(state: _State, turn: int, call: ToolCall) -> ToolResultMessage:
    """One tool call: replayed from a durable run's journal (``RunJournal``, called before
    any hook: a replayed call reaches none), else made through the tool wrappers if any
    hook has one, else straight, and its outcome journaled."""
    coordinator = state.coordinator
    call_path = f"{state.scope_path}@{turn}:{call.id}"
    hooks, journal = coordinator.hooks, coordinator.journal
    try:
        recorded = None if journal is None else journal.recorded_outcome(call_path)
        if recorded is not None:
            text, is_error = _replayed(state, call, call_path, recorded)
        else:
            side_effects = True
            if journal is not None:
                tool = state.spec.tools.get(call.name)
                side_effects = tool is None or tool.side_effects
                waiting = journal.before_tool(side_effects)
                if waiting is not None:
                    await waiting
            if hooks.tool_wrappers:
                chain = state.tool_chain
                if chain is None:
                    chain = state.tool_chain = hooks.tool(partial(_live_call, state))
                outcome = await chain(_execution(state, call, call_path))
                text, is_error = outcome.text, outcome.is_error
            elif coordinator.observed:
                execution = _execution(state, call, call_path)
                outcome = await _live_call(state, execution)
                text, is_error = outcome.text, outcome.is_error
            else:
                # Unobserved, unhooked runs (plain run() without a handler) would only drop
                # the call's events: building them was a third of a trivial tool call's cost.
                text, error = await _execute(state, call, call_path)
                is_error = error is not None
            if journal is not None:
                waiting = journal.record_outcome(call_path, text, is_error, side_effects)
                if waiting is not None:
                    await waiting
    finally:
        coordinator.quiescence.leave()  # entered for the whole batch, before any call started
    return ToolResultMessage(tool_call_id=call.id, name=call.name, content=text, is_error=is_error)


def _replayed(
    state: _State, call: ToolCall, call_path: str, recorded: tuple[str, bool]
) -> tuple[str, bool]:
    """A journaled tool call's outcome: the tool does not run; its start and end are
    emitted again, marked ``replayed``."""
    execution = _execution(state, call, call_path)
    outcome = ToolOutcome(text=recorded[0], is_error=recorded[1])
    state.coordinator.emit(execution.started_event(replayed=True))
    state.coordinator.emit(execution.finished_event(outcome, replayed=True))
    return recorded


def _execution(state: _State, call: ToolCall, call_path: str) -> ToolExecution:
    coordinator = state.coordinator
    tool = state.spec.tools.get(call.name)
    return ToolExecution(
        run_id=coordinator.run_id,
        agent_path=state.agent_path,
        call=call,
        call_path=call_path,
        known=tool is not None,
        emit=coordinator.emit,
        side_effects=tool is None or tool.side_effects,
        invocation_id=state.invocation,
    )


async def _live_call(state: _State, execution: ToolExecution) -> ToolOutcome:
    """The tool call itself, announced by ``ToolCallStarted``/``ToolCallFinished`` when
    someone watches the run (an unwatched run would build them only to drop them)."""
    coordinator = state.coordinator
    if not coordinator.observed:
        text, error = await _execute(state, execution.call, execution.call_path)
        return ToolOutcome(text=text, is_error=error is not None, error_type=error)
    emit = coordinator.emit
    emit(execution.started_event())
    text, error = await _execute(state, execution.call, execution.call_path)
    outcome = ToolOutcome(text=text, is_error=error is not None, error_type=error)
    emit(execution.finished_event(outcome))
    return outcome


async def _execute(state: _State, call: ToolCall, call_path: str) -> tuple[str, str | None]:
    """Validate, ask permission, run: (text for the model, None), or on any failure
    (text for the model, the error's type: see ``ToolOutcome.error_type``)."""
    if call.truncated:
        return truncated_call_text(call), "truncated"
    tool = state.spec.tools.get(call.name)
    if tool is None:
        available = ", ".join(state.spec.tools) or "none"
        return f"Unknown tool {call.name!r}. Available tools: {available}.", "unknown_tool"
    try:
        arguments = tool.validate_arguments(call.arguments)
    except ToolArgumentsError as e:
        return str(e), type(e).__name__
    ctx = ToolContext(
        coordinator=state.coordinator,
        agent_path=state.agent_path,
        tool_name=tool.name,
        tool_call_id=call.id,
        call_path=call_path,
        scope_path=state.scope_path,
        deadlines=state.deadlines,
        deps=state.deps,
        invocation=state.invocation,
    )
    token = _current.set(ctx)
    try:
        if tool.needs_approval(arguments):
            refusal = await ctx.ask_permission(tool.name, arguments)
            if refusal is not None:
                return refusal, None
        if tool.timeout is None:
            return result_to_text(await tool.call(ctx, arguments)), None
        return await _call_with_timeout(tool, ctx, arguments, tool.timeout)
    except QuestionNotAnswered as e:
        return unanswered_text(e), None
    except _FATAL:
        raise
    except Exception as e:
        return f"Error: {error_text(e)}", type(e).__name__
    finally:
        _current.reset(token)


async def _call_with_timeout(
    tool: Tool, ctx: ToolContext, arguments: dict[str, Any], timeout: float
) -> tuple[str, str | None]:
    scope = anyio.CancelScope(deadline=anyio.current_time() + timeout)
    ctx.deadlines = (*ctx.deadlines, Deadline(scope))
    value = None
    with scope:
        value = await tool.call(ctx, arguments)
    if scope.cancelled_caught:
        return f"Error: tool {tool.name!r} timed out after {timeout:g} seconds.", "timeout"
    return result_to_text(value), None
