"""The contextvar that holds the current call frame, and the frame itself (``ToolContext``).

While a tool runs, ``current_context()`` returns its ``ToolContext``: the root run's
coordinator, the path of agents down to this call, and the deadlines that enclose it. An
``Agent.run`` started inside a tool finds the frame here and becomes a nested run that emits
into the root's coordinator, at any depth, with no wiring by the caller.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from .coordinator import Coordinator
    from .events import Event

__all__ = ["Deadline", "ToolContext", "current_context"]

_current: ContextVar[ToolContext | None] = ContextVar("hpd_agent_tool_context", default=None)


def current_context() -> ToolContext | None:
    """The ``ToolContext`` of the tool call running in this task, or None outside tools."""
    return _current.get()


class Deadline:
    """A cancel scope's deadline that stops running while a human is being waited for.

    Several questions may wait under one deadline at once (parallel sub-agents), so pauses
    are counted and the clock restarts only when the last one ends.
    """

    __slots__ = ("_pauses", "_remaining", "scope")

    def __init__(self, scope: anyio.CancelScope) -> None:
        self.scope = scope
        self._pauses = 0
        self._remaining = math.inf

    def pause(self) -> None:
        """Stop the clock (nested pauses are counted)."""
        if self._pauses == 0:
            self._remaining = self.scope.deadline - anyio.current_time()
            self.scope.deadline = math.inf
        self._pauses += 1

    def resume(self) -> None:
        """Restart the clock with the time that was left when it stopped."""
        self._pauses -= 1
        if self._pauses == 0:
            self.scope.deadline = anyio.current_time() + self._remaining


class ToolContext:
    """What a tool knows about the call it serves. Declare a parameter of this type to get it.

    Attributes:
        run_id: Id of the root run.
        agent_path: Agent names from the root down to the agent that called the tool.
        depth: Depth of that agent (0 for the root agent).
        tool_name: Name of the tool being called.
        tool_call_id: The model's id for this call.
        call_path: Stable path of this call inside the run (run, agents, turns, call ids);
            request ids derive from it, so a replay gets the same ids.
    """

    __slots__ = (
        "_asks",
        "agent_path",
        "call_path",
        "coordinator",
        "deadlines",
        "depth",
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
    ) -> None:
        self.coordinator = coordinator
        self.run_id = coordinator.run_id
        self.agent_path = agent_path
        self.depth = len(agent_path) - 1
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.call_path = call_path
        self.scope_path = scope_path
        """Path of the agent run that made this call (conversations are kept per scope)."""
        self.deadlines = tuple(deadlines)
        self._asks = 0

    def __repr__(self) -> str:
        return f"ToolContext({self.tool_name!r}, path={'/'.join(self.agent_path)!r})"

    def next_request_id(self) -> str:
        """A request id for the next request of this call, stable across replays."""
        n = self._asks
        self._asks += 1
        key = f"{self.call_path}?{n}".encode()
        return "req_" + hashlib.blake2b(key, digest_size=8).hexdigest()

    def emit(self, event: Event) -> None:
        """Put an event on the root run's stream."""
        self.coordinator.emit(event)

    async def ask(
        self,
        question: str,
        *,
        context: str | None = None,
        options: Sequence[str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a human's answer time)
    ) -> str:
        """Ask the human a free-text question and wait for the answer, mid-turn.

        The question reaches the root run's stream as a ``ClarificationRequest`` tagged with
        this agent's path. Time spent waiting does not count against tool timeouts.

        Args:
            question: What to ask.
            context: Why it is asked, shown with the question.
            options: If given, the answer must be one of them.
            timeout: Seconds to wait; None waits as long as the run lives.

        Returns:
            The answer text.

        Raises:
            QuestionNotAnswered: The question expired, was cancelled, or nobody was there.
                Left uncaught, the loop turns it into a plain tool result for the model.
        """
        from .clarification import TextQuestion

        spec = TextQuestion(question=question, context=context, options=options)
        answer: Any = await self.coordinator.request(self, spec, timeout=timeout)
        return str(answer)
