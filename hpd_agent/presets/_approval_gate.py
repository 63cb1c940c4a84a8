"""``approval_gate``: show the human a produced value and ask approve, ``edit: ...``, or reject.

Replies are matched whole, after strip and lower case: an approve word lets the value
through, a reject word stops it (``on_reject`` is called), and ``edit: <text>`` changes it.
Anything else is asked again, with a reminder of the three replies.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from .._values.vocabulary import APPROVE_WORDS, REJECT_WORDS
from ..exceptions import QuestionNotAnswered, UserError
from ..tools import ToolContext
from ._shared import frame, keywords, normalise_reply

__all__ = ["GATE_APPROVE_WORDS", "GATE_REJECT_WORDS", "GateResult", "GateStatus", "approval_gate"]

T = TypeVar("T")

GATE_APPROVE_WORDS: frozenset[str] = APPROVE_WORDS - {"once", "allow"}
"""Replies that approve the value (the whole reply, after strip and lower case)."""
GATE_REJECT_WORDS: frozenset[str] = REJECT_WORDS - {"deny", "denied"}
"""Replies that reject it."""

GateStatus = Literal["approved", "edited", "rejected", "unanswered"]
"""How a gate ended: approved as shown, replaced by the human's edit, rejected, or no
decision came (the question went unanswered, or the replies never made sense)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GateResult(Generic[T]):
    """How an approval gate ended.

    Attributes:
        status: See ``GateStatus``.
        value: The value that passed (the edited one after an edit); for a rejected or
            unanswered gate, the value that was shown.
        edits: The human's edit instructions, oldest first.
        replies: Every reply received, in order.
    """

    status: GateStatus
    value: T
    edits: tuple[str, ...] = ()
    replies: tuple[str, ...] = ()

    @property
    def approved(self) -> bool:
        """Whether the value may go ahead (approved, or edited by the human)."""
        return self.status in ("approved", "edited")


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


async def approval_gate(
    value: T,
    *,
    question: str = "Please review this before it is used.",
    render: Callable[[T], str] = str,
    on_reject: Callable[[T], Any] | None = None,
    on_edit: Callable[[T, str], T | Awaitable[T]] | None = None,
    approve_words: Iterable[str] = GATE_APPROVE_WORDS,
    reject_words: Iterable[str] = GATE_REJECT_WORDS,
    edit_prefix: str = "edit:",
    max_asks: int = 5,
    timeout: float | None = None,
    ctx: ToolContext | None = None,
) -> GateResult[Any]:
    """Ask the human to approve ``value``, change it with ``edit: ...``, or reject it.

    Without ``on_edit``, the text after ``edit:`` replaces the value and the gate ends with
    status ``"edited"``. With ``on_edit(value, instruction)`` (sync or async, e.g. an agent
    that revises a draft), the revised value is shown again for a new decision.

    Args:
        value: What to review.
        question: The question shown above the rendered value.
        render: How the value is shown to the human.
        on_reject: Called (sync or async) with the value when the human rejects it.
        on_edit: Revises the value from an edit instruction; see above.
        approve_words: Replies that approve.
        reject_words: Replies that reject.
        edit_prefix: The prefix of an edit reply (matched ignoring case).
        max_asks: Most questions asked; past it the gate ends ``"unanswered"``.
        timeout: Seconds to wait for each answer; None waits as long as the run lives.
        ctx: The call frame to ask from; defaults to the running tool's.

    Returns:
        The ``GateResult``; ``result.approved`` says whether the value may go ahead.

    Raises:
        UserError: Called outside any run, or with a bad configuration.
    """
    approve = keywords(approve_words, "approve_words")
    reject = keywords(reject_words, "reject_words")
    if approve & reject:
        raise UserError(f"words both approve and reject: {sorted(approve & reject)}")
    prefix = normalise_reply(edit_prefix)
    if not prefix:
        raise UserError("edit_prefix must not be empty")
    if max_asks < 1:
        raise UserError("max_asks must be at least 1")
    gate = _Gate(frame(ctx, "approval_gate"), value, approve, reject, prefix, edit_prefix)
    return await gate.run(question, render, on_reject, on_edit, max_asks, timeout)


class _Gate:
    """One review: the value as it stands, the edits and replies so far."""

    def __init__(
        self,
        asker: ToolContext,
        value: Any,
        approve: frozenset[str],
        reject: frozenset[str],
        prefix: str,
        edit_prefix: str,
    ) -> None:
        self.asker = asker
        self.current: Any = value
        self.approve = approve
        self.reject = reject
        self.prefix = prefix
        self.hint = f"Reply 'approve', 'reject', or '{edit_prefix.strip()} <your changes>'."
        self.edits: list[str] = []
        self.replies: list[str] = []

    def done(self, status: GateStatus) -> GateResult[Any]:
        return GateResult(
            status=status, value=self.current, edits=tuple(self.edits), replies=tuple(self.replies)
        )

    async def run(
        self,
        question: str,
        render: Callable[[Any], str],
        on_reject: Callable[[Any], Any] | None,
        on_edit: Callable[[Any, str], Any] | None,
        max_asks: int,
        timeout: float | None,
    ) -> GateResult[Any]:
        reminder = ""
        for _ in range(max_asks):
            try:
                reply = await self.asker.ask(
                    f"{reminder}{question}\n\n{render(self.current)}",
                    context=self.hint,
                    timeout=timeout,
                )
            except QuestionNotAnswered:
                return self.done("unanswered")
            self.replies.append(reply)
            word = normalise_reply(reply)
            if word in self.approve:
                return self.done("approved")
            if word in self.reject:
                if on_reject is not None:
                    await _call(on_reject, self.current)
                return self.done("rejected")
            instruction = reply.strip()[len(self.prefix) :].strip()
            if word.startswith(self.prefix) and instruction:
                self.edits.append(instruction)
                if on_edit is None:
                    self.current = instruction
                    return self.done("edited")
                self.current = await _call(on_edit, self.current, instruction)
                reminder = "Revised as you asked. "
                continue
            reminder = f"I did not understand {reply.strip()!r}. {self.hint}\n\n"
        return self.done("unanswered")
