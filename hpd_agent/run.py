"""The handle a caller holds on a root run: its event stream, ``respond``, ``cancel``, result.

``Agent.stream(prompt)`` returns a ``Run``; use it as an async context manager and iterate it
for the events of the whole agent tree, in order, ending with ``RunFinished``. Leaving the
``async with`` block before the run ends cancels the run and its whole tree.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from ._core.output import output_text
from ._values.fanout import first_leaf
from .backend import API, AnswerPolicy, Author
from .coordinator import Coordinator, OnUnhandled
from .events import Event, RequestEvent, RunFinished, RunStatus, invocation_id
from .exceptions import RunNotFinishedError, UserError
from .messages import Message, Usage
from .text import error_text

__all__ = ["Run", "RunResult", "finished_event"]

_YIELD_EVERY = 64
"""Events handed out back to back before ``__anext__`` lets other tasks run."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult:
    """How a root run ended.

    Attributes:
        run_id: The run's id.
        status: ``"completed"``, ``"failed"``, ``"cancelled"``, ``"interrupted"`` (ended with
            requests pending in its store), or ``"rejected"`` (the human rejected the plan of
            the agent's clarifier).
        output: The root agent's final answer (None unless completed): its text, or for an
            agent with ``output_type`` the validated value (an instance of that type).
        messages: The root agent's conversation, ready to pass as ``history`` to a next run.
        usage: Tokens and requests of every model call in the tree.
        error: The exception that failed the run, if it failed.
        clarifier: What the agent's clarifier learned and agreed, if it has one (a
            ``hpd_agent.presets.ClarifierResult``, or whatever its ``before_run`` returned).
        pending: For an interrupted run, the requests left pending in its store; answer
            them with ``Agent.resume(run_id, store=..., answers={request_id: answer})``.
        truncated: True when the final answer was cut off by the model's token limit.
    """

    run_id: str
    status: RunStatus
    output: Any = None
    messages: list[Message] = field(default_factory=list[Message])
    usage: Usage = field(default_factory=Usage)
    error: BaseException | None = None
    clarifier: Any = None
    pending: list[RequestEvent] = field(default_factory=list[RequestEvent])
    truncated: bool = False


def finished_event(result: RunResult, agent_name: str) -> RunFinished:
    """The ``RunFinished`` event announcing ``result``: the one place it is built."""
    error = result.error
    text = None if error is None else error_text(error)
    if result.status == "rejected":
        text = "the user rejected the proposed plan"
    return RunFinished(
        run_id=result.run_id,
        agent_path=(agent_name,),
        depth=0,
        invocation_id=invocation_id(result.run_id),
        status=result.status,
        output=result.output if type(result.output) is str else output_text(result.output),
        error=text,
        usage=result.usage,
    )


Executor = Callable[[Coordinator], Awaitable[RunResult]]
"""Runs the root agent against a coordinator and returns its result (never raises)."""


class _Events:
    """A run's events on their way from the tasks emitting them to the one iterating: in
    order, unbounded, the reader woken by an event made only while it waits (a memory
    object stream cost a receive's worth of calls per event, and a wait's more)."""

    __slots__ = ("buffer", "ended", "wake")

    def __init__(self) -> None:
        self.buffer: deque[Event] = deque()
        self.ended = False
        """No event comes any more: the run is over, or its block was left."""
        self.wake: anyio.Event | None = None

    def put(self, event: Event) -> None:
        """The run's outlet: keep ``event`` (after the end it goes nowhere)."""
        if self.ended:
            return
        self.buffer.append(event)
        wake = self.wake
        if wake is not None:
            self.wake = None
            wake.set()

    def end(self, *, dropped: bool = False) -> None:
        """No more events; ``dropped``: nor those still buffered (the block was left)."""
        self.ended = True
        if dropped:
            self.buffer.clear()
        wake = self.wake
        if wake is not None:
            self.wake = None
            wake.set()

    async def wait(self) -> None:
        """Wait for the next event or the end (any number of readers may wait)."""
        wake = self.wake
        if wake is None:
            wake = self.wake = anyio.Event()
        await wake.wait()


class Run:
    """A root run in progress. Get one from ``Agent.stream``; don't build it yourself.

    Iterate it (``async for event in run``) to see every event of the agent tree, answer
    requests with ``respond``, stop it with ``cancel``; read ``result`` once it has ended.
    A caller that only passes the events on may instead ``deliver`` them to a callback.
    """

    def __init__(
        self,
        *,
        run_id: str,
        prompt: str,
        agent_name: str,
        executor: Executor,
        on_unhandled: OnUnhandled = "decline",
    ) -> None:
        self.run_id = run_id
        self._prompt = prompt
        self._agent_name = agent_name
        self._executor = executor
        # The events' buffer is made when the block is entered (``deliver`` needs none).
        self._events: _Events | None = None
        self.coordinator = Coordinator(run_id, listening=True, on_unhandled=on_unhandled)
        self._scope = anyio.CancelScope()
        self._entered = False
        self._task_group: TaskGroup | None = None
        self._finished = anyio.Event()
        self._result: RunResult | None = None
        self._iterated = False
        self._burst = 0
        self.on_cancel: Callable[[RunResult], Awaitable[None]] | None = None
        """Told when the run is cancelled on purpose (a store marks its record cancelled)."""

    def __repr__(self) -> str:
        state = self._result.status if self._result else "running"
        return f"Run({self.run_id!r}, {state})"

    # -- lifecycle -----------------------------------------------------------------------
    def _enter(self) -> None:
        if self._entered:
            raise UserError("a Run can be entered only once")
        self._entered = True

    async def __aenter__(self) -> Run:
        self._enter()
        self._events = events = _Events()
        self.coordinator.outlet.sink = events.put
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._main)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._task_group is not None
        if not self._finished.is_set():
            # Leaving the block early cancels the run on purpose; an exception passing
            # through (e.g. the process shutting down) leaves stored requests resumable.
            if exc_type is None:
                self.coordinator.cancel_all()
            self._scope.cancel()
        try:
            await self._task_group.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            raise first_leaf(group) from None
        finally:
            assert self._events is not None
            self._events.end(dropped=True)
        if exc_type is None and self._result is not None and self._result.error is not None:
            raise self._result.error
        return None

    async def _main(self) -> None:
        result: RunResult | None = None
        try:
            with self._scope:
                result = await self._executor(self.coordinator)
        finally:
            # Also reached when the cancellation came from outside (the caller's block
            # raised, or an enclosing scope was cancelled): the stream still ends properly.
            if result is None:
                result = RunResult(
                    run_id=self.run_id, status="cancelled", usage=self.coordinator.usage
                )
                # Only a deliberate cancel ends the stored run; a shutdown or an outer
                # cancellation is like a crash, so the run stays resumable. Shielded: the
                # store must learn it even while this task is being cancelled.
                if self.on_cancel is not None and self.coordinator.cancelling:
                    with anyio.CancelScope(shield=True):
                        await self.on_cancel(result)
                self.coordinator.emit(finished_event(result, self._agent_name))
            self._result = result
            self._finished.set()
            watch = self.coordinator.quiescence.watch
            if watch is not None:
                watch.set()  # a caller of settled() learns the run is over
            if self._events is not None:
                self._events.end()

    async def deliver(self, sink: Callable[[Event], None]) -> RunResult:
        """Run to the end in the calling task, each event handed to ``sink`` as it is emitted.

        The other way to drive a run, for a caller that passes its events on (a server):
        instead of ``async with run: async for event in run: ...``, with no task of the
        run's own and no stream between. ``sink`` is called in order, at once, from the
        task that emits the event (the agent's, or the one answering a request): it must
        not wait. Everything else is as in the block: ``respond``, ``cancel``, ``settled``
        and ``wait`` work from other tasks; the caller being cancelled, or ``sink``
        raising, stops the run as an exception leaving the block does (its stored requests
        stay resumable); the exception is raised once the run has ended.

        Returns:
            The run's result.

        Raises:
            UserError: The run was entered already (``deliver`` or ``async with``).
            The exception that failed the run, or the one ``sink`` raised.
        """
        self._enter()
        self._iterated = True
        failed: list[Exception] = []
        scope = self._scope

        def take(event: Event) -> None:
            if failed:
                return
            try:
                sink(event)
            except Exception as e:  # not the emitter's to handle: the run stops
                failed.append(e)
                scope.cancel()

        self.coordinator.outlet.sink = take
        try:
            await self._main()
        finally:
            self.coordinator.outlet.sink = None  # the run is over: later events go nowhere
        if failed:
            raise failed[0]
        result = self.result
        if result.error is not None:
            raise result.error
        return result

    # -- events --------------------------------------------------------------------------
    def __aiter__(self) -> Run:
        return self

    async def __anext__(self) -> Event:
        self._iterated = True
        # Events already buffered are handed out without a trip through the scheduler: a
        # receive() per event cost one event-loop iteration each, which bounded a busy
        # stream. Each step stays a cancellation point, and a full checkpoint every
        # _YIELD_EVERY events keeps a long burst from starving other tasks.
        self._burst += 1
        if self._burst >= _YIELD_EVERY:
            self._burst = 0
            await anyio.lowlevel.checkpoint()
        else:
            await anyio.lowlevel.checkpoint_if_cancelled()
        events = self._events
        if events is None:
            raise UserError("enter the run (async with run) before iterating it")
        buffer = events.buffer
        while not buffer:
            if events.ended:
                raise StopAsyncIteration
            self._burst = 0
            await events.wait()
        return buffer.popleft()

    # -- control -------------------------------------------------------------------------
    async def respond(
        self,
        request_id: str,
        answer: Any,
        *,
        by: str | None = None,
        channel: str = "api",
        policy: AnswerPolicy | None = None,
    ) -> Any:
        """Answer a pending request (a question or a permission) by its id.

        ``Decline()`` (``hpd_agent.Decline``) as the answer declines any request: it ends
        with status ``"declined"`` and the asking tool gets
        ``QuestionNotAnswered(status="declined")`` (the model is told the user declined).

        Who answers travels with the answer: the resolved event carries ``answered_by`` and
        ``channel``, a store keeps them with the answer (never overwritten), the trace's
        ``await_human`` span names them.

        Args:
            request_id: The request's id.
            answer: The answer, or ``Decline()``.
            by: Who answers (a person's name, a token's name); None: nobody named.
            channel: Where the answer comes from: ``"api"`` (code) unless an adapter says
                otherwise (``"web"``, ``"mcp"``, ...; ``hpd_agent.backend.CHANNELS``).
            policy: An ``AnswerPolicy`` (``hpd_agent.governance``) asked first whether
                ``by`` may answer this request; under a policy ``by`` is required.

        Returns the answer as validated (e.g. an option in its canonical spelling), or the
        ``Decline`` as given.

        Raises:
            UnknownRequestError: No such request in this run.
            RequestAlreadyAnsweredError: It has its answer already, or was declined.
            RequestExpiredError: It timed out.
            RequestCancelledError: It was cancelled.
            AnswerRefusedError: The policy does not let ``by`` answer it; nothing changed.
            InvalidAnswerError: The answer does not fit the question.
        """
        author = API if by is None and channel == "api" else Author(by, channel)
        return await self.coordinator.respond(request_id, answer, author=author, policy=policy)

    def cancel_request(self, request_id: str) -> None:
        """End one pending request without an answer; the asking agent is told so."""
        self.coordinator.cancel_request(request_id)

    def stop_listening(self) -> None:
        """Nobody will answer from now on (a server that ends a run at its first question
        rather than wait): open and later requests resolve by the run's ``on_unhandled``
        policy; under ``"interrupt"`` the run ends ``"interrupted"`` once it has settled,
        its requests left pending in its store for a resume."""
        self.coordinator.stop_listening()

    def abandon(self) -> None:
        """Stop the run the way a stopping process would, not on purpose: its stored
        requests stay pending and the run resumable (what an exception leaving its block
        does; ``cancel`` is the deliberate stop)."""
        self._scope.cancel()

    def cancel(self) -> None:
        """Cancel the run and its whole agent tree. Pending requests end as cancelled
        (in the store too, when the run has one)."""
        self.coordinator.cancel_all()
        self._scope.cancel()

    @property
    def pending(self) -> list[RequestEvent]:
        """Requests waiting for an answer right now, oldest first."""
        return self.coordinator.pending()

    async def settled(self) -> list[RequestEvent]:
        """Wait until the run waits for the human alone, and return what it waits for.

        The run has settled when at least one call of its agent tree waits on a request
        and every live model call and tool call does: nothing can happen until someone
        answers. Questions asked in parallel branches are then all pending, so a bridge
        that must send a batch (an MCP ``InputRequiredResult``, an A2A ``input-required``
        task) sends them together. Answer some or all with ``respond``, then call this
        again for the next batch. An answer counts at once: right after ``respond`` the
        run is not settled until it waits again.

        Returns:
            The pending requests at that moment, oldest first; ``[]`` once the run has
            ended (it ends without settling when nothing asks).
        """
        quiescence = self.coordinator.quiescence
        while not self._finished.is_set():
            if quiescence.settled:
                pending = self.pending
                if pending:
                    return pending
            watch = quiescence.watch
            if watch is None or watch.is_set():
                watch = quiescence.watch = anyio.Event()
            await watch.wait()
        return []

    @property
    def done(self) -> bool:
        """Whether the run has ended."""
        return self._finished.is_set()

    async def wait(self) -> RunResult:
        """Wait for the run to end and return its result.

        If nobody has iterated the events, nobody can answer requests either: pending and
        future requests then resolve by the run's ``on_unhandled`` policy instead of hanging.
        """
        if not self._iterated:
            self.coordinator.stop_listening()
        await self._finished.wait()
        assert self._result is not None
        return self._result

    @property
    def result(self) -> RunResult:
        """The run's result.

        Raises:
            RunNotFinishedError: The run has not ended yet.
        """
        if self._result is None:
            raise RunNotFinishedError("the run has not finished; iterate it or await wait()")
        return self._result
