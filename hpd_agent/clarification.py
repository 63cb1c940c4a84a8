"""Asking the human: the ``ask_user`` tool and the questions it and other tools raise.

``ask_user()`` is the AskUserForClarification tool: the model calls it with a question, the
question travels to the root run's stream as a ``ClarificationRequest``, the tool waits
mid-turn, and the human's answer becomes the tool result, all in the same turn. Any tool can
do the same with ``await ctx.ask(...)``, or ask a typed question (input, choice, confirmation,
action, custom, or a kind of your own: see ``hpd_agent.questions``) with ``ctx.ask_input``,
``ctx.ask_choice``, ``ctx.confirm``, ``ctx.ask_action``, ``ctx.ask_custom`` or
``ctx.ask_kind``.
"""

from __future__ import annotations

from ._core.context import ToolContext
from ._core.expiry import check_warning
from .exceptions import QuestionNotAnswered
from .questions import TextQuestion
from .tools import Tool

__all__ = ["TextQuestion", "ask_user", "unanswered_text"]

_ASK_USER_DESCRIPTION = (
    "Ask the user a question and wait for the answer. Use it when you need a fact or a "
    "decision only the user has (a preference, a choice between options, missing details). "
    "Give `options` when the answer must be one of a few choices."
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
    warn_before: float | None = None,
    name: str = "ask_user",
    description: str = _ASK_USER_DESCRIPTION,
) -> Tool:
    """The AskUserForClarification tool: the model asks the human and waits, mid-turn.

    Args:
        timeout: Seconds to wait for an answer; on timeout the model is told the user did not
            answer (never an exception). None waits as long as the run lives.
        warn_before: With ``timeout``: seconds before it to announce the question as
            expiring (``RequestExpiring``, ``Hook.request_expiring``) if still pending.
        name: The tool name the model sees.
        description: The tool description the model sees.

    Returns:
        A ``Tool`` taking ``{question: str, context?: str, options?: list[str]}``.

    Raises:
        UserError: ``warn_before`` without a ``timeout``, or not a positive number.
    """
    if warn_before is not None:
        check_warning(warn_before, timeout)

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
        return await ctx.ask(
            question, context=context, options=options, timeout=timeout, warn_before=warn_before
        )

    tool = Tool(ask, name=name, description=description)
    tool.side_effects = False  # it acts only through its request
    return tool
