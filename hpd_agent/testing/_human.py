"""``ScriptedHuman``: a handler that answers requests from rules, for tests and demos."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..events import ClarificationRequest, PermissionRequest, RequestEvent, format_path
from ..handlers._base import BaseHandler
from ..permissions import Approve, Decision, Deny
from ..questions import Decline
from ._rules import Rule, UnexpectedRequestError

__all__ = ["ScriptedHuman", "UnexpectedRequestError"]


def _compile(match: str | re.Pattern[str], *, literal_full: bool = False) -> re.Pattern[str]:
    if isinstance(match, re.Pattern):
        return match
    # Substring rules are searched, full-name rules (arguments, custom names) fullmatched.
    return re.compile(re.escape(match), 0 if literal_full else re.IGNORECASE)


class ScriptedHuman(BaseHandler):
    """Answers questions and permission requests by rules, and records what it was asked.

    Questions match by a case-insensitive substring (or a compiled regex) of the question,
    optionally narrowed to a question kind and to an agent (its name, or its full path as
    people read it, ``"Root > Coder"``). Every kind has a shortcut: ``provide`` (input, by
    argument name), ``choose``, ``confirm``, ``complete_action`` (by URL) and
    ``answer_custom`` (by name). Rules are
    tried in the order they were added; one with ``times`` stops matching once used up, so
    ``answer("plan", "shorter", times=1).answer("plan", "approve")`` scripts a dialogue.
    Permission rules match the tool name. ``decline`` (questions) and ``decline_permission``
    script a human who refuses to answer (a reply of ``Decline()`` anywhere does the same):
    the request ends ``"declined"``. A request no rule matches fails the run with
    ``UnexpectedRequestError``, so a test notices a question it did not expect.

    Its answers are recorded as given on channel ``"api"`` (code answered), by ``by``.

    Args:
        answers: Shortcut: ``{question substring: answer}`` (an answer may be ``Decline()``).
        permissions: Shortcut: ``{tool name: Approve()/Deny()/Decline()/bool}``.
        by: Who its answers are recorded as given by (``answered_by``); None: nobody named.

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
        permissions: Mapping[str, Decision | Decline | bool] | None = None,
        by: str | None = None,
    ) -> None:
        self.answered_by = by
        """Who its answers are recorded as given by."""
        self.rules: list[Rule] = []
        """The rules, in the order they were added."""
        self.asked: list[RequestEvent] = []
        """Every request received, in order."""
        self.answered: list[tuple[RequestEvent, Any]] = []
        """Each request a rule matched, with the reply given."""
        for match, reply in (answers or {}).items():
            self.answer(match, reply)
        for tool_name, decision in (permissions or {}).items():
            self._add_permission(tool_name, decision, agent=None, times=None)

    def answer(
        self,
        match: str | re.Pattern[str],
        reply: Any,
        *,
        kind: str | None = None,
        agent: str | None = None,
        times: int | None = None,
    ) -> ScriptedHuman:
        """Answer questions matching ``match`` with ``reply`` (``times`` None: every time).

        Args:
            match: A case-insensitive substring of the question, or a compiled regex.
            reply: The answer, or a function of the request that returns it.
            kind: Only questions of this kind (``"text"``, ``"choice"``, ...); None: any.
            agent: Only questions from this agent: its name, or its path written
                ``"Root > Coder"`` (``hpd_agent.events.format_path``).
            times: Use the rule this many times at most; None: every time.
        """
        return self._add_question(match, reply, kind=kind, agent=agent, times=times)

    def _add_question(
        self,
        match: str | re.Pattern[str],
        reply: Any,
        *,
        kind: str | None,
        agent: str | None,
        times: int | None,
        target: str = "question",
        full: bool = False,
    ) -> ScriptedHuman:
        pattern = _compile(match, literal_full=full)
        self.rules.append(
            Rule(
                kind="question",
                pattern=pattern,
                reply=reply,
                agent=agent,
                times=times,
                question_kind=kind,
                target=target,
                full=full,
                label=str(match) if kind is None else f"{kind}:{match}",
            )
        )
        return self

    def provide(
        self,
        argument: str,
        value: Any,
        *,
        agent: str | None = None,
        times: int | None = None,
    ) -> ScriptedHuman:
        """Give ``value`` to ``"input"`` questions asking for the argument named ``argument``."""
        return self._add_question(
            argument, value, kind="input", agent=agent, times=times, target="argument", full=True
        )

    def choose(
        self,
        match: str | re.Pattern[str],
        choice: Any,
        *,
        agent: str | None = None,
        times: int | None = None,
    ) -> ScriptedHuman:
        """Answer ``"choice"`` questions matching ``match`` with an option, index, or list."""
        return self._add_question(match, choice, kind="choice", agent=agent, times=times)

    def confirm(
        self,
        match: str | re.Pattern[str],
        yes: Any = True,
        *,
        agent: str | None = None,
        times: int | None = None,
    ) -> ScriptedHuman:
        """Answer ``"confirm"`` questions matching ``match`` with yes (True) or no (False)."""
        return self._add_question(match, yes, kind="confirm", agent=agent, times=times)

    def complete_action(
        self,
        url: str | re.Pattern[str] = re.compile(r".*"),
        done: Any = True,
        *,
        agent: str | None = None,
        times: int | None = None,
    ) -> ScriptedHuman:
        """Answer ``"action"`` questions whose URL contains ``url``: done (True) or declined."""
        return self._add_question(url, done, kind="action", agent=agent, times=times, target="url")

    def answer_custom(
        self,
        name: str,
        value: Any,
        *,
        agent: str | None = None,
        times: int | None = None,
    ) -> ScriptedHuman:
        """Answer ``"custom"`` questions named ``name`` with the JSON ``value``."""
        return self._add_question(
            name, value, kind="custom", agent=agent, times=times, target="name", full=True
        )

    def approve(
        self,
        tool_name: str,
        *,
        scope: str = "once",
        agent: str | None = None,
        times: int | None = None,
        match: Mapping[str, str] | None = None,
        ttl: float | None = None,
    ) -> ScriptedHuman:
        """Approve calls of ``tool_name`` (``scope="run"`` approves it for the whole run,
        ``scope="always"`` gives a remembered grant, with ``match`` and ``ttl``)."""
        if scope == "always":
            decision = Approve(scope="always", match=match, ttl=ttl)
        else:
            decision = Approve(scope="run" if scope == "run" else "once")
        return self._add_permission(tool_name, decision, agent=agent, times=times)

    def decline(
        self,
        match: str | re.Pattern[str],
        *,
        kind: str | None = None,
        agent: str | None = None,
        times: int | None = None,
    ) -> ScriptedHuman:
        """Decline questions matching ``match`` (``Decline()``: the human will not answer).

        The asking tool gets ``QuestionNotAnswered(status="declined")``. Arguments as for
        ``answer``.
        """
        return self._add_question(match, Decline(), kind=kind, agent=agent, times=times)

    def decline_permission(
        self, tool_name: str, *, agent: str | None = None, times: int | None = None
    ) -> ScriptedHuman:
        """Decline to decide on calls of ``tool_name``: the tool does not run."""
        return self._add_permission(tool_name, Decline(), agent=agent, times=times)

    def deny(
        self,
        tool_name: str,
        *,
        reason: str = "",
        agent: str | None = None,
        times: int | None = None,
    ) -> ScriptedHuman:
        """Deny calls of ``tool_name`` with ``reason``."""
        return self._add_permission(tool_name, Deny(reason=reason), agent=agent, times=times)

    def _add_permission(
        self,
        tool_name: str,
        decision: Decision | Decline | bool,
        *,
        agent: str | None,
        times: int | None,
    ) -> ScriptedHuman:
        if isinstance(decision, bool):
            decision = Approve() if decision else Deny()
        pattern = re.compile(re.escape(tool_name))
        self.rules.append(
            Rule(
                kind="permission",
                pattern=pattern,
                reply=decision,
                agent=agent,
                times=times,
                label=tool_name,
            )
        )
        return self

    # -- answering -------------------------------------------------------------------------
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
