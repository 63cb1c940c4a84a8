"""``Agent``: a name, instructions, a model and tools; run it, stream it, or make it a tool.

An agent run started while no tool call is active is a *root* run: it gets its own
coordinator and event stream. An agent run started inside a tool call (``as_tool``, or any
tool that calls ``agent.run``) is *nested*: it finds the root's coordinator through the
context and emits there, tagged with its agent path, at any depth.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ._context import ToolContext, current_context
from ._loop import AgentSpec, run_agent
from .coordinator import Coordinator, OnUnhandled
from .events import RunFinished, RunStarted
from .exceptions import UserError
from .messages import Message, SystemMessage, UserMessage
from .models import Model, infer_model
from .run import Run, RunResult
from .tools import ApprovalPolicy, Tool

if TYPE_CHECKING:
    from .handlers import Handler
    from .presets import Clarifier, ClarifierResult
    from .store import Store
    from .store._journal import RunOpener

__all__ = ["Agent"]

Conversation = Literal["fresh", "per_run"]
"""How an agent used as a tool remembers earlier calls: ``"fresh"`` starts a new
conversation on every call; ``"per_run"`` keeps one conversation per parent run, so a
follow-up call sees the first."""


def _new_run_id() -> str:
    return "run_" + uuid.uuid4().hex[:16]


class Agent:
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
        clarifier: A ``hpd_agent.presets.Clarifier`` that runs before each run of this agent:
            it asks the human its questions (and agrees a plan) first; what it learns goes
            into the instructions for that run, and a rejected plan ends the run with status
            ``"rejected"``.
        api_base: For a string ``model``: the endpoint of an OpenAI-compatible server, e.g.
            ``"http://127.0.0.1:8080/v1"`` with ``model="openai/<served-name>"``.
        api_key: For a string ``model``: the key (default: the provider's environment
            variable, such as ``OPENAI_API_KEY``).
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
        clarifier: Clarifier | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
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
        self.on_unhandled: OnUnhandled = on_unhandled
        self.clarifier = clarifier
        self._model_source = model
        self._endpoint = {"api_base": api_base, "api_key": api_key}
        self._model: Model | None = model if isinstance(model, Model) else None
        tool_map: dict[str, Tool] = {}
        for t in tools:
            resolved = t if isinstance(t, Tool) else Tool(t)
            if resolved.name in tool_map:
                raise UserError(f"agent {name!r} has two tools named {resolved.name!r}")
            tool_map[resolved.name] = resolved
        self.tools: Mapping[str, Tool] = tool_map
        self._spec: AgentSpec | None = None

    def __repr__(self) -> str:
        return f"Agent({self.name!r})"

    @property
    def model(self) -> Model:
        """The resolved model (a string is turned into a ``LiteLLMModel`` on first use)."""
        if self._model is None:
            self._model = infer_model(self._model_source, **self._endpoint)
        return self._model

    def _agent_spec(self) -> AgentSpec:
        if self._spec is None:
            self._spec = AgentSpec(
                name=self.name,
                model=self.model,
                tools=self.tools,
                tool_definitions=tuple(t.definition for t in self.tools.values()),
                max_turns=self.max_turns,
                model_settings=self.model_settings,
            )
        return self._spec

    def _first_messages(
        self, prompt: str, history: Sequence[Message] | None, extra: str = ""
    ) -> list[Message]:
        messages: list[Message] = []
        instructions = "\n\n".join(p for p in (self.instructions, extra) if p)
        if instructions:
            messages.append(SystemMessage(content=instructions))
        if history:
            messages.extend(m for m in history if not isinstance(m, SystemMessage))
        messages.append(UserMessage(content=prompt))
        return messages

    # -- root runs -------------------------------------------------------------------------
    async def run(
        self,
        prompt: str,
        *,
        handler: Handler | None = None,
        history: Sequence[Message] | None = None,
        run_id: str | None = None,
        on_unhandled: OnUnhandled | None = None,
        store: Store | None = None,
    ) -> RunResult:
        """Run the agent to its final answer.

        Inside a tool call this is a nested run: its events and requests go to the root
        run's stream, and the root's handler answers them.

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

        Returns:
            The run's result; ``result.output`` is the final answer. Under
            ``on_unhandled="interrupt"`` its status may be ``"interrupted"``, with the
            pending requests in ``result.pending``.

        Raises:
            AgentRunError, ModelError: The run failed.
        """
        ctx = current_context()
        if ctx is not None:
            if store is not None:
                raise UserError("a nested run journals into its root run's store: pass none")
            if handler is not None:
                raise UserError(
                    "a nested run (inside a tool call) has no handler of its own: its "
                    "requests go to the root run's stream and handler"
                )
            return await self._run_nested(ctx, prompt, history=history)
        policy = self._policy(on_unhandled, store)
        rid = run_id or _new_run_id()
        opener = None if store is None else _opener(store, self.name, prompt, history)
        return await self._run_root(rid, prompt, history, handler, policy, opener)

    async def _run_root(
        self,
        run_id: str,
        prompt: str,
        history: Sequence[Message] | None,
        handler: Handler | None,
        policy: OnUnhandled,
        opener: RunOpener | None,
    ) -> RunResult:
        if handler is not None:
            from .handlers import serve

            async with self._stream(run_id, prompt, history, policy, opener) as run:
                await serve(run, handler)
            return run.result
        coordinator = Coordinator(run_id, on_unhandled=policy)
        result = await self._execute_root(coordinator, prompt, history, opener)
        if result.error is not None:
            raise result.error
        return result

    def _policy(self, on_unhandled: OnUnhandled | None, store: Store | None) -> OnUnhandled:
        policy = on_unhandled or self.on_unhandled
        if policy == "interrupt" and store is None:
            raise UserError(
                'on_unhandled="interrupt" needs a store to keep the pending requests: '
                "pass store=SQLiteStore(path) (or MemoryStore() within one process)"
            )
        return policy

    def stream(
        self,
        prompt: str,
        *,
        history: Sequence[Message] | None = None,
        run_id: str | None = None,
        on_unhandled: OnUnhandled | None = None,
        store: Store | None = None,
    ) -> Run:
        """Start a root run whose events you iterate and whose requests you answer.

        Use as ``async with agent.stream(prompt) as run: async for event in run: ...``.
        Leaving the block before the run ends cancels the run and its whole tree. With
        ``store``, the run is journaled as in ``run``.
        """
        if current_context() is not None:
            raise UserError(
                "stream() inside a tool call: use run(); nested events reach the root stream"
            )
        policy = self._policy(on_unhandled, store)
        opener = None if store is None else _opener(store, self.name, prompt, history)
        return self._stream(run_id or _new_run_id(), prompt, history, policy, opener)

    def _stream(
        self,
        run_id: str,
        prompt: str,
        history: Sequence[Message] | None,
        policy: OnUnhandled,
        opener: RunOpener | None,
    ) -> Run:
        async def execute(coordinator: Coordinator) -> RunResult:
            return await self._execute_root(coordinator, prompt, history, opener)

        return Run(
            run_id=run_id,
            prompt=prompt,
            agent_name=self.name,
            executor=execute,
            on_unhandled=policy,
        )

    # -- durable runs ----------------------------------------------------------------------
    async def resume(
        self,
        run_id: str,
        *,
        store: Store,
        answers: Mapping[str, Any] | None = None,
        handler: Handler | None = None,
        on_unhandled: OnUnhandled | None = None,
        max_age: float | None = None,
    ) -> RunResult:
        """Continue a run journaled in ``store`` (after a crash, or an interrupt).

        The root agent starts again from its first message and replays the journal: each
        recorded model response and tool result is reused, so no model call and no tool
        side effect runs twice; a request raised before keeps its id and is still pending
        in the store (or answered there: then it returns at once). The run then continues
        live, as if never interrupted.

        Args:
            run_id: The run to continue.
            store: The store it was journaled in.
            answers: ``{request_id: answer}`` to give pending requests first (validated
                against each stored question; a refused one raises and nothing resumes).
            handler: Answers new requests, as in ``run``.
            on_unhandled: Policy for requests nobody here answers, as in ``run``.
            max_age: Expire this run's pending requests older than this many seconds first;
                their askers see the timeout text.

        Raises:
            UserError: No such run, or it was started by an agent of another name.
            RequestError: One of ``answers`` was refused.
        """
        if current_context() is not None:
            raise UserError("resume() inside a tool call: resume the root run instead")
        policy = self._policy(on_unhandled, store)
        opener = await _resume_opener(store, self.name, run_id, answers, max_age)
        return await self._run_root(run_id, opener.prompt, opener.history, handler, policy, opener)

    def resume_stream(
        self,
        run_id: str,
        *,
        store: Store,
        on_unhandled: OnUnhandled | None = None,
        max_age: float | None = None,
    ) -> Run:
        """``resume`` as a stream: iterate the events (replayed ones have ``replayed=True``).

        The run record is read when the run starts; an unknown run fails the run with
        ``UserError``.
        """
        if current_context() is not None:
            raise UserError("resume_stream() inside a tool call: resume the root run instead")
        policy = self._policy(on_unhandled, store)
        name = self.name

        async def execute(coordinator: Coordinator) -> RunResult:
            try:
                opener = await _resume_opener(store, name, run_id, None, max_age)
            except UserError as e:
                return RunResult(run_id=run_id, status="failed", error=e)
            return await self._execute_root(coordinator, opener.prompt, opener.history, opener)

        return Run(run_id=run_id, prompt="", agent_name=name, executor=execute, on_unhandled=policy)

    async def _execute_root(
        self,
        coordinator: Coordinator,
        prompt: str,
        history: Sequence[Message] | None,
        opener: RunOpener | None = None,
    ) -> RunResult:
        """Run as the root agent; failures end up in the result, cancellation propagates."""
        journal = None if opener is None else await opener.open(coordinator)
        scope = anyio.CancelScope()
        coordinator.interrupt_scope = scope
        result: RunResult | None = None
        with scope:
            result = await self._execute_body(coordinator, prompt, history)
        if result is None:  # only "interrupt" cancels this scope
            run_id = coordinator.run_id
            pending = coordinator.pending()
            result = RunResult(
                run_id=run_id, status="interrupted", usage=coordinator.usage, pending=pending
            )
            coordinator.emit(
                RunFinished(
                    run_id=run_id,
                    agent_path=(self.name,),
                    depth=0,
                    status="interrupted",
                    usage=result.usage,
                )
            )
        if journal is not None:
            await journal.finish_run(result)
        return result

    async def _execute_body(
        self, coordinator: Coordinator, prompt: str, history: Sequence[Message] | None
    ) -> RunResult:
        run_id = coordinator.run_id
        path = (self.name,)
        coordinator.emit(RunStarted(run_id=run_id, agent_path=path, depth=0, prompt=prompt))
        messages = self._first_messages(prompt, history)
        clarified: ClarifierResult | None = None
        try:
            if self.clarifier is not None:
                clarified = await self.clarifier.run_in_front(
                    coordinator, agent_path=path, scope_path=run_id, request=prompt
                )
                if clarified.rejected:
                    return _rejected(coordinator, path, messages, clarified)
                messages = self._first_messages(prompt, history, clarified.instructions())
            outcome = await run_agent(
                self._agent_spec(),
                coordinator,
                agent_path=path,
                scope_path=run_id,
                messages=messages,
                input=prompt,
            )
        except Exception as e:
            result = RunResult(
                run_id=run_id,
                status="failed",
                messages=messages,
                usage=coordinator.usage,
                error=e,
                clarifier=clarified,
            )
            coordinator.emit(
                RunFinished(
                    run_id=run_id,
                    agent_path=path,
                    depth=0,
                    status="failed",
                    error=f"{type(e).__name__}: {e}",
                    usage=result.usage,
                )
            )
            return result
        usage = coordinator.usage
        coordinator.emit(
            RunFinished(
                run_id=run_id,
                agent_path=path,
                depth=0,
                status="completed",
                output=outcome.output,
                usage=usage,
            )
        )
        return RunResult(
            run_id=run_id,
            status="completed",
            output=outcome.output,
            messages=outcome.messages,
            usage=usage,
            clarifier=clarified,
            truncated=outcome.truncated,
        )

    # -- nested runs -----------------------------------------------------------------------
    async def _run_nested(
        self,
        ctx: ToolContext,
        prompt: str,
        *,
        history: Sequence[Message] | None = None,
        conversation_key: str | None = None,
    ) -> RunResult:
        coordinator = ctx.coordinator
        journal = coordinator.journal
        if journal is None:
            return await self._nested_body(ctx, prompt, history, conversation_key)
        # The calling tool is counted busy; while this agent runs, its own calls count.
        journal.leave()
        try:
            return await self._nested_body(ctx, prompt, history, conversation_key)
        finally:
            journal.enter()

    async def _nested_body(
        self,
        ctx: ToolContext,
        prompt: str,
        history: Sequence[Message] | None,
        conversation_key: str | None,
    ) -> RunResult:
        coordinator = ctx.coordinator
        path = (*ctx.agent_path, self.name)
        scope = f"{ctx.call_path}/{self.name}"
        extra = ""
        if self.clarifier is not None:
            clarified = await self.clarifier.run_in_front(
                coordinator,
                agent_path=path,
                scope_path=scope,
                request=prompt,
                deadlines=ctx.deadlines,
            )
            if clarified.rejected:
                return RunResult(
                    run_id=ctx.run_id,
                    status="rejected",
                    output="The user rejected the proposed plan; the task was not carried out.",
                    clarifier=clarified,
                )
            extra = clarified.instructions()
        if conversation_key is None:
            messages = self._first_messages(prompt, history, extra)
            outcome = await run_agent(
                self._agent_spec(),
                coordinator,
                agent_path=path,
                scope_path=scope,
                messages=messages,
                input=prompt,
                deadlines=ctx.deadlines,
                tool_call_id=ctx.tool_call_id,
            )
        else:
            lock = coordinator.conversation_locks.setdefault(conversation_key, anyio.Lock())
            async with lock:
                kept = coordinator.conversations.get(conversation_key)
                journal = coordinator.journal
                if kept is None and journal is not None:
                    # After a cold resume the earlier calls were replayed, not run: their
                    # conversation comes back from the journal.
                    kept = journal.conversation(conversation_key)
                if kept is None:
                    messages = self._first_messages(prompt, history, extra)
                else:
                    follow_up = f"{extra}\n\n{prompt}" if extra else prompt
                    messages = [*kept, UserMessage(content=follow_up)]
                outcome = await run_agent(
                    self._agent_spec(),
                    coordinator,
                    agent_path=path,
                    scope_path=scope,
                    messages=messages,
                    input=prompt,
                    deadlines=ctx.deadlines,
                    tool_call_id=ctx.tool_call_id,
                )
                # Kept only on success: a failed call must not leave a half turn behind.
                coordinator.conversations[conversation_key] = messages
                if journal is not None:
                    await journal.record_conversation(conversation_key, messages)
        return RunResult(
            run_id=ctx.run_id,
            status="completed",
            output=outcome.output,
            messages=outcome.messages,
            usage=outcome.usage,
            truncated=outcome.truncated,
        )

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
        agent = self
        tool_name = name or self.name
        keep = conversation == "per_run"

        async def call_agent(ctx: ToolContext, query: str) -> str:
            """Delegate a task to the agent.

            Args:
                query: The task or question for the agent, with every detail it needs.
            """
            key = f"{ctx.scope_path}|{tool_name}" if keep else None
            result = await agent._run_nested(ctx, query, conversation_key=key)
            return result.output or ""

        return Tool(
            call_agent,
            name=tool_name,
            description=description
            or self.description
            or f"Delegate a task to the {self.name} agent and get its answer.",
            requires_approval=requires_approval,
            timeout=timeout,
        )


def _rejected(
    coordinator: Coordinator,
    path: tuple[str, ...],
    messages: list[Message],
    clarified: ClarifierResult,
) -> RunResult:
    """End a root run whose plan the human rejected: nothing else runs."""
    usage = coordinator.usage
    coordinator.emit(
        RunFinished(
            run_id=coordinator.run_id,
            agent_path=path,
            depth=0,
            status="rejected",
            error="the user rejected the proposed plan",
            usage=usage,
        )
    )
    return RunResult(
        run_id=coordinator.run_id,
        status="rejected",
        messages=messages,
        usage=usage,
        clarifier=clarified,
    )


def _opener(
    store: Store, agent_name: str, prompt: str, history: Sequence[Message] | None
) -> RunOpener:
    from .store._journal import RunOpener  # the store package loads only when used

    return RunOpener(store, agent_name, prompt, history)


async def _resume_opener(
    store: Store,
    agent_name: str,
    run_id: str,
    answers: Mapping[str, Any] | None,
    max_age: float | None,
) -> RunOpener:
    from .store._journal import RunOpener

    return await RunOpener.for_resume(store, agent_name, run_id, answers, max_age)
