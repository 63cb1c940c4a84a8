"""A root run: one object owning what a run started outside any tool call needs.

``RootRun`` holds the agent's blueprint, the run's id, prompt, history, policy, hooks, deps
and where its session comes from (a store's, or one an integration brings). It runs
unobserved (``to_end``), served by a handler, or as a stream (``stream``); in every case the
stream reads ``RunStarted`` ... exactly one ``RunFinished``. ``Agent.run``, ``stream``,
``resume`` and ``resume_stream`` build one and call it; nested runs live in ``runner``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import anyio

from ..coordinator import LOCAL_REQUESTS, Coordinator, OnUnhandled, check_on_unhandled
from ..events import RunStarted
from ..exceptions import UserError
from ..handlers._base import Handler, serve
from ..hooks import Hook, HookSet, process_hooks
from ..messages import Message
from ..run import Run, RunResult, finished_event
from ..sessions import RunSession, SessionStore
from .context import _running, invocation_id
from .journaling import RunJournal
from .loop import AgentOutcome, run_agent
from .runner import BeforeRunResult, Blueprint, before_run, first_messages
from .services import RunServices

__all__ = ["RootRun", "SessionOpener", "resolve_policy"]

SessionOpener = Callable[[], Awaitable[RunSession]]
"""Opens (or reopens) the run's session when the run starts."""


def resolve_policy(
    default: OnUnhandled, on_unhandled: OnUnhandled | None, durable: bool
) -> OnUnhandled:
    """The policy of one run: its own, else the agent's; \"interrupt\" needs a store."""
    policy = default if on_unhandled is None else check_on_unhandled(on_unhandled)
    if policy == "interrupt" and not durable:
        raise UserError(
            'on_unhandled="interrupt" needs a store to keep the pending requests: '
            "pass store=SQLiteStore(path) (or MemoryStore() within one process)"
        )
    return policy


def session_opener(
    store: SessionStore | None, session: RunSession | None, open_new: SessionOpener | None
) -> SessionOpener | None:
    """Where a run's session comes from: a given session, else the store's ``open_new``."""
    if session is not None:
        if store is not None:
            raise UserError("pass store= or session=, not both")
        given = session

        async def handed() -> RunSession:
            return given

        return handed
    return open_new if store is not None else None


class RootRun:
    """One root run: its blueprint, inputs, hooks and session (see the module docstring).

    Args:
        bp: What running the agent needs.
        run_id: The run's id.
        prompt: The prompt (a session that reopens a run brings the recorded one).
        history: Earlier messages to start from.
        policy: What requests do when nobody answers them.
        hooks: The run's own hooks (inside the session's, outside the installed ones).
        deps: What the run's tools read as ``ctx.deps``.
        open_session: Opens the run's session when it starts; None for a run kept nowhere.
    """

    __slots__ = ("bp", "deps", "history", "hooks", "open_session", "policy", "prompt", "run_id")

    def __init__(
        self,
        bp: Blueprint,
        *,
        run_id: str,
        prompt: str,
        history: Sequence[Message] | None,
        policy: OnUnhandled,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
        open_session: SessionOpener | None = None,
    ) -> None:
        self.bp = bp
        self.run_id = run_id
        self.prompt = prompt
        self.history = history
        self.policy: OnUnhandled = policy
        self.hooks = hooks
        self.deps = deps
        self.open_session = open_session

    def to_end(self, handler: Handler | None) -> Coroutine[Any, Any, RunResult]:
        """The run to its end: served by ``handler`` through a stream, or unobserved.

        Returns what to await (an unobserved run's is ``execute`` itself: no frame of its
        own for the whole run). Awaiting it raises the exception that failed the run.
        """
        if handler is not None:
            return self._served(handler)
        return self.execute(Coordinator(self.run_id, on_unhandled=self.policy), raising=True)

    async def _served(self, handler: Handler) -> RunResult:
        async with self.stream() as run:
            await serve(run, handler)
        return run.result

    def stream(self) -> Run:
        """The run as a ``Run`` handle (it starts when its ``async with`` block is entered)."""
        opened: list[RunSession] = []
        opener = self.open_session
        if opener is not None:
            inner = opener

            async def keep() -> RunSession:
                session = await inner()
                opened.append(session)
                return session

            opener = keep

        async def execute(coordinator: Coordinator) -> RunResult:
            return await self.execute(coordinator, opener)

        async def on_cancel(result: RunResult) -> None:
            # A deliberate cancel ends the stored run too.
            for session in opened:
                await session.finish(result)

        run = Run(
            run_id=self.run_id,
            prompt=self.prompt,
            agent_name=self.bp.name,
            executor=execute,
            on_unhandled=self.policy,
        )
        run.on_cancel = on_cancel
        return run

    async def execute(
        self,
        coordinator: Coordinator,
        opener: SessionOpener | None = None,
        *,
        raising: bool = False,
    ) -> RunResult:
        """Run the root agent on ``coordinator``; failures end up in the result (raised
        instead when ``raising``), cancellation propagates.

        The stream always reads ``RunStarted`` … ``RunFinished``, even when the session
        cannot open (an unknown run id to resume: then the run fails with ``UserError``).
        The agent's loop is awaited here, not from a coroutine of its own: a run waiting in
        a model call keeps one frame less.
        """
        bp = self.bp
        try:
            prompt, history, session = await _opened(self, opener or self.open_session)
        except UserError as e:
            result = _not_opened(coordinator, bp.name, self.prompt, e)
        else:
            self._configure(coordinator, session)
            # Only a tool wrapper asks for the frame the loop would give its tool
            # (ToolContext.for_execution): a run with none leaves its task's context alone.
            token = _running.set(coordinator) if coordinator.hooks.tool_wrappers else None
            try:
                # A store holds the run (its lease) for the whole execution; `async with`
                # adds no coroutine frame to the hot path.
                async with _UNHELD if session is None else session.held():
                    if session is not None:
                        await session.attach(coordinator)
                    result: RunResult | None = None
                    with _interruptible(coordinator):
                        if bp.hosts or bp.before is not None:
                            result = await self._hosted(coordinator, prompt, history, session)
                        else:
                            messages = _started(coordinator, bp, prompt, history)
                            try:
                                outcome = await self._agent(coordinator, messages, prompt, session)
                            except Exception as e:
                                result = _ended(coordinator, "failed", messages, None, error=e)
                            else:
                                result = _completed(coordinator, outcome, None)
                    # Only "interrupt" cancels the run's scope (pyright takes the union for one
                    # that never swallows an exception).
                    if result is None:  # pyright: ignore[reportUnnecessaryComparison]
                        result = _interrupted(coordinator)
                    if session is not None:
                        await session.finish(result)
            finally:
                if token is not None:
                    _running.reset(token)
        coordinator.emit(finished_event(result, bp.name))
        if raising and result.error is not None:
            raise result.error
        return result

    def _configure(self, coordinator: Coordinator, session: RunSession | None) -> None:
        everything = [h for h in (*self.hooks, *process_hooks()) if h.active()]
        if session is None:
            if everything:
                coordinator.configure(HookSet(everything), LOCAL_REQUESTS)
            return
        # The session's journal, then its hooks, go first: a replayed call reaches no hook.
        # A session need not have a journal (``RunJournal`` is an optional member).
        journal: RunJournal | None = getattr(session, "journal", None)
        hooks = [*session.hooks, *everything]
        hook_set = HookSet(hooks) if hooks else coordinator.hooks
        coordinator.configure(hook_set, session.backend, journal)
        coordinator.conversations.keeper = session
        # Remembered grants: the session's (a store's) or none; never this process's memory,
        # which another run on the store would not see (nor a workflow replaying the run).
        coordinator.requests.grants = getattr(session, "grants", None)

    async def _hosted(
        self,
        coordinator: Coordinator,
        prompt: str,
        history: Sequence[Message] | None,
        session: RunSession | None,
    ) -> RunResult:
        """``_body`` with the run's ``RunServices`` open (when its agents have toolsets):
        their resources are closed when it ends (before ``RunFinished``), however it ends."""
        if not self.bp.hosts:
            return await self._body(coordinator, prompt, history, session)
        async with RunServices(coordinator.run_id) as services:
            coordinator.services = services
            try:
                return await self._body(coordinator, prompt, history, session)
            finally:
                coordinator.services = None

    async def _body(
        self,
        coordinator: Coordinator,
        prompt: str,
        history: Sequence[Message] | None,
        session: RunSession | None,
    ) -> RunResult:
        """The root agent's run with its ``before`` step (a clarifier) or its services
        (``execute`` runs a plain agent itself)."""
        bp = self.bp
        messages = _started(coordinator, bp, prompt, history)
        decided: BeforeRunResult | None = None
        try:
            if bp.before is not None:
                decided = await before_run(
                    bp.before, coordinator, agent_path=(bp.name,), scope_path=coordinator.run_id,
                    request=prompt, deps=self.deps,
                )  # fmt: skip
                if decided.rejected:
                    return _ended(coordinator, "rejected", messages, decided)
                extra = decided.instructions()
                messages = first_messages(bp.instructions, prompt, history, extra)
            outcome = await self._agent(coordinator, messages, prompt, session)
        except Exception as e:
            return _ended(coordinator, "failed", messages, decided, error=e)
        return _completed(coordinator, outcome, decided)

    def _agent(
        self,
        coordinator: Coordinator,
        messages: list[Message],
        prompt: str,
        session: RunSession | None,
    ) -> Awaitable[AgentOutcome]:
        return run_agent(
            self.bp.spec,
            coordinator,
            agent_path=(self.bp.name,),
            scope_path=coordinator.run_id,
            messages=messages,
            input=prompt,
            resumed=session is not None and session.resumed,
            deps=self.deps,
        )


class _Unheld:
    """Nothing held around a run (a run kept nowhere, or one no interrupt cancels).

    ``contextlib.nullcontext`` would do, but a ``with`` block keeps its manager's bound
    exit for the block's life: a static one is the function itself, shared by every run
    in flight (a bound method is 64 bytes per block).
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    @staticmethod
    def __exit__(*exc: object) -> None:
        return None

    async def __aenter__(self) -> None:
        return None

    @staticmethod
    async def __aexit__(*exc: object) -> None:
        return None


_UNHELD = _Unheld()
"""The one ``_Unheld`` of every run."""


def _interruptible(coordinator: Coordinator) -> anyio.CancelScope | _Unheld:
    """The run's cancel scope when it may end at an interrupt (``on_unhandled="interrupt"``,
    the only policy under which ``Quiescence.interrupt`` is called); else none: a scope
    holds two sets, and every run in flight would keep one."""
    if coordinator.on_unhandled != "interrupt":
        return _UNHELD
    scope = coordinator.quiescence.scope = anyio.CancelScope()
    return scope


async def _opened(
    root: RootRun, opener: SessionOpener | None
) -> tuple[str, Sequence[Message] | None, RunSession | None]:
    """The run's prompt, history and session (a reopened run's are the session's)."""
    if opener is None:
        return root.prompt, root.history, None
    # A root run executes once: the run in flight keeps no opener (nor what it holds).
    root.open_session = None
    session = await opener()
    return session.prompt, session.history, session


def _not_opened(coordinator: Coordinator, name: str, prompt: str, error: UserError) -> RunResult:
    """The run failed before it started: its session could not open."""
    coordinator.emit(_run_started(coordinator, name, prompt))
    return RunResult(run_id=coordinator.run_id, status="failed", error=error)


def _started(
    coordinator: Coordinator, bp: Blueprint, prompt: str, history: Sequence[Message] | None
) -> list[Message]:
    """``RunStarted`` emitted; the run's first messages."""
    coordinator.emit(_run_started(coordinator, bp.name, prompt))
    return first_messages(bp.instructions, prompt, history)


def _completed(
    coordinator: Coordinator, outcome: AgentOutcome, decided: BeforeRunResult | None
) -> RunResult:
    return RunResult(
        run_id=coordinator.run_id,
        status="completed",
        output=outcome.output,
        messages=outcome.messages,
        usage=coordinator.usage,
        clarifier=decided,
        truncated=outcome.truncated,
    )


def _interrupted(coordinator: Coordinator) -> RunResult:
    return RunResult(
        run_id=coordinator.run_id,
        status="interrupted",
        usage=coordinator.usage,
        pending=coordinator.pending(),
    )


def _ended(
    coordinator: Coordinator,
    status: Any,
    messages: list[Message],
    clarifier: BeforeRunResult | None,
    *,
    error: Exception | None = None,
) -> RunResult:
    return RunResult(
        run_id=coordinator.run_id,
        status=status,
        messages=messages,
        usage=coordinator.usage,
        error=error,
        clarifier=clarifier,
    )


def _run_started(coordinator: Coordinator, name: str, prompt: str) -> RunStarted:
    run_id = coordinator.run_id
    return RunStarted(
        run_id=run_id,
        agent_path=(name,),
        depth=0,
        invocation_id=invocation_id(run_id),
        prompt=prompt,
    )
