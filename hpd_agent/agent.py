"""``Agent``: a name, instructions, a model and tools; run it, stream it, or make it a tool.

An agent run started while no tool call is active is a *root* run: it gets its own
coordinator and event stream. An agent run started inside a tool call (``as_tool``, or any
tool that calls ``agent.run``) is *nested*: it finds the root's coordinator through the
context and emits there, tagged with its agent path, at any depth. The running itself lives
in ``_runner``; this class holds the configuration and the public entry points.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from ._core.context import current_context
from ._core.loop import AgentSpec
from ._core.output import output_spec
from ._core.resuming import Resumable
from ._core.runner import (
    BeforeRun,
    Blueprint,
    SessionOpener,
    agent_tool,
    check_deps,
    resolve_policy,
    run_nested,
    run_root,
    stream_root,
)
from ._core.sync import SyncRunnable
from ._values.refs import caller_module, module_ref
from .coordinator import OnUnhandled, check_on_unhandled
from .exceptions import UserError
from .handlers._base import Handler
from .hooks import Hook
from .messages import Message
from .models._base import Model, infer_model
from .run import Run, RunResult
from .sessions import SessionStore
from .tools import ApprovalPolicy, Tool

__all__ = ["Agent", "Conversation"]

Conversation = Literal["fresh", "per_run"]
"""How an agent used as a tool remembers earlier calls: ``"fresh"`` starts a new
conversation on every call; ``"per_run"`` keeps one conversation per parent run, so a
follow-up call sees the first."""


def _new_run_id() -> str:
    return "run_" + uuid.uuid4().hex[:16]


class Agent(Resumable, SyncRunnable):
    """An LLM with instructions and tools, runnable on its own or as another agent's tool.

    Args:
        name: The agent's name; it labels its events (``agent_path``) and is its tool name
            in ``as_tool``.
        model: A litellm model string (``"openai/gpt-4o-mini"``) or a ``Model``.
        instructions: The system prompt.
        tools: ``Tool`` objects or plain functions (wrapped with ``@tool``).
        max_turns: Model turns allowed per run before ``MaxTurnsExceededError``.
        model_settings: Provider settings passed with every request (temperature, ...).
        description: What the agent does, shown to a parent model by ``as_tool``.
        on_unhandled: What requests do when nobody can answer them; see ``OnUnhandled``.
        clarifier: A step run in front of each run of this agent, typically a
            ``hpd_agent.presets.Clarifier``: it asks the human its questions (and agrees a
            plan) first; what it learns goes into the instructions for that run, and a
            rejected plan ends the run with status ``"rejected"``.
        api_base: For a string ``model``: the endpoint of an OpenAI-compatible server, e.g.
            ``"http://127.0.0.1:8080/v1"`` with ``model="openai/<served-name>"``.
        api_key: For a string ``model``: the key (default: the provider's environment
            variable, such as ``OPENAI_API_KEY``).
        output_type: The type of the final answer: a pydantic model, or any type pydantic
            validates (``list[int]``, a dataclass, ...). The model is told its JSON schema;
            ``result.output`` is the validated value, and a calling agent gets its JSON.
        output_retries: How many times an answer that does not validate is sent back to
            the model (with the validation error) before ``OutputValidationError``.
        deps_type: The type of the ``deps=`` every run must be given (tools read them as
            ``ctx.deps``); a run whose deps are missing or of another class is refused.
    """

    def __init__(
        self,
        name: str,
        *,
        model: str | Model,
        instructions: str = "",
        tools: Sequence[Tool | Callable[..., Any]] = (),
        max_turns: int = 25,
        model_settings: Mapping[str, Any] | None = None,
        description: str | None = None,
        on_unhandled: OnUnhandled = "decline",
        clarifier: BeforeRun | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        output_type: Any = None,
        output_retries: int = 1,
        deps_type: Any = None,
    ) -> None:
        if not name:
            raise UserError("an agent needs a name")
        if isinstance(model, Model) and (api_base is not None or api_key is not None):
            raise UserError("api_base/api_key go with a model string; pass them to your Model")
        if max_turns < 1:
            raise UserError("max_turns must be at least 1")
        self.name = name
        self.instructions = instructions
        self.description = description
        self.max_turns = max_turns
        self.model_settings: Mapping[str, Any] = dict(model_settings or {})
        self.on_unhandled: OnUnhandled = check_on_unhandled(on_unhandled)
        self.clarifier = clarifier
        self._home = caller_module()
        """The module that built the agent: a store records ``module:attr`` when it can."""
        self._model_source = model
        self._endpoint = {"api_base": api_base, "api_key": api_key}
        self._model: Model | None = model if isinstance(model, Model) else None
        self.tools: Mapping[str, Tool] = _tool_map(name, tools)
        self._blueprint: Blueprint | None = None
        self.output_type = output_type
        self.deps_type = deps_type
        self._output = output_spec(output_type, output_retries, name)

    def __repr__(self) -> str:
        return f"Agent({self.name!r})"

    @property
    def model(self) -> Model:
        """The resolved model (a string is turned into a ``LiteLLMModel`` on first use)."""
        if self._model is None:
            self._model = infer_model(self._model_source, **self._endpoint)
        return self._model

    def _plan(self) -> Blueprint:
        if self._blueprint is None:
            spec = AgentSpec(
                name=self.name,
                model=self.model,
                tools=self.tools,
                tool_definitions=tuple(t.definition for t in self.tools.values()),
                max_turns=self.max_turns,
                model_settings=self.model_settings,
                output=self._output,
            )
            told = "" if self._output is None else self._output.instructions()
            self._blueprint = Blueprint(
                name=self.name,
                spec=spec,
                instructions="\n\n".join(p for p in (self.instructions, told) if p),
                before=self.clarifier,
                deps_type=self.deps_type,
            )
        return self._blueprint

    # -- root runs -------------------------------------------------------------------------
    async def run(
        self,
        prompt: str,
        *,
        handler: Handler | None = None,
        history: Sequence[Message] | None = None,
        run_id: str | None = None,
        on_unhandled: OnUnhandled | None = None,
        store: SessionStore | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
    ) -> RunResult:
        """Run the agent to its final answer. Inside a tool call this is a nested run: its
        events and requests go to the root run's stream, and the root's handler answers them.

        Args:
            prompt: The task.
            handler: Answers questions and permission requests, and sees every event. With
                no handler, requests resolve by ``on_unhandled`` (they never hang).
            history: Earlier messages to continue from (e.g. a previous ``result.messages``).
            run_id: Id for the run; generated when omitted.
            on_unhandled: Overrides the agent's policy for this run.
            store: Journal the run there as it goes (model responses, tool results,
                requests), so ``resume`` can continue it after a crash; its requests can be
                answered by any process holding the store.
            hooks: Hooks for this run (see ``hpd_agent.hooks``), inside the store's journal
                and outside the process-wide ones.
            deps: What the tools of this run (and of the agents it calls, unless given
                their own) read as ``ctx.deps``. Not stored: pass them again to ``resume``.

        Returns:
            The run's result; ``result.output`` is the final answer (the validated value
            with ``output_type``). Under
            ``on_unhandled="interrupt"`` its status may be ``"interrupted"``, with the
            pending requests in ``result.pending``.

        Raises:
            AgentRunError, ModelError: The run failed.
        """
        ctx = current_context()
        if ctx is not None:
            if store is not None or hooks:
                raise UserError(
                    "a nested run journals into its root run's store and uses its hooks: "
                    "pass neither"
                )
            if handler is not None:
                raise UserError(
                    "a nested run (inside a tool call) has no handler of its own: its "
                    "requests go to the root run's stream and handler"
                )
            return await run_nested(self._plan(), ctx, prompt, history=history, deps=deps)
        bp = self._plan()
        if bp.deps_type is not None:
            check_deps(bp, deps)
        policy = resolve_policy(self.on_unhandled, on_unhandled, store)
        rid = run_id or _new_run_id()
        opener = _new_session(store, rid, self, prompt, history)
        return await run_root(bp, rid, prompt, history, handler, policy, opener, hooks, deps)

    def stream(
        self,
        prompt: str,
        *,
        history: Sequence[Message] | None = None,
        run_id: str | None = None,
        on_unhandled: OnUnhandled | None = None,
        store: SessionStore | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
    ) -> Run:
        """Start a root run whose events you iterate and whose requests you answer.

        Use as ``async with agent.stream(prompt) as run: async for event in run: ...``.
        Leaving the block before the run ends cancels the run and its whole tree. With
        ``store``, the run is journaled as in ``run``; ``deps`` are as in ``run``.
        """
        if current_context() is not None:
            raise UserError(
                "stream() inside a tool call: use run(); nested events reach the root stream"
            )
        bp = self._plan()
        check_deps(bp, deps)
        policy = resolve_policy(self.on_unhandled, on_unhandled, store)
        rid = run_id or _new_run_id()
        opener = _new_session(store, rid, self, prompt, history)
        return stream_root(bp, rid, prompt, history, policy, opener, hooks, deps)

    # -- as a tool -------------------------------------------------------------------------
    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        conversation: Conversation = "fresh",
        requires_approval: ApprovalPolicy = False,
        timeout: float | None = None,
    ) -> Tool:
        """Expose this agent as a tool taking ``{"query": str}`` and returning its answer.

        Args:
            name: Tool name; defaults to the agent's name.
            description: For the parent model; defaults to the agent's description.
            conversation: ``"fresh"`` (default) or ``"per_run"``; see ``Conversation``.
            requires_approval: Ask the human before each call; see ``Tool``.
            timeout: Seconds a call may take, not counting time waiting for a human.
        """
        return agent_tool(
            self._plan,
            name=name or self.name,
            description=description
            or self.description
            or f"Delegate a task to the {self.name} agent and get its answer.",
            keep=conversation == "per_run",
            requires_approval=requires_approval,
            timeout=timeout,
        )


def _new_session(
    store: SessionStore | None,
    run_id: str,
    agent: Agent,
    prompt: str,
    history: Sequence[Message] | None,
) -> SessionOpener | None:
    if store is None:
        return None
    ref = module_ref(agent, agent._home)  # pyright: ignore[reportPrivateUsage]

    async def opened() -> Any:
        return await store.open_session(
            run_id=run_id, agent_name=agent.name, prompt=prompt, history=history, agent_ref=ref
        )

    return opened


def _tool_map(agent_name: str, tools: Sequence[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    found: dict[str, Tool] = {}
    for t in tools:
        resolved = t if isinstance(t, Tool) else Tool(t)
        if resolved.name in found:
            raise UserError(f"agent {agent_name!r} has two tools named {resolved.name!r}")
        found[resolved.name] = resolved
    return found
