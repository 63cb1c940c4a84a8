"""``Agent``: a name, instructions, a model and tools; run it, stream it, or make it a tool.

An agent run started while no tool call is active is a *root* run: it gets its own
coordinator and event stream. An agent run started inside a tool call (``as_tool``, or any
tool that calls ``agent.run``) is *nested*: it finds the root's coordinator through the
context and emits there, tagged with its agent path, at any depth. The running itself lives
in ``_runner``; this class holds the configuration and the public entry points: ``run``,
``stream``, ``run_sync`` start a run; ``resume`` and ``resume_stream`` continue one journaled
in a store.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from functools import partial
from typing import Any, Literal, TypedDict, cast

import anyio
from typing_extensions import Unpack

from ._core.context import current_context
from ._core.journaling import Durability, check_durability
from ._core.lease_wait import wait_for_lease
from ._core.loop import AgentSpec
from ._core.output import OutputSpec, output_spec
from ._core.root import RootRun, SessionOpener, resolve_policy, session_opener
from ._core.runner import BeforeRun, Blueprint, agent_tool, check_deps, run_nested
from ._core.sync import refuse_sync
from ._values.refs import caller_module, module_ref
from .coordinator import OnUnhandled, check_on_unhandled
from .exceptions import UserError
from .handlers._base import Handler
from .hooks import Hook
from .messages import Message
from .models._base import Model, infer_model, prepare_model
from .run import Run, RunResult
from .sessions import RunSession, SessionStore
from .tools import ApprovalPolicy, Tool, Toolset

__all__ = ["Agent", "Conversation", "RunOptions"]

Conversation = Literal["fresh", "per_run"]
"""How an agent used as a tool remembers earlier calls: ``"fresh"`` starts a new
conversation on every call; ``"per_run"`` keeps one conversation per parent run, so a
follow-up call sees the first."""


class RunOptions(TypedDict, total=False):
    """The keywords of ``Agent.run`` (and ``run_sync``); see ``Agent.run`` for each."""

    handler: Handler | None
    history: Sequence[Message] | None
    run_id: str | None
    on_unhandled: OnUnhandled | None
    store: SessionStore | None
    session: RunSession | None
    hooks: Sequence[Hook]
    deps: Any
    durability: Durability | None


MAX_EXAMPLES = 8
"""How many example prompts an agent may suggest."""
MAX_EXAMPLE_LENGTH = 200
"""The longest example prompt, in characters."""


def check_examples(examples: object) -> tuple[str, ...]:
    """``examples`` as a tuple of prompts (each stripped), else ``UserError`` saying what is
    wrong: not a sequence of strings, a blank one, a long one, too many."""
    if isinstance(examples, str | bytes) or not isinstance(examples, Sequence):
        raise UserError(f"examples must be a list of prompt strings, got {type(examples).__name__}")
    items = cast(Sequence[object], examples)
    if len(items) > MAX_EXAMPLES:
        raise UserError(f"at most {MAX_EXAMPLES} examples, got {len(items)}")
    out: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise UserError(f"examples[{i}] must be a string, got {type(item).__name__}")
        prompt = item.strip()
        if not prompt:
            raise UserError(f"examples[{i}] is blank")
        if len(prompt) > MAX_EXAMPLE_LENGTH:
            raise UserError(
                f"examples[{i}] is {len(prompt)} characters long; at most {MAX_EXAMPLE_LENGTH}"
            )
        out.append(prompt)
    return tuple(out)


def _new_run_id() -> str:
    return f"run_{time.time_ns() // 1000:013x}{secrets.token_hex(8)}"


class Agent:
    """An LLM with instructions and tools, runnable on its own or as another agent's tool.

    Args:
        name: The agent's name; it labels its events (``agent_path``) and is its tool name
            in ``as_tool``.
        model: A litellm model string (``"openai/gpt-4o-mini"``) or a ``Model``.
        instructions: The system prompt.
        tools: ``Tool`` objects, plain functions (wrapped with ``@tool``), and ``Toolset``s:
            tools known only when a run starts, such as an MCP server's
            (``hpd_agent.mcp.MCPTools``), resolved when a call of the agent starts, once per
            root run.
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
        examples: A few short prompts people might start with (at most
            ``MAX_EXAMPLES``, each at most ``MAX_EXAMPLE_LENGTH`` characters): the web page
            of ``hpd-agent serve`` offers them as suggestions (``GET /info``).
    """

    def __init__(
        self,
        name: str,
        *,
        model: str | Model,
        instructions: str = "",
        tools: Sequence[Tool | Toolset | Callable[..., Any]] = (),
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
        examples: Sequence[str] = (),
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
        self.examples: tuple[str, ...] = check_examples(examples)
        """Prompts to suggest to people (the served page's welcome)."""
        self.max_turns = max_turns
        self.model_settings: Mapping[str, Any] = dict(model_settings or {})
        self.on_unhandled: OnUnhandled = check_on_unhandled(on_unhandled)
        self.clarifier = clarifier
        self._home = caller_module()
        """The module that built the agent: a store records ``module:attr`` when it can."""
        self._model_source = model
        self._endpoint = {"api_base": api_base, "api_key": api_key}
        self._model: Model | None = model if isinstance(model, Model) else None
        prepare_model(model)  # a model string: litellm starts loading in the background
        self.tools: Mapping[str, Tool] = _tool_map(name, tools)
        self.toolsets: tuple[Toolset, ...] = tuple(t for t in tools if isinstance(t, Toolset))
        """The agent's toolsets (their tools are known per run; ``Agent.tools`` has the rest)."""
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
            self._blueprint = _blueprint_of(self, self._output)
        return self._blueprint

    # -- root runs -------------------------------------------------------------------------
    def run(
        self,
        prompt: str,
        *,
        handler: Handler | None = None,
        history: Sequence[Message] | None = None,
        run_id: str | None = None,
        on_unhandled: OnUnhandled | None = None,
        store: SessionStore | None = None,
        session: RunSession | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
        durability: Durability | None = None,
    ) -> Coroutine[Any, Any, RunResult]:
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
            session: A ``RunSession`` an integration brings instead of a store (a workflow
                engine keeping the run its own way; see ``hpd_agent.sessions``).
            hooks: Hooks for this run (see ``hpd_agent.hooks``), inside the store's journal
                and outside the process-wide ones.
            deps: What the tools of this run (and of the agents it calls, unless given
                their own) read as ``ctx.deps``. Not stored: pass them again to ``resume``.
            durability: ``"sync"``, ``"async"`` or ``"exit"``: when the store commits the
                run's facts (docs/guarantees.md, "Durability modes"); None: the store's
                ``run_durability`` (``"sync"`` unless set).

        Returns:
            The coroutine to await (no frame of ``run`` is kept for the run's life; it
            raises what the run raises) for the run's result; ``result.output`` is the
            final answer (the validated value with ``output_type``). Under
            ``on_unhandled="interrupt"`` its status may be ``"interrupted"``, with the
            pending requests in ``result.pending``.

        Raises:
            UserError: ``durability`` is not one of the three, or comes without a store.
            AgentRunError, ModelError: The run failed.
        """
        ctx = current_context()
        try:
            if ctx is not None:
                if store or session or hooks or handler is not None or durability is not None:
                    raise _nested_options()
                return run_nested(self._plan(), ctx, prompt, history=history, deps=deps)
            root = self._root(
                prompt, history, run_id, on_unhandled, store, session, hooks, deps, durability
            )
        except Exception as e:
            return _raising(e)
        return root.to_end(handler)

    def stream(
        self,
        prompt: str,
        *,
        history: Sequence[Message] | None = None,
        run_id: str | None = None,
        on_unhandled: OnUnhandled | None = None,
        store: SessionStore | None = None,
        session: RunSession | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
        durability: Durability | None = None,
    ) -> Run:
        """Start a root run whose events you iterate and whose requests you answer.

        Use as ``async with agent.stream(prompt) as run: async for event in run: ...``.
        Leaving the block before the run ends cancels the run and its whole tree. With
        ``store`` (or ``session``), the run is journaled as in ``run``; ``deps`` and
        ``durability`` are as in ``run``.
        """
        if current_context() is not None:
            raise UserError(
                "stream() inside a tool call: use run(); nested events reach the root stream"
            )
        return self._root(
            prompt, history, run_id, on_unhandled, store, session, hooks, deps, durability
        ).stream()

    def run_sync(self, prompt: str, **options: Unpack[RunOptions]) -> RunResult:
        """``run`` for synchronous code: starts an event loop, runs to the final answer.

        Takes the keywords of ``run``. Where an event loop is running already (``async def``
        code, a Jupyter notebook, a trio program) use ``await agent.run(...)`` instead.

        Raises:
            UserError: Called inside a running event loop or inside a tool call.
            AgentRunError, ModelError: The run failed (as ``run``).
        """
        refuse_sync(self.name)
        return anyio.run(partial(self.run, prompt, **options))

    def _root(
        self,
        prompt: str,
        history: Sequence[Message] | None,
        run_id: str | None,
        on_unhandled: OnUnhandled | None,
        store: SessionStore | None,
        session: RunSession | None,
        hooks: Sequence[Hook],
        deps: Any,
        durability: Durability | None = None,
    ) -> RootRun:
        bp = self._plan()
        check_deps(bp, deps)
        mode = _checked_mode(durability, store)
        durable = store is not None or (session is not None and session.backend.durable)
        policy = resolve_policy(self.on_unhandled, on_unhandled, durable)
        rid = run_id or _new_run_id()
        opener = session_opener(
            store, session, _new_session(store, rid, self, prompt, history, mode)
        )
        return RootRun(
            bp, run_id=rid, prompt=prompt, history=history, policy=policy, hooks=hooks,
            deps=deps, open_session=opener,
        )  # fmt: skip

    # -- durable runs ----------------------------------------------------------------------
    async def resume(
        self,
        run_id: str,
        *,
        store: SessionStore,
        answers: Mapping[str, Any] | None = None,
        handler: Handler | None = None,
        on_unhandled: OnUnhandled | None = None,
        max_age: float | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
        wait: bool | float = False,
        durability: Durability | None = None,
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
                against each stored question; a refused one raises and nothing resumes);
                ``Decline()`` as an answer declines that request. Recorded as given on
                channel ``"api"`` by nobody, unless an answer comes as
                ``hpd_agent.backend.Authored(answer, Author(by, channel))``.
            handler, on_unhandled, hooks, deps: As in ``run`` (a store does not keep deps).
            max_age: Expire this run's pending requests older than this many seconds first;
                their askers see the timeout text.
            wait: What to do when another holder's lease on the run is live. A holder on
                this machine whose process is gone is taken over at once whatever ``wait``
                says. False (default): raise ``RunLeasedError`` at once. True: wait until
                that lease expires, then take it over; if its holder renews it meanwhile (it
                is alive), raise. A number: keep waiting at most that many seconds.
            durability: As in ``run``, for this life of the run (it may differ from the
                mode of the life before).

        Raises:
            UserError: No such run, or it was started by an agent of another name.
            RunLeasedError: Another process drives the run (it holds the run's lease in the
                store, see ``wait``); nothing was written. See docs/guarantees.md.
            RequestError: One of ``answers`` was refused.
        """
        if current_context() is not None:
            raise UserError("resume() inside a tool call: resume the root run instead")
        root = self._reopened(
            run_id, store, on_unhandled, max_age, hooks, deps, answers, wait, durability
        )
        # Reopened before the run starts: a refused answer or a held lease raises here.
        assert root.open_session is not None
        session = await root.open_session()
        root.prompt, root.history = session.prompt, session.history
        root.open_session = session_opener(None, session, None)
        return await root.to_end(handler)

    def resume_stream(
        self,
        run_id: str,
        *,
        store: SessionStore,
        on_unhandled: OnUnhandled | None = None,
        max_age: float | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
        wait: bool | float = False,
        answers: Mapping[str, Any] | None = None,
        durability: Durability | None = None,
    ) -> Run:
        """``resume`` as a stream: iterate the events (replayed ones have ``replayed=True``).
        ``answers`` as for ``resume``: written once the run's lease is taken; ``durability``
        as for ``resume``.

        The run record is read when the run starts. An unknown run (or one started by an
        agent of another name) keeps the stream's shape: ``RunStarted``, then
        ``RunFinished`` with status ``"failed"`` and the ``UserError``, which ``run.result``
        holds too (leaving the ``async with`` block raises it).
        """
        if current_context() is not None:
            raise UserError("resume_stream() inside a tool call: resume the root run instead")
        reopened = self._reopened(
            run_id, store, on_unhandled, max_age, hooks, deps, answers, wait, durability
        )
        return reopened.stream()

    def _reopened(
        self,
        run_id: str,
        store: SessionStore,
        on_unhandled: OnUnhandled | None,
        max_age: float | None,
        hooks: Sequence[Hook],
        deps: Any,
        answers: Mapping[str, Any] | None = None,
        wait: bool | float = False,
        durability: Durability | None = None,
    ) -> RootRun:
        bp = self._plan()
        check_deps(bp, deps)
        policy = resolve_policy(self.on_unhandled, on_unhandled, True)
        name = self.name
        mode = _checked_mode(durability, store)

        async def take() -> RunSession:
            if mode is None:  # a store of its own may take no ``durability``
                return await store.resume_session(
                    run_id, agent_name=name, answers=answers, max_age=max_age
                )
            return await store.resume_session(
                run_id, agent_name=name, answers=answers, max_age=max_age, durability=mode
            )

        async def reopen() -> RunSession:
            return await wait_for_lease(take, wait)

        return RootRun(
            bp, run_id=run_id, prompt="", history=None, policy=policy, hooks=hooks, deps=deps,
            open_session=reopen,
        )  # fmt: skip

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
            self,
            name=name or self.name,
            description=description
            or self.description
            or f"Delegate a task to the {self.name} agent and get its answer.",
            keep=conversation == "per_run",
            requires_approval=requires_approval,
            timeout=timeout,
        )


def _blueprint_of(agent: Agent, output: OutputSpec | None) -> Blueprint:
    """What the runner runs of ``agent`` (its spec, its instructions with ``output``'s, its
    before-run step), built once per agent by ``Agent._plan``."""
    spec = AgentSpec(
        name=agent.name,
        model=agent.model,
        tools=agent.tools,
        tool_definitions=tuple(t.definition for t in agent.tools.values()),
        max_turns=agent.max_turns,
        model_settings=agent.model_settings,
        output=output,
        toolsets=agent.toolsets,
    )
    told = "" if output is None else output.instructions()
    return Blueprint(
        name=agent.name,
        spec=spec,
        instructions="\n\n".join(p for p in (agent.instructions, told) if p),
        before=agent.clarifier,
        deps_type=agent.deps_type,
        hosts=_has_toolsets(agent, [agent]),
    )


def _new_session(
    store: SessionStore | None,
    run_id: str,
    agent: Agent,
    prompt: str,
    history: Sequence[Message] | None,
    durability: Durability | None,
) -> SessionOpener | None:
    if store is None:
        return None
    ref = module_ref(agent, agent._home)  # pyright: ignore[reportPrivateUsage]
    return _NewSession(store, run_id, agent.name, prompt, history, ref, durability)


def _nested_options() -> UserError:
    """A nested run takes its root run's store, session, hooks, handler and durability."""
    return UserError(
        "a nested run (inside a tool call) uses its root run's store, hooks and "
        "handler: pass none of them"
    )


async def _raising(error: Exception) -> RunResult:
    """``Agent.run``'s error, raised where a coroutine function would: when awaited."""
    raise error


def _checked_mode(durability: object, store: SessionStore | None) -> Durability | None:
    """``durability`` checked (None: the store's default); it needs a store."""
    if durability is None:
        return None
    if store is None:
        raise UserError(
            "durability= says when a store commits the run's facts: pass store= with it"
        )
    return check_durability(durability)


@dataclasses.dataclass(frozen=True, slots=True)
class _NewSession:
    """Opens a new run's session in ``store`` (one object, kept for the run's life: a
    closure would be a function, a tuple and six cells)."""

    store: SessionStore
    run_id: str
    agent_name: str
    prompt: str
    history: Sequence[Message] | None
    ref: str | None
    durability: Durability | None

    def __call__(self) -> Awaitable[Any]:
        if self.durability is None:  # a store of its own may take no ``durability``
            return self.store.open_session(
                run_id=self.run_id, agent_name=self.agent_name, prompt=self.prompt,
                history=self.history, agent_ref=self.ref,
            )  # fmt: skip
        return self.store.open_session(
            run_id=self.run_id, agent_name=self.agent_name, prompt=self.prompt,
            history=self.history, agent_ref=self.ref, durability=self.durability,
        )  # fmt: skip


def _has_toolsets(agent: Agent, seen: list[Agent]) -> bool:
    """Whether ``agent`` or one its tools run (``Tool.agent``, at any depth) has a toolset:
    a root run of it then keeps the toolsets' resources for the whole run."""
    if agent.toolsets:
        return True
    for t in agent.tools.values():
        child = t.agent
        if isinstance(child, Agent) and not any(child is a for a in seen):
            seen.append(child)
            if _has_toolsets(child, seen):
                return True
    return False


def _tool_map(
    agent_name: str, tools: Sequence[Tool | Toolset | Callable[..., Any]]
) -> dict[str, Tool]:
    found: dict[str, Tool] = {}
    for t in tools:
        if isinstance(t, Toolset):
            continue  # resolved per run
        resolved = t if isinstance(t, Tool) else Tool(t)
        if resolved.name in found:
            raise UserError(f"agent {agent_name!r} has two tools named {resolved.name!r}")
        found[resolved.name] = resolved
    return found
