"""One rule of ``ScriptedHuman``: what a question or permission request must match, the
reply, how often it may be used (``Rule.matches``); and ``UnexpectedRequestError``, what a
request no rule matches raises. The rules are added and tried by ``ScriptedHuman``
(``hpd_agent/testing/_human.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..events import ClarificationRequest, RequestEvent, format_path

__all__ = ["Rule", "UnexpectedRequestError"]


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
