"""Asking the human: the ``ask_user`` tool and the questions it and other tools raise.

``ask_user()`` is the AskUserForClarification tool: the model calls it with a question, the
question travels to the root run's stream as a ``ClarificationRequest``, the tool waits
mid-turn, and the human's answer becomes the tool result, all in the same turn. Any tool can
do the same with ``await ctx.ask(...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._context import ToolContext
from .coordinator import RequestSpec
from .events import ClarificationRequest, ClarificationResolved, Event, RequestEvent, RequestStatus
from .exceptions import QuestionNotAnswered
from .tools import Tool

__all__ = ["TextQuestion", "ask_user", "unanswered_text"]

_ASK_USER_DESCRIPTION = (
    "Ask the user a question and wait for the answer. Use it when you need a fact or a "
    "decision only the user has (a preference, a choice between options, missing details). "
    "Give `options` when the answer must be one of a few choices."
)


class TextQuestion(RequestSpec):
    """A free-text question; with ``options``, the answer must be one of them.

    Args:
        question: What to ask.
        context: Why it is asked.
        options: Allowed answers; matched exactly or ignoring case and surrounding space.
    """

    __slots__ = ("context", "options", "question")

    def __init__(
        self, *, question: str, context: str | None = None, options: Sequence[str] | None = None
    ) -> None:
        self.question = question
        self.context = context
        self.options = tuple(options) if options else None

    def build(self, *, request_id: str, ctx: ToolContext) -> RequestEvent:
        """The ``ClarificationRequest`` event."""
        return ClarificationRequest(
            run_id=ctx.run_id,
            agent_path=ctx.agent_path,
            depth=ctx.depth,
            request_id=request_id,
            question=self.question,
            context=self.context,
            options=self.options,
            tool_call_id=ctx.tool_call_id,
        )

    def validate(self, answer: Any) -> str:
        """Accept text; with options, only one of them (returned in its canonical spelling)."""
        if not isinstance(answer, str):
            raise TypeError(f"expected text, got {type(answer).__name__}")
        if self.options is None:
            return answer
        if answer in self.options:
            return answer
        folded = answer.strip().casefold()
        for option in self.options:
            if option.strip().casefold() == folded:
                return option
        raise ValueError(f"{answer!r} is not one of the options {list(self.options)}")

    def resolved(self, request: RequestEvent, status: RequestStatus, answer: Any) -> Event:
        """The ``ClarificationResolved`` event."""
        return ClarificationResolved(
            run_id=request.run_id,
            agent_path=request.agent_path,
            depth=request.depth,
            request_id=request.request_id,
            status=status,
            answer=answer,
        )


def unanswered_text(error: QuestionNotAnswered) -> str:
    """The tool result a model gets when its question went unanswered: plain, actionable text."""
    return (
        f"{error} Do not ask again now; continue with your best judgement "
        "and state the assumptions you make."
    )


def ask_user(
    *,
    timeout: float | None = None,
    name: str = "ask_user",
    description: str = _ASK_USER_DESCRIPTION,
) -> Tool:
    """The AskUserForClarification tool: the model asks the human and waits, mid-turn.

    Args:
        timeout: Seconds to wait for an answer; on timeout the model is told the user did not
            answer (never an exception). None waits as long as the run lives.
        name: The tool name the model sees.
        description: The tool description the model sees.

    Returns:
        A ``Tool`` taking ``{question: str, context?: str, options?: list[str]}``.
    """

    async def ask(
        ctx: ToolContext,
        question: str,
        context: str | None = None,
        options: list[str] | None = None,
    ) -> str:
        """Ask the user.

        Args:
            question: The question, phrased for the user.
            context: Why you ask, in one sentence.
            options: The allowed answers, if the answer must be one of a few choices.
        """
        return await ctx.ask(question, context=context, options=options, timeout=timeout)

    return Tool(ask, name=name, description=description)
