"""Hooks: the one way to plug into a run (journal, tracing, UI bridges, workflow engines).

A ``Hook`` may wrap three things, around-style (it gets the call and a ``call_next`` to
continue the chain, and may skip it, retry it or replace its result):

- ``wrap_agent``: one agent's run, root or nested (``AgentInvocation`` → ``AgentOutcome``);
- ``wrap_model_request``: one model request (``ModelCall`` → ``ModelResponse``);
- ``wrap_tool_call``: one tool call, permission check and validation included
  (``ToolExecution`` → ``ToolOutcome``).

and observe three moments of a human request (question or permission):

- ``request_opened(event)``: the request is registered and about to reach the stream
  (``event.replayed`` is True when a resumed durable run announces again a request an
  earlier life opened: still pending, but not new, so a notifier has told people already);
- ``request_expiring(event)``: it is still pending ``warn_before`` seconds before its
  ``event.expires_at`` (asked with ``timeout=`` and ``warn_before=``; once per request);
- ``request_resolved(event, status, answer)``: it ended (answered, declined, expired,
  cancelled, unavailable); a hook that declares an ``author`` parameter there is also told
  who answered or declined it and on which channel (``hpd_agent.backend.Author``).

An exception from an observer never leaves a request open nor fails whoever ended it: see
``Hook``.

Hooks come from four places, outermost first: the run's store (its journal must see a call
before anyone else, so a replayed call reaches no other hook), ``Agent.run(hooks=...)``, the
process-wide ``install``-ed hooks, and the hooks that registered factories hand each root run
(``add_hook_factory``: how an integration takes part without being called, e.g. tracing
once the application has installed an OpenTelemetry SDK). A method a hook does not override costs nothing: the
loop only builds the chain for the methods some hook overrides, and with no hook at all it
calls the model and the tool directly.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ._values.arguments import split_arguments
from ._values.keywords import takes_keyword
from .backend import Author
from .events import Event, RequestEvent, RequestStatus, TextDelta, ToolCallFinished, ToolCallStarted
from .messages import Message, ToolCall, Usage
from .models._base import Model, ModelRequestParams, ModelResponse

__all__ = [
    "AgentInvocation",
    "AgentOutcome",
    "CallNext",
    "Hook",
    "HookFactory",
    "HookSet",
    "ModelCall",
    "StepCall",
    "ToolExecution",
    "ToolOutcome",
    "add_hook_factory",
    "install",
    "installed",
    "process_hooks",
    "uninstall",
]

_C = TypeVar("_C")
_R = TypeVar("_R")

CallNext = Callable[[_C], Awaitable[_R]]
"""The rest of a wrapper's chain: call it with the call object to continue the call."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentInvocation:
    """One agent's run, as ``wrap_agent`` sees it.

    Attributes:
        run_id: Id of the root run.
        agent_name: The agent's name.
        agent_path: Agent names from the root down to this agent.
        scope_path: Stable path of this agent run inside the root run (journal keys use it).
        input: The prompt (root) or the query it got as a tool (nested).
        tool_call_id: For a nested agent, the parent's tool call that started it.
        model: The agent's model.
        resumed: True for the root agent of a run resumed from a store.
        invocation_id: Which call of this agent this is (the ``invocation_id`` of its
            events): parallel calls of one sub-agent differ, a resume keeps it.
        parent_invocation_id: For a nested agent, the ``invocation_id`` of the calling
            agent's run; None for the root agent.
    """

    run_id: str
    agent_name: str
    agent_path: tuple[str, ...]
    scope_path: str
    input: str
    tool_call_id: str | None
    model: Model
    resumed: bool = False
    invocation_id: str = ""
    parent_invocation_id: str | None = None

    @property
    def depth(self) -> int:
        """0 for the root agent."""
        return len(self.agent_path) - 1


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentOutcome:
    """How one agent's run ended (its final answer, conversation and own usage).

    ``output`` is the answer's text, or the validated value for an agent with ``output_type``.
    """

    output: Any
    messages: list[Message]
    usage: Usage
    truncated: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelCall:
    """One model request, as ``wrap_model_request`` sees it.

    Attributes:
        run_id: Id of the root run.
        agent_path: Agent names down to the agent making the request.
        scope_path: Stable path of that agent run; ``key`` adds the turn.
        turn: Index of this model turn in the agent's run.
        model: The model to call.
        messages: The conversation sent (do not mutate it).
        params: Tools, settings and the streaming callback.
        emit: Puts an event on the root run's stream (e.g. replayed text).
        invocation_id: Which call of the agent makes the request (its events carry it).
    """

    run_id: str
    agent_path: tuple[str, ...]
    scope_path: str
    turn: int
    model: Model
    messages: Sequence[Message]
    params: ModelRequestParams
    emit: Callable[[Event], None]
    invocation_id: str = ""

    @property
    def key(self) -> str:
        """Stable id of this request in the run (the same after a crash and a resume)."""
        return f"{self.scope_path}@{self.turn}"

    def text_event(self, text: str, *, replayed: bool = False) -> TextDelta:
        """The ``TextDelta`` of this agent carrying ``text``."""
        path = self.agent_path
        return TextDelta(
            run_id=self.run_id,
            agent_path=path,
            depth=len(path) - 1,
            invocation_id=self.invocation_id,
            text=text,
            replayed=replayed,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutcome:
    """What a tool call gives back to the model: the result text, and whether it failed.

    ``error_type`` names a failure for traces: the exception's class name, ``"timeout"``, or
    ``"unknown_tool"`` (None when the call succeeded or its outcome was replayed).
    """

    text: str
    is_error: bool = False
    error_type: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolExecution:
    """One tool call, as ``wrap_tool_call`` sees it (before validation and permission).

    Attributes:
        run_id: Id of the root run.
        agent_path: Agent names down to the agent that called the tool.
        call: The model's tool call (name, id, raw argument text).
        call_path: Stable id of this call in the run (request ids and journal keys use it).
        known: Whether the agent has a tool of that name.
        emit: Puts an event on the root run's stream.
        side_effects: Whether the tool's own code may act outside the framework. False
            for the framework's own tools (an agent's tool from ``Agent.as_tool``,
            ``ask_user``): they act only through requests and their nested tool calls.
        invocation_id: Which call of the calling agent this tool call belongs to (the
            ``invocation_id`` of its events).
        metadata: Free for hooks; the framework neither fills nor reads it (empty). A
            wrapper may pass ``call_next`` a ``dataclasses.replace(execution, metadata=...)``
            to hand something to the wrappers inside it.
    """

    run_id: str
    agent_path: tuple[str, ...]
    call: ToolCall
    call_path: str
    known: bool
    emit: Callable[[Event], None]
    metadata: Mapping[str, Any] = field(default_factory=dict[str, Any])
    side_effects: bool = True
    invocation_id: str = ""

    @property
    def tool_name(self) -> str:
        """The name the model called."""
        return self.call.name

    @property
    def key(self) -> str:
        """Same as ``call_path``: the call's stable id."""
        return self.call_path

    def started_event(self, *, replayed: bool = False) -> ToolCallStarted:
        """The ``ToolCallStarted`` event of this call, its arguments parsed (bounded: the
        limits a tool's own validation applies; see ``ToolCallStarted``)."""
        call = self.call
        path = self.agent_path
        arguments, raw = split_arguments(call.arguments)
        return ToolCallStarted(
            run_id=self.run_id,
            agent_path=path,
            depth=len(path) - 1,
            invocation_id=self.invocation_id,
            tool_call_id=call.id,
            tool_name=call.name,
            arguments=arguments,
            raw_arguments=raw,
            replayed=replayed,
        )

    def finished_event(self, outcome: ToolOutcome, *, replayed: bool = False) -> ToolCallFinished:
        """The ``ToolCallFinished`` event of this call with ``outcome``."""
        call = self.call
        path = self.agent_path
        return ToolCallFinished(
            run_id=self.run_id,
            agent_path=path,
            depth=len(path) - 1,
            invocation_id=self.invocation_id,
            tool_call_id=call.id,
            tool_name=call.name,
            result=outcome.text,
            is_error=outcome.is_error,
            replayed=replayed,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class StepCall:
    """One journaled step of a tool (``await ctx.step(name, fn, ...)``).

    Attributes:
        run_id: Id of the root run.
        agent_path: Agent names down to the agent whose tool takes the step.
        name: The step's name, as the tool gave it.
        key: Stable id of the step in the run (the tool call's path, the step's index and
            name), the same after a crash and a resume.
        run: Does the step (calls the tool's function) and returns its result.
        invocation_id: Which call of the agent whose tool takes the step.
    """

    run_id: str
    agent_path: tuple[str, ...]
    name: str
    key: str
    run: Callable[[], Awaitable[Any]]
    invocation_id: str = ""


class Hook:
    """Base class of hooks: override what you need; the defaults pass straight through.

    A wrapper returns ``call_next``'s result or its own: it may skip the call (not call
    ``call_next``), replace the result, or retry (call ``call_next`` again). A retried model
    request is simply asked again. A retried tool call is the same call again: the same
    ``call_path``, so its questions get the same request ids and its steps the same step
    keys. Without a store it all runs again (the human is asked again); with one, the
    journal (outside the run's hooks) hands the second attempt the first attempt's step
    results and answers instead. An exception from ``wrap_agent``, ``wrap_model_request`` or ``wrap_tool_call``
    fails the agent's run with that very exception (from parallel tool calls: the first
    one, and the other calls are cancelled); ``ctx.step`` raises one from ``wrap_step``.

    Observers are plain functions called where a request opens or ends: they must return
    quickly and cannot await. Every observer is told, even after another one raised. An
    exception from ``request_opened`` withdraws the request: it ends as ``"cancelled"``
    (resolved event and ``request_resolved`` included), and the asking tool gets that
    exception instead of an answer. An exception from ``request_resolved`` changes nothing
    (the request ended as it did, an answer counts, whoever ended it carries on): it is
    logged to the ``hpd_agent.hooks`` logger, as is one from ``request_expiring``.
    """

    async def wrap_agent(
        self, invocation: AgentInvocation, call_next: CallNext[AgentInvocation, AgentOutcome]
    ) -> AgentOutcome:
        """Around one agent's run (root or nested); raises what the run raises."""
        return await call_next(invocation)

    async def wrap_model_request(
        self, call: ModelCall, call_next: CallNext[ModelCall, ModelResponse]
    ) -> ModelResponse:
        """Around one model request."""
        return await call_next(call)

    async def wrap_tool_call(
        self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
    ) -> ToolOutcome:
        """Around one tool call (validation, permission and execution)."""
        return await call_next(execution)

    async def wrap_step(self, step: StepCall, call_next: CallNext[StepCall, Any]) -> Any:
        """Around one journaled step of a tool (a durable run records its result)."""
        return await call_next(step)

    def request_opened(self, event: RequestEvent) -> None:
        """A question or permission request is about to reach the stream."""

    def request_resolved(self, event: RequestEvent, status: RequestStatus, answer: Any) -> None:
        """A request ended; ``answer`` is the validated answer when ``status`` is answered.

        Declare a further parameter ``author: Author | None = None`` in your override to be
        told who answered or declined it and on which channel (``hpd_agent.backend.Author``;
        None when it ended otherwise): a hook without it is called as before.
        """

    def request_expiring(self, event: RequestEvent) -> None:
        """A request is still pending ``warn_before`` seconds before ``event.expires_at``
        (the stream gets a ``RequestExpiring``). Once per request, a resumed run included;
        an exception is logged, as from ``request_resolved``."""

    def active(self) -> bool:
        """Whether the hook takes part in a root run starting now (asked once per root run).

        A hook with nothing to do at the moment (tracing with no SDK installed) says False,
        and the run then costs what it would cost without it.
        """
        return True


def _overrides(hook: Hook, name: str) -> bool:
    return getattr(type(hook), name) is not getattr(Hook, name)


def _chain(
    wrappers: Sequence[Callable[[_C, CallNext[_C, _R]], Awaitable[_R]]],
    terminal: CallNext[_C, _R],
) -> CallNext[_C, _R]:
    """Fold wrappers (first = outermost) around ``terminal`` into one callable."""
    call = terminal
    for wrap in reversed(wrappers):
        call = _bind(wrap, call)
    return call


class _Bound(Generic[_C, _R]):
    """One wrapper bound to what it wraps (one object: a closure would be a function, its
    cells and their tuple, kept by every run in flight)."""

    __slots__ = ("inner", "wrap")

    def __init__(
        self, wrap: Callable[[_C, CallNext[_C, _R]], Awaitable[_R]], inner: CallNext[_C, _R]
    ) -> None:
        self.wrap = wrap
        self.inner = inner

    def __call__(self, c: _C) -> Awaitable[_R]:
        return self.wrap(c, self.inner)


def _bind(
    wrap: Callable[[_C, CallNext[_C, _R]], Awaitable[_R]], inner: CallNext[_C, _R]
) -> CallNext[_C, _R]:
    return _Bound(wrap, inner)


class HookSet:
    """The hooks of one root run, sorted by what each overrides (built once per run).

    Each ``*_wrappers`` tuple is empty when no hook overrides that method, and callers check
    for that before building a call object: a run with no hooks pays nothing.
    """

    __slots__ = (
        "_chains",
        "_told_author",
        "agent_wrappers",
        "expiring_observers",
        "hooks",
        "model_wrappers",
        "observers",
        "step_wrappers",
        "tool_wrappers",
    )

    def __init__(self, hooks: Sequence[Hook] = ()) -> None:
        hooks = [h for h in hooks if h.active()]
        self.hooks = tuple(hooks)
        self.agent_wrappers = tuple(h.wrap_agent for h in hooks if _overrides(h, "wrap_agent"))
        self.model_wrappers = tuple(
            h.wrap_model_request for h in hooks if _overrides(h, "wrap_model_request")
        )
        self.tool_wrappers = tuple(
            h.wrap_tool_call for h in hooks if _overrides(h, "wrap_tool_call")
        )
        self.step_wrappers = tuple(h.wrap_step for h in hooks if _overrides(h, "wrap_step"))
        self.observers = tuple(
            h for h in hooks if _overrides(h, "request_opened") or _overrides(h, "request_resolved")
        )
        self._told_author = frozenset(
            id(h) for h in self.observers if takes_keyword(type(h).request_resolved, "author")
        )
        self.expiring_observers = tuple(h for h in hooks if _overrides(h, "request_expiring"))
        # Chains around a module-level terminal are the same for every call: built once.
        self._chains: dict[Callable[..., Any], Callable[..., Any]] = {}

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def agent(
        self, terminal: CallNext[AgentInvocation, AgentOutcome]
    ) -> CallNext[AgentInvocation, AgentOutcome]:
        """``terminal`` wrapped by every ``wrap_agent``."""
        return _chain(self.agent_wrappers, terminal)

    def model(
        self, terminal: CallNext[ModelCall, ModelResponse]
    ) -> CallNext[ModelCall, ModelResponse]:
        """``terminal`` wrapped by every ``wrap_model_request`` (built once per terminal)."""
        chain = self._chains.get(terminal)
        if chain is None:
            chain = self._chains[terminal] = _chain(self.model_wrappers, terminal)
        return chain

    def tool(
        self, terminal: CallNext[ToolExecution, ToolOutcome]
    ) -> CallNext[ToolExecution, ToolOutcome]:
        """``terminal`` wrapped by every ``wrap_tool_call``."""
        return _chain(self.tool_wrappers, terminal)

    def step(self, terminal: CallNext[StepCall, Any]) -> CallNext[StepCall, Any]:
        """``terminal`` wrapped by every ``wrap_step`` (built once per terminal)."""
        chain = self._chains.get(terminal)
        if chain is None:
            chain = self._chains[terminal] = _chain(self.step_wrappers, terminal)
        return chain

    def opened(self, event: RequestEvent) -> None:
        """Tell every observer a request opened; then raise the first exception one raised."""
        error: Exception | None = None
        for hook in self.observers:
            try:
                hook.request_opened(event)
            except Exception as e:
                if error is None:
                    error = e
        if error is not None:
            raise error

    def resolved(
        self, event: RequestEvent, status: RequestStatus, answer: Any, author: Author | None = None
    ) -> None:
        """Tell every observer a request ended (and ``author``, to those that declare it);
        an exception from one is logged, not raised (the request has ended: whoever ended
        it must not fail for an observer)."""
        told = self._told_author
        for hook in self.observers:
            try:
                if id(hook) in told:
                    hook.request_resolved(event, status, answer, author=author)  # pyright: ignore[reportCallIssue]
                else:
                    hook.request_resolved(event, status, answer)
            except Exception:
                _log.exception(
                    "hook %r raised in request_resolved (request %s, %s); ignored",
                    hook,
                    event.request_id,
                    status,
                )

    def expiring(self, event: RequestEvent) -> None:
        """Tell every hook defining ``request_expiring`` that ``event`` expires soon; an
        exception from one is logged, not raised (the asker keeps waiting)."""
        for hook in self.expiring_observers:
            try:
                hook.request_expiring(event)
            except Exception:
                _log.exception(
                    "hook %r raised in request_expiring (request %s); ignored",
                    hook,
                    event.request_id,
                )


_installed: list[Hook] = []


def install(hook: Hook) -> None:
    """Add a hook to every root run started from now on in this process (innermost last).

    Installing the same hook object twice has no effect.
    """
    if all(h is not hook for h in _installed):
        _installed.append(hook)


def uninstall(hook: Hook) -> None:
    """Remove a hook added with ``install`` (runs already started keep it)."""
    _installed[:] = [h for h in _installed if h is not hook]


def installed() -> tuple[Hook, ...]:
    """The hooks added with ``install``, in order."""
    return tuple(_installed)


HookFactory = Callable[[], Hook | None]
"""Asked at the start of every root run for a hook to add to it; None adds nothing."""

_factories: list[HookFactory] = []


def add_hook_factory(factory: HookFactory) -> None:
    """Ask ``factory`` at the start of every root run for a hook to add (innermost, after
    the installed hooks); registering the same function twice has no effect.

    This is how an integration takes part in runs nobody asked it into: the core never
    imports it, it registers itself. A factory is called once per root run, so it must
    cost next to nothing when it has nothing to add (answer None). An exception from it is
    logged to the ``hpd_agent.hooks`` logger and the run starts without its hook.
    """
    if all(f is not factory for f in _factories):
        _factories.append(factory)


def process_hooks() -> list[Hook]:
    """The process's hooks for a root run starting now: the installed ones, then what each
    factory hands it."""
    hooks = list(_installed)
    for factory in _factories:
        try:
            hook = factory()
        except Exception:  # an integration's bug must not stop the application's runs
            _log.exception("hook factory %r raised; the run goes on without its hook", factory)
            continue
        if hook is not None:
            hooks.append(hook)
    return hooks
