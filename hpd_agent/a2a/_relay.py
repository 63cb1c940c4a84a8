"""``Relay``: a remote task's questions relayed to the human, and which were answered.

Each question is asked through ``ToolContext.on_behalf_of`` (agent path: the caller's, the
remote agent's name, the path the remote reports below itself; request id: from the
question's key); several pending at once are asked each in a task of its own (``relay``),
a question asked alone in the call's own task (``ask``). An
answer (or the ``QuestionNotAnswered`` a question ended with) comes back through a memory
stream, in the order they come. A question the remote no longer asks is withdrawn (it ends
as cancelled).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable
from typing import Any

import anyio
from a2a.types import TaskStatus
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from ..exceptions import RequestError
from ..tools import ToolContext
from ._questions import question_spec
from ._view import TaskView
from ._wire import RemoteQuestion, derived_key, questions_of

__all__ = ["Outcome", "Relay"]

Outcome = tuple[RemoteQuestion, Any]
"""A relayed question and its answer, or the exception it ended with."""


@dataclasses.dataclass(slots=True)
class _Asking:
    question: RemoteQuestion
    request_id: str
    scope: anyio.CancelScope


class Relay:
    """The questions of one remote task: asked, answered, withdrawn.

    Args:
        name: The remote agent's name (the first name appended to the questions' paths).
        ctx: The tool call's context.
    """

    def __init__(self, name: str, ctx: ToolContext) -> None:
        self.name = name
        self.ctx = ctx
        self.asking: dict[str, _Asking] = {}
        self.sent: set[tuple[tuple[str, str], str]] = set()
        """(what names it, ``_named``; status message id) of each question answered: a
        status seen again (a stale snapshot) is not a new question."""
        self.sent_ids: set[str] = set()
        """The remote's request ids answered: one asked again was refused, and is new."""
        self._read: tuple[TaskStatus, dict[str, Any], list[RemoteQuestion]] | None = None
        """The status last read, its event's metadata and its questions: a status is
        looked at more than once (has it settled? what does it ask?), read once."""

    def open_questions(self, view: TaskView) -> list[RemoteQuestion]:
        """The questions of the task's status not answered yet (one asked again after its
        answer was refused is new: it gets a key of its own)."""
        status, metadata = view.status, view.status_metadata
        read = self._read
        if read is None or read[0] is not status or read[1] is not metadata:
            read = self._read = (status, metadata, questions_of(status, metadata))
        found: list[RemoteQuestion] = []
        for q in read[2]:
            if (_named(q), q.status_id) in self.sent:
                continue
            if q.request_id is not None and q.request_id in self.sent_ids:
                q = dataclasses.replace(q, key=derived_key("r", q.key, q.status_id))
            found.append(q)
        return found

    def answered(self, question: RemoteQuestion) -> None:
        """``question``'s answer is being sent."""
        self.sent.add((_named(question), question.status_id))
        if question.request_id is not None:
            self.sent_ids.add(question.request_id)

    def take(self, question: RemoteQuestion) -> bool:
        """Whether ``question`` was still asked (its answer is to be sent); it is not now."""
        return self.asking.pop(question.key, None) is not None

    def relay(
        self, tg: TaskGroup, questions: list[RemoteQuestion], send: MemoryObjectSendStream[Outcome]
    ) -> None:
        """Ask the questions not asked yet; withdraw those the remote no longer asks."""
        keys = {q.key for q in questions}
        for key in [k for k in self.asking if k not in keys]:
            self._withdraw(key)
        for question in questions:
            if question.key not in self.asking:
                scope = anyio.CancelScope()
                request_id = self._frame(question).next_request_id()  # the id it will get
                self.asking[question.key] = _Asking(question, request_id, scope)
                tg.start_soon(self._ask, question, scope, send)

    def withdraw_all(self) -> None:
        """The task ended: no question of it is waited for any more."""
        for key in list(self.asking):
            self._withdraw(key)

    def ask(self, question: RemoteQuestion) -> Awaitable[Any]:
        """Ask ``question`` from the calling task (the only one asked: nothing to withdraw
        it for while it waits); await its answer (it raises what the question ended with)."""
        return self._frame(question).request(question_spec(question, self.ctx.tool_name))

    def _frame(self, question: RemoteQuestion) -> ToolContext:
        return self.ctx.on_behalf_of(self.name, *question.path, key=question.key)

    async def _ask(
        self,
        question: RemoteQuestion,
        scope: anyio.CancelScope,
        send: MemoryObjectSendStream[Outcome],
    ) -> None:
        with scope:
            asking = self.ask(question)
            try:
                answer: Any = await asking
            except Exception as e:
                # Raised by the call itself, not this task: no exception group around it.
                answer = e
            send.send_nowait((question, answer))

    def _withdraw(self, key: str) -> None:
        """The remote no longer waits for this question: end it (as cancelled)."""
        asking = self.asking.pop(key)
        # Answered meanwhile, or merged into an identical question: nothing to end here.
        with contextlib.suppress(RequestError):
            self.ctx.cancel_request(asking.request_id)
        asking.scope.cancel()


def _named(question: RemoteQuestion) -> tuple[str, str]:
    """What names ``question`` across the statuses that ask it: the remote's request id, else
    its key (tagged apart, so an id never passes for a key)."""
    if question.request_id is not None:
        return ("id", question.request_id)
    return ("key", question.key)
