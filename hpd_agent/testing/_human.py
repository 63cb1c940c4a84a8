"""``ScriptedHuman``: a handler that answers requests from rules, for tests and demos."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..events import ClarificationRequest, PermissionRequest, RequestEvent
from ..handlers import BaseHandler
from ..permissions import Approve, Decision, Deny

__all__ = ["ScriptedHuman", "UnexpectedRequestError"]


class UnexpectedRequestError(AssertionError):
    """A ScriptedHuman got a request none of its rules matches."""


@dataclass(kw_only=True)
class _Rule:
    kind: str  # "question" | "permission"
    pattern: re.Pattern[str]
    reply: Any
    agent: str | None
    times: int | None
    used: int = 0
    label: str = field(default="")

    def matches(self, request: RequestEvent) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.agent is not None and self.agent not in (
            request.agent_name,
            "/".join(request.agent_path),
        ):
            return False
        if isinstance(request, ClarificationRequest):
            return self.kind == "question" and bool(self.pattern.search(request.question))
        return self.kind == "permission" and bool(self.pattern.fullmatch(request.tool_name))


def _compile(match: str | re.Pattern[str], *, literal_full: bool = False) -> re.Pattern[str]:
    if isinstance(match, re.Pattern):
        return match
    text = re.escape(match)
    return re.compile(text, re.IGNORECASE)


class ScriptedHuman(BaseHandler):
    """Answers questions and permission requests by rules, and records what it was asked.

    Questions match by a case-insensitive substring (or a compiled regex) of the question,
    optionally narrowed to an agent (its name or its full path joined with ``/``).
    Permission rules match the tool name. A request no rule matches fails the run with
    ``UnexpectedRequestError``, so a test notices a question it did not expect.

    Args:
        answers: Shortcut: ``{question substring: answer}``.
        permissions: Shortcut: ``{tool name: Approve()/Deny()/bool}``.

    Example:
        ```python
        human = ScriptedHuman({"framework": "Express"}).approve("write_file")
        result = await agent.run("Build it", handler=human)
        human.assert_all_asked()
        ```
    """

    def __init__(
        self,
        answers: Mapping[str, Any] | None = None,
        *,
        permissions: Mapping[str, Decision | bool] | None = None,
    ) -> None:
        self.rules: list[_Rule] = []
        self.asked: list[RequestEvent] = []
        """Every request received, in order."""
        self.answered: list[tuple[RequestEvent, Any]] = []
        for match, reply in (answers or {}).items():
            self.answer(match, reply)
        for tool_name, decision in (permissions or {}).items():
            self._add_permission(tool_name, decision, agent=None, times=None)

    def answer(
        self,
        match: str | re.Pattern[str],
        reply: Any,
        *,
        agent: str | None = None,
        times: int | None = None,
    ) -> ScriptedHuman:
        """Answer questions matching ``match`` with ``reply`` (``times`` None: every time)."""
        self.rules.append(
            _Rule(kind="question", pattern=_compile(match), reply=reply, agent=agent, times=times, label=str(match))
        )
        return self

    def approve(
        self, tool_name: str, *, scope: str = "once", agent: str | None = None, times: int | None = None
    ) -> ScriptedHuman:
        """Approve calls of ``tool_name`` (``scope="run"`` approves it for the whole run)."""
        decision = Approve(scope="run" if scope == "run" else "once")
        return self._add_permission(tool_name, decision, agent=agent, times=times)

    def deny(
        self, tool_name: str, *, reason: str = "", agent: str | None = None, times: int | None = None
    ) -> ScriptedHuman:
        """Deny calls of ``tool_name`` with ``reason``."""
        return self._add_permission(tool_name, Deny(reason=reason), agent=agent, times=times)

    def _add_permission(
        self, tool_name: str, decision: Decision | bool, *, agent: str | None, times: int | None
    ) -> ScriptedHuman:
        if isinstance(decision, bool):
            decision = Approve() if decision else Deny()
        pattern = re.compile(re.escape(tool_name))
        self.rules.append(
            _Rule(kind="permission", pattern=pattern, reply=decision, agent=agent, times=times, label=tool_name)
        )
        return self

    def reply_for(self, request: RequestEvent) -> Any:
        """The answer the rules give ``request`` (records it). Usable in your own event loop.

        Raises:
            UnexpectedRequestError: No rule matches.
        """
        self.asked.append(request)
        for rule in self.rules:
            if rule.matches(request):
                rule.used += 1
                self.answered.append((request, rule.reply))
                return rule.reply
        what = (
            f"question {request.question!r}"
            if isinstance(request, ClarificationRequest)
            else f"permission for {request.tool_name!r}"
        )
        raise UnexpectedRequestError(
            f"ScriptedHuman has no rule for {what} from {'/'.join(request.agent_path)}"
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
