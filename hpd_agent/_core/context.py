"""The contextvar that holds the current call frame, and the frame itself (``ToolContext``).

While a tool runs, ``current_context()`` returns its ``ToolContext``: the root run's
coordinator, the path of agents down to this call, and the deadlines that enclose it. An
``Agent.run`` started inside a tool finds the frame here and becomes a nested run that emits
into the root's coordinator, at any depth, with no wiring by the caller. The frame asks the
human its typed questions (``ask``, ``ask_choice``, ``confirm``, ..., ``ask_permission``):
each builds a ``RequestSpec`` and raises it through the frame's ``request``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Generic, Literal, overload

from typing_extensions import TypeVar

from .._values.callpaths import relayed_paths
from ..coordinator import Coordinator
from ..events import Event, format_path, invocation_id
from ..exceptions import UserError
from ..hooks import ToolExecution
from ..messages import Message
from ..models._base import Model, ModelRequestParams, ModelResponse
from ..questions import (
    ActionQuestion,
    ChoiceQuestion,
    ConfirmQuestion,
    CustomQuestion,
    InputQuestion,
    KindQuestion,
    TextQuestion,
)
from .deadline import Deadline
from .model_request import request_model
from .permission import ask_permission
from .racing import ask_racing
from .requests import RequestSpec
from .steps import take_step

__all__ = ["Deadline", "DepsT", "ToolContext", "current_context", "invocation_id"]

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


class ToolContext(Generic[DepsT]):
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
        below, call_path = relayed_paths(own, levels, names, key)
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
        self,
        spec: RequestSpec,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
        warn_before: float | None = None,
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
            warn_before: Seconds before the timeout to warn that it expires (``RequestExpiring``
                on the stream, ``Hook.request_expiring``), if it is still pending.

        Raises:
            UserError: ``warn_before`` without a timeout, or not a positive number.
        """
        # Not a coroutine of its own: one frame less for every suspended question.
        return self.coordinator.request(
            self,
            spec,
            request_id=self.next_request_id() if request_id is None else request_id,
            timeout=timeout,
            warn_before=warn_before,
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

    # -- typed questions ---------------------------------------------------------------
    async def ask(
        self,
        question: str,
        *,
        context: str | None = None,
        options: Sequence[str] | None = None,
        timeout: float | None = None,
        warn_before: float | None = None,
    ) -> str:
        """Ask the human a free-text question and wait for the answer, mid-turn.

        The question reaches the root run's stream as a ``ClarificationRequest`` tagged with
        this agent's path. Time spent waiting does not count against tool timeouts.

        Args:
            question: What to ask.
            context: Why it is asked, shown with the question.
            options: If given, the answer must be one of them.
            timeout: Seconds to wait; None waits as long as the run lives.
            warn_before: Seconds before the timeout to warn that it expires (``RequestExpiring``).

        Returns:
            The answer text.

        Raises:
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
                Left uncaught, the loop turns it into a plain tool result for the model.
        """
        spec = TextQuestion(question=question, context=context, options=options)
        return str(await self.request(spec, timeout=timeout, warn_before=warn_before))

    async def ask_input(
        self,
        argument: str,
        question: str | None = None,
        *,
        context: str | None = None,
        timeout: float | None = None,
        warn_before: float | None = None,
    ) -> str:
        """Ask the human for the value of a named argument instead of letting the model guess.

        Emits a ``"input"`` question with ``data={"argument": argument, "tool": tool_name}``.

        Args:
            argument: The argument that is missing (e.g. ``"recipient_email"``).
            question: What to ask; defaults to asking for the argument by name.
            context: Why it is needed.
            timeout: Seconds to wait; None waits as long as the run lives.
            warn_before: Seconds before the timeout to warn that it expires (``RequestExpiring``).

        Returns:
            The value, stripped of surrounding space (never empty).

        Raises:
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
        """
        spec = InputQuestion(
            argument=argument, tool=self.tool_name, question=question, context=context
        )
        return str(await self.request(spec, timeout=timeout, warn_before=warn_before))

    @overload
    async def ask_choice(
        self,
        question: str,
        options: Sequence[str],
        *,
        multiple: Literal[False] = False,
        context: str | None = None,
        timeout: float | None = None,
        warn_before: float | None = None,
    ) -> str: ...

    @overload
    async def ask_choice(
        self,
        question: str,
        options: Sequence[str],
        *,
        multiple: Literal[True],
        context: str | None = None,
        timeout: float | None = None,
        warn_before: float | None = None,
    ) -> list[str]: ...

    async def ask_choice(
        self,
        question: str,
        options: Sequence[str],
        *,
        multiple: bool = False,
        context: str | None = None,
        timeout: float | None = None,
        warn_before: float | None = None,
    ) -> str | list[str]:
        """Ask the human to pick one of ``options`` (or several, with ``multiple=True``).

        The human answers with an option or its 0-based index; ``respond`` refuses anything
        else.

        Args:
            question: What to ask.
            options: The choices (distinct, at least one).
            multiple: Let the human pick a list of options.
            context: Why it is asked.
            timeout: Seconds to wait; None waits as long as the run lives.
            warn_before: Seconds before the timeout to warn that it expires (``RequestExpiring``).

        Returns:
            The chosen option (its own spelling), or the list of them with ``multiple``.

        Raises:
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
        """
        spec = ChoiceQuestion(
            question=question, options=options, multiple=multiple, context=context
        )
        answer: Any = await self.request(spec, timeout=timeout, warn_before=warn_before)
        return answer

    async def confirm(
        self,
        question: str,
        *,
        context: str | None = None,
        timeout: float | None = None,
        warn_before: float | None = None,
    ) -> bool:
        """Ask the human a yes/no question; the tool decides what "no" means.

        Args:
            question: What to confirm (e.g. "Delete 12 files?").
            context: Why it is asked.
            timeout: Seconds to wait; None waits as long as the run lives.
            warn_before: Seconds before the timeout to warn that it expires (``RequestExpiring``).

        Returns:
            True for yes, False for no.

        Raises:
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
        """
        spec = ConfirmQuestion(question=question, context=context)
        return bool(await self.request(spec, timeout=timeout, warn_before=warn_before))

    async def ask_action(
        self,
        url: str,
        *,
        label: str | None = None,
        question: str | None = None,
        context: str | None = None,
        timeout: float | None = None,
        warn_before: float | None = None,
        resolver: Callable[[], Awaitable[bool]] | None = None,
    ) -> bool:
        """Ask the human to do something at ``url`` (e.g. sign in with OAuth) and wait.

        The request is resolved by the human (True: done, False: declined), by the app
        calling ``run.respond(request_id, True)`` when the action's callback arrives, or by
        ``resolver``, whichever comes first.

        Args:
            url: Where the human acts.
            label: Short text for a link or button.
            question: What to tell the human; defaults to asking them to open the URL.
            context: Why it is needed.
            timeout: Seconds to wait; None waits as long as the run lives.
            warn_before: Seconds before the timeout to warn that it expires (``RequestExpiring``).
            resolver: Awaited alongside the question (e.g. waits for the OAuth callback);
                its result answers the request unless the human answered first.

        Returns:
            True when the action was completed, False when it was declined.

        Raises:
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
        """
        spec = ActionQuestion(url=url, label=label, question=question, context=context)
        if resolver is None:
            return bool(await self.request(spec, timeout=timeout, warn_before=warn_before))
        request_id = self.next_request_id()
        return bool(
            await ask_racing(
                self.coordinator, self, spec, request_id, resolver, timeout, warn_before
            )
        )

    async def ask_custom(
        self,
        name: str,
        question: str,
        *,
        payload: Mapping[str, Any] | None = None,
        schema: Mapping[str, Any] | None = None,
        context: str | None = None,
        timeout: float | None = None,
        warn_before: float | None = None,
    ) -> Any:
        """Ask a question of your own kind: a name and JSON payload, answered with JSON.

        Args:
            name: What kind of question it is, for the handler that shows it.
            question: What to ask.
            payload: JSON data for whoever shows the question.
            schema: A JSON schema the answer must match (checked by ``respond``).
            context: Why it is asked.
            timeout: Seconds to wait; None waits as long as the run lives.
            warn_before: Seconds before the timeout to warn that it expires (``RequestExpiring``).

        Returns:
            The answer, as plain JSON data.

        Raises:
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
        """
        spec = CustomQuestion(
            name=name, question=question, payload=payload, schema=schema, context=context
        )
        return await self.request(spec, timeout=timeout, warn_before=warn_before)

    async def ask_kind(
        self,
        name: str,
        question: str,
        *,
        data: Mapping[str, Any] | None = None,
        context: str | None = None,
        timeout: float | None = None,
        warn_before: float | None = None,
    ) -> Any:
        """Ask a question of a registered kind (``hpd_agent.questions.register_kind``).

        The kind's answer schema for ``data`` is resolved now and travels with the request,
        so every path an answer takes (``run.respond``, a store's ``respond`` in another
        process, the web, MCP and A2A servers, Temporal) checks it the same way.

        Args:
            name: The kind's name.
            question: What to ask.
            data: The kind's details (JSON data), as its answer schema and parser read them.
            context: Why it is asked.
            timeout: Seconds to wait; None waits as long as the run lives.
            warn_before: Seconds before the timeout to warn that it expires (``RequestExpiring``).

        Returns:
            The answer, as plain JSON data matching the kind's answer schema.

        Raises:
            UserError: No kind ``name`` is registered, or its answer schema for ``data`` is
                not a safe, valid JSON Schema.
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
        """
        spec = KindQuestion(name, question=question, data=data, context=context)
        return await self.request(spec, timeout=timeout, warn_before=warn_before)

    async def ask_permission(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        warn_before: float | None = None,
    ) -> str | None:
        """Ask the human whether ``tool_name`` may run with ``arguments`` (``timeout`` and
        ``warn_before`` as for ``ask``). A call approved for the run, or covered by a live
        remembered grant (``Approve(scope="always")``), is not asked: a grant's approval is
        still raised and resolved as a request, answered by ``grant:<id>``.

        Returns:
            None when the call may run; otherwise the text the model gets instead of a result
            (denied, declined: the user would not say, or unanswered).
        """
        return await ask_permission(
            self.coordinator,
            self,
            self.next_request_id,
            tool_name,
            arguments,
            timeout=timeout,
            warn_before=warn_before,
        )

    # -- steps and model requests ------------------------------------------------------
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
        key = f"{self.call_path}!{index}:{name}"
        return await take_step(self.coordinator, self, name, key, fn, args, kwargs)

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
