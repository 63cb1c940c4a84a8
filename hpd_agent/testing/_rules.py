"""The rules of ``ScriptedHuman`` and its answering side: a request finds its rule.

``Rule`` is one rule (what a question or permission request must match, the reply, how
often it may be used). ``Replying`` is a mixin of ``ScriptedHuman``: ``reply_for`` (the
first matching rule's reply, every request recorded), the handler methods that call it,
and ``assert_all_asked``. Adding rules (``answer``, ``approve``, ...) stays in
``hpd_agent/testing/_human.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..events import ClarificationRequest, PermissionRequest, RequestEvent, format_path

__all__ = ["Replying", "Rule", "UnexpectedRequestError"]


class UnexpectedRequestError(AssertionError):
    """A ScriptedHuman got a request none of its rules matches."""


@dataclass(kw_only=True)
class Rule:
    """One rule of a ``ScriptedHuman``: what a request must match, and the reply."""

    kind: str  # "question" | "permission"
    pattern: re.Pattern[str]
    reply: Any
    agent: str | None
    times: int | None
    question_kind: str | None = None
    target: str = "question"  # what the pattern looks at: "question" or a ``data`` key
    full: bool = False  # the whole target must match (argument and custom names)
    used: int = 0
    label: str = field(default="")

    def matches(self, request: RequestEvent) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.agent is not None and self.agent not in (
            request.agent_name,
            format_path(request.agent_path),
        ):
            return False
        if isinstance(request, ClarificationRequest):
            if self.kind != "question":
                return False
            if self.question_kind is not None and request.question_kind != self.question_kind:
                return False
            if self.target == "question":
                return bool(self.pattern.search(request.question))
            value = (request.data or {}).get(self.target)
            if not isinstance(value, str):
                return False
            found = self.pattern.fullmatch(value) if self.full else self.pattern.search(value)
            return found is not None
        return self.kind == "permission" and bool(self.pattern.fullmatch(request.tool_name))


class Replying:
    """How ``ScriptedHuman`` answers a request from its rules (documented there).

    Attributes:
        rules: The rules, in the order they were added.
        asked: Every request received, in order.
        answered: Each request a rule matched, with the reply given.
    """

    # Set by ScriptedHuman.__init__; declared here so that the methods below are typed.
    rules: list[Rule]
    asked: list[RequestEvent]
    answered: list[tuple[RequestEvent, Any]]

    def reply_for(self, request: RequestEvent) -> Any:
        """The answer the rules give ``request`` (records it). Usable in your own event loop.

        Raises:
            UnexpectedRequestError: No rule matches.
        """
        self.asked.append(request)
        for rule in self.rules:
            if rule.matches(request):
                rule.used += 1
                reply = rule.reply(request) if callable(rule.reply) else rule.reply
                self.answered.append((request, reply))
                return reply
        what = (
            f"{request.question_kind} question {request.question!r}"
            if isinstance(request, ClarificationRequest)
            else f"permission for {request.tool_name!r}"
        )
        raise UnexpectedRequestError(
            f"ScriptedHuman has no rule for {what} from {format_path(request.agent_path)}"
        )

    async def on_clarification(self, request: ClarificationRequest) -> Any:
        """Answer a question from the rules."""
        return self.reply_for(request)

    async def on_permission(self, request: PermissionRequest) -> Any:
        """Decide a permission request from the rules."""
        return self.reply_for(request)

    def assert_all_asked(self) -> None:
        """Fail unless every rule was used at least once."""
        unused = [r.label for r in self.rules if r.used == 0]
        if unused:
            raise AssertionError(f"ScriptedHuman: never asked about {unused}")
