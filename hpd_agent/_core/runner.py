"""Running an agent nested inside another agent's tool call, and what root runs share.

``Agent`` (in ``agent.py``) holds the configuration and the public methods; a root run is a
``root.RootRun``. A nested run finds the root's coordinator through the calling tool's
``ToolContext`` and emits there. Both run the optional before-run step
(``Agent(clarifier=...)``) in a call frame of its own, announced like an agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..coordinator import Coordinator
from ..events import AgentFinished, AgentStarted, RunStatus
from ..exceptions import UserError
from ..messages import Message, SystemMessage, UserMessage
from ..run import RunResult
from ..sessions import RunSession
from ..text import error_text
from ..tools import ApprovalPolicy, Tool
from .context import ToolContext, _current, invocation_id
from .loop import AgentOutcome, AgentSpec, run_agent

__all__ = [
    "BeforeRun",
    "BeforeRunResult",
    "Blueprint",
    "agent_tool",
    "check_deps",
    "run_nested",
]


class BeforeRunResult(Protocol):
    """What a before-run step decided (``hpd_agent.presets.ClarifierResult`` is one)."""

    @property
    def rejected(self) -> bool:
        """True when the human rejected the work: the agent does not run."""
        ...

    def instructions(self) -> str:
        """What the step learned, added to the agent's instructions for this run."""
        ...


class BeforeRun(Protocol):
    """A step run in front of each run of an agent (``Agent(clarifier=...)``).

    It runs in its own call frame under the agent (path ``(*agent_path, name)``), so its
    questions reach the root stream like any agent's.
    """

    @property
    def name(self) -> str:
        """The step's name in agent paths."""
        ...

    async def before_run(self, request: str, ctx: ToolContext) -> BeforeRunResult:
        """Do the step for ``request``, asking from ``ctx``."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Blueprint:
    """What running an agent needs of it (built by ``Agent``)."""

    name: str
    spec: AgentSpec
    instructions: str
    before: BeforeRun | None
    deps_type: Any = None
    hosts: bool = False
    """Whether the agent's tree has a toolset: a root run then hosts ``RunServices``."""


def check_deps(bp: Blueprint, deps: Any) -> None:
    """Refuse a run whose ``deps`` do not fit the agent's ``deps_type``, before it starts.

    Raises:
        UserError: ``deps_type`` is set and ``deps`` is missing, or is not an instance of it
            (when ``deps_type`` is a class; other types are not checked).
    """
    wanted = bp.deps_type
    if wanted is None:
        return
    if deps is None:
        raise UserError(
            f"agent {bp.name!r} has deps_type={_type_name(wanted)}: pass deps= to this run "
            "(deps are not stored: pass them again to resume)"
        )
    if isinstance(wanted, type) and not _is_instance(deps, wanted):
        raise UserError(
            f"agent {bp.name!r} needs deps of type {_type_name(wanted)}, got {type(deps).__name__}"
        )


def _is_instance(value: Any, cls: type) -> bool:
    try:
        return isinstance(value, cls)
    except TypeError:  # a class isinstance cannot check (a protocol not runtime_checkable)
        return True


def _type_name(t: Any) -> str:
    return getattr(t, "__qualname__", None) or repr(t)


SessionOpener = Callable[[], Awaitable[RunSession]]


def first_messages(
    instructions: str, prompt: str, history: Sequence[Message] | None, extra: str = ""
) -> list[Message]:
    """The conversation an agent starts from: instructions, history, then the prompt."""
    messages: list[Message] = []
    system = "\n\n".join(p for p in (instructions, extra) if p)
    if system:
        messages.append(SystemMessage(content=system))
    if history:
        messages.extend(m for m in history if not isinstance(m, SystemMessage))
    messages.append(UserMessage(content=prompt))
    return messages


# -- the before-run step -----------------------------------------------------------------
async def before_run(
    step: BeforeRun,
    coordinator: Coordinator,
    *,
    agent_path: tuple[str, ...],
    scope_path: str,
    request: str,
    deadlines: Sequence[Any] = (),
    deps: Any = None,
) -> BeforeRunResult:
    """Run ``step`` in its own call frame under the agent, announced like an agent."""
    path = (*agent_path, step.name)
    call_path = f"{scope_path}/{step.name}"
    ctx = ToolContext(
        coordinator=coordinator,
        agent_path=path,
        tool_name=step.name,
        tool_call_id=step.name,
        call_path=call_path,
        scope_path=call_path,
        deadlines=deadlines,
        deps=deps,
    )
    common: dict[str, Any] = {
        "run_id": coordinator.run_id,
        "agent_path": path,
        "depth": ctx.depth,
        "invocation_id": ctx.invocation_id,
    }
    parent = invocation_id(scope_path)
    coordinator.emit(AgentStarted(input=request, parent_invocation_id=parent, **common))
    token = _current.set(ctx)
    try:
        result = await step.before_run(request, ctx)
    except BaseException as e:
        failed = not isinstance(e, Exception)
        coordinator.emit(
            AgentFinished(
                status="cancelled" if failed else "failed",
                error=None if failed else error_text(e),
                **common,
            )
        )
        raise
    finally:
        _current.reset(token)
    status: RunStatus = "rejected" if result.rejected else "completed"
    coordinator.emit(AgentFinished(status=status, output=result.instructions() or None, **common))
    return result


# -- nested runs -------------------------------------------------------------------------
async def run_nested(
    bp: Blueprint,
    ctx: ToolContext,
    prompt: str,
    *,
    history: Sequence[Message] | None = None,
    conversation_key: str | None = None,
    deps: Any = None,
) -> RunResult:
    """Run ``bp`` inside the tool call ``ctx``: its events go to the root's stream.

    With no ``deps`` of its own, the agent gets the calling run's (``ctx.deps``).

    Raises:
        UserError: The deps do not fit the agent's ``deps_type``.
    """
    if deps is None:
        deps = ctx.deps
    if bp.deps_type is not None:
        check_deps(bp, deps)
    coordinator = ctx.coordinator
    path = (*ctx.agent_path, bp.name)
    scope = f"{ctx.call_path}/{bp.name}"
    # The calling tool counted as busy; while this agent runs, its own calls count instead.
    coordinator.quiescence.hand_over()
    try:
        extra = ""
        if bp.before is not None:
            decided = await before_run(
                bp.before, coordinator, agent_path=path, scope_path=scope, request=prompt,
                deadlines=ctx.deadlines, deps=deps,
            )  # fmt: skip
            if decided.rejected:
                return RunResult(
                    run_id=ctx.run_id,
                    status="rejected",
                    output="The user rejected the proposed plan; the task was not carried out.",
                    clarifier=decided,
                )
            extra = decided.instructions()
        if conversation_key is None:
            messages = first_messages(bp.instructions, prompt, history, extra)
            outcome = await _nested_agent(bp, ctx, path, scope, messages, prompt, deps)
        else:
            outcome = await _kept_conversation(
                bp, ctx, path, scope, prompt, history, extra, conversation_key, deps
            )
    finally:
        coordinator.quiescence.enter()
    return RunResult(
        run_id=ctx.run_id,
        status="completed",
        output=outcome.output,
        messages=outcome.messages,
        usage=outcome.usage,
        truncated=outcome.truncated,
    )


def _nested_agent(
    bp: Blueprint,
    ctx: ToolContext,
    path: tuple[str, ...],
    scope: str,
    messages: list[Message],
    prompt: str,
    deps: Any,
) -> Coroutine[Any, Any, AgentOutcome]:
    # Returns the coroutine rather than awaiting it: no extra frame on the hot path.
    return run_agent(
        bp.spec,
        ctx.coordinator,
        agent_path=path,
        scope_path=scope,
        messages=messages,
        input=prompt,
        deadlines=ctx.deadlines,
        tool_call_id=ctx.tool_call_id,
        deps=deps,
        parent_invocation=ctx.invocation_id,
    )


async def _kept_conversation(
    bp: Blueprint,
    ctx: ToolContext,
    path: tuple[str, ...],
    scope: str,
    prompt: str,
    history: Sequence[Message] | None,
    extra: str,
    key: str,
    deps: Any,
) -> AgentOutcome:
    """A ``per_run`` call: continue the conversation this sub-agent had in this parent run."""
    conversations = ctx.coordinator.conversations
    async with conversations.lock(key):
        kept = conversations.get(key)
        if kept is None:
            messages = first_messages(bp.instructions, prompt, history, extra)
        else:
            follow_up = f"{extra}\n\n{prompt}" if extra else prompt
            messages = [*kept, UserMessage(content=follow_up)]
        outcome = await _nested_agent(bp, ctx, path, scope, messages, prompt, deps)
        # Kept only on success: a failed call must not leave a half turn behind.
        await conversations.put(key, messages)
    return outcome


def agent_tool(
    plan: Callable[[], Blueprint],
    agent: object,
    *,
    name: str,
    description: str,
    keep: bool,
    requires_approval: ApprovalPolicy,
    timeout: float | None,
) -> Tool:
    """The tool that runs an agent (``Agent.as_tool``): ``{"query": str}`` in, its answer out."""

    async def call_agent(ctx: ToolContext, query: str) -> Any:
        """Delegate a task to the agent.

        Args:
            query: The task or question for the agent, with every detail it needs.
        """
        key = f"{ctx.scope_path}|{name}" if keep else None
        result = await run_nested(plan(), ctx, query, conversation_key=key)
        # A validated output_type value goes back to the calling model as its JSON.
        return "" if result.output is None else result.output

    tool = Tool(
        call_agent,
        name=name,
        description=description,
        requires_approval=requires_approval,
        timeout=timeout,
    )
    tool.side_effects = False  # it acts only through requests and its agent's tools
    tool.agent = agent
    return tool
