"""``ScriptedHuman`` rules for every question kind."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from hpd_agent import (
    Agent,
    ClarificationRequest,
    ClarificationResolved,
    Decline,
    Event,
    PermissionRequest,
    QuestionNotAnswered,
    RequestEvent,
    ToolCallFinished,
    ToolContext,
    tool,
)
from hpd_agent.testing import ScriptedHuman, ScriptedModel, UnexpectedRequestError, text, tool_call


def _q(kind: str, question: str = "?", **fields: Any) -> ClarificationRequest:
    return ClarificationRequest(
        run_id="r",
        agent_path=("A", "B"),
        depth=1,
        request_id="q",
        question=question,
        question_kind=kind,
        **fields,
    )


def test_each_shortcut_matches_its_kind_and_field() -> None:
    human = (
        ScriptedHuman()
        .provide("email", "a@b.c")
        .choose("Pick", 2)
        .confirm("Sure", False)
        .complete_action("auth.example.com")
        .answer_custom("date_range", {"start": 1})
        .answer("name", "Ana", kind="text")
    )
    assert human.reply_for(_q("input", data={"argument": "email", "tool": "t"})) == "a@b.c"
    assert human.reply_for(_q("choice", "Pick one", options=("a", "b", "c"))) == 2
    assert human.reply_for(_q("confirm", "Sure?")) is False
    assert human.reply_for(_q("action", data={"url": "https://auth.example.com/o", "label": "x"}))
    assert human.reply_for(_q("custom", data={"name": "date_range", "payload": {}})) == {"start": 1}
    assert human.reply_for(_q("text", "Your name?")) == "Ana"
    human.assert_all_asked()


def test_a_rule_for_one_kind_does_not_answer_another() -> None:
    human = ScriptedHuman().confirm("Delete", True).provide("email", "x")
    with pytest.raises(UnexpectedRequestError, match=r"text question 'Delete it\?'"):
        human.reply_for(_q("text", "Delete it?"))
    # Argument and custom names match whole, not as substrings.
    with pytest.raises(UnexpectedRequestError):
        human.reply_for(_q("input", data={"argument": "email_cc", "tool": "t"}))


def test_replies_can_be_computed_and_rules_used_up_in_order() -> None:
    human = (
        ScriptedHuman()
        .answer(re.compile(r"plan"), "shorter", times=1)
        .answer("plan", lambda r: f"ok ({r.request_id})")
    )
    assert human.reply_for(_q("text", "The plan?")) == "shorter"
    assert human.reply_for(_q("text", "The plan?")) == "ok (q)"
    assert [a for _, a in human.answered] == ["shorter", "ok (q)"]


def test_decline_rules_reply_decline_and_the_run_goes_on() -> None:
    human = ScriptedHuman(permissions={"rm": Decline()}).decline("secret", kind="text")
    human.decline_permission("deploy", times=1)
    assert human.reply_for(_q("text", "Your secret?")) == Decline()
    with pytest.raises(UnexpectedRequestError):
        human.reply_for(_q("confirm", "Your secret?"))  # the rule is for text questions
    permission = PermissionRequest(
        run_id="r", agent_path=("A",), depth=0, request_id="p", tool_name="deploy",
        arguments={}, tool_call_id="c",
    )  # fmt: skip
    assert human.reply_for(permission) == Decline()
    assert human.reply_for(dataclasses.replace(permission, tool_name="rm")) == Decline()
    human.assert_all_asked()


async def test_a_scripted_decline_ends_the_request_declined() -> None:
    @tool
    async def probe(ctx: ToolContext) -> str:
        """Ask twice."""
        try:
            await ctx.confirm("Share your secret?")
        except QuestionNotAnswered as e:
            return f"{e.status}; then {await ctx.ask('Your name?')}"
        return "answered"

    model = ScriptedModel([tool_call("probe"), text("done")])
    human = ScriptedHuman({"name": "Ana"}).decline("secret")
    agent = Agent("A", model=model, tools=[probe])
    seen: list[Event] = []
    result = await agent.run("go", handler=_Recording(human, seen))
    assert result.status == "completed"
    statuses = [e.status for e in seen if isinstance(e, ClarificationResolved)]
    assert statuses == ["declined", "answered"]
    (finished,) = [e for e in seen if isinstance(e, ToolCallFinished)]
    assert finished.result == "declined; then Ana"
    assert [reply for _, reply in human.answered] == [Decline(), "Ana"]


class _Recording:
    """A handler answering by ``human`` and keeping every event it sees."""

    def __init__(self, human: ScriptedHuman, seen: list[Event]) -> None:
        self.human = human
        self.seen = seen

    async def on_event(self, event: Event) -> None:
        self.seen.append(event)

    async def on_request(self, request: RequestEvent) -> Any:
        return await self.human.on_request(request)
