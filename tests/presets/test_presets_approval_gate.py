"""``approval_gate``: approve, ``edit: ...`` or reject a produced value, by a scripted human."""

from __future__ import annotations

from typing import Any

import pytest

from hpd_agent import Agent, ClarificationRequest, ToolContext, UserError, tool
from hpd_agent.presets import GateResult, approval_gate
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

DRAFT = "Dear team, the launch moves to May."


async def _gate(
    human: ScriptedHuman | None, **options: Any
) -> tuple[GateResult[Any], ScriptedHuman | None]:
    box: dict[str, Any] = {}

    @tool
    async def send_memo(ctx: ToolContext) -> str:
        """Send the memo."""
        box["result"] = await approval_gate(DRAFT, **options)
        return box["result"].status

    agent = Agent(
        "Writer", model=ScriptedModel([tool_call("send_memo"), text("done")]), tools=[send_memo]
    )
    await agent.run("memo", handler=human)
    return box["result"], human


@pytest.mark.parametrize("reply", ["approve", "  YES ", "ok"])
async def test_approve_lets_the_value_through(reply: str) -> None:
    result, human = await _gate(ScriptedHuman().answer("review", reply))
    assert (result.status, result.value, result.approved) == ("approved", DRAFT, True)
    assert human is not None
    (question,) = human.asked
    assert isinstance(question, ClarificationRequest)
    assert DRAFT in question.question
    assert "edit:" in (question.context or "")


async def test_reject_calls_on_reject_with_the_value() -> None:
    rejected: list[str] = []

    async def on_reject(value: str) -> None:
        rejected.append(value)

    result, _ = await _gate(ScriptedHuman().answer("review", "Reject"), on_reject=on_reject)
    assert (result.status, result.approved) == ("rejected", False)
    assert rejected == [DRAFT]


async def test_edit_replaces_the_value_without_on_edit() -> None:
    result, _ = await _gate(ScriptedHuman().answer("review", "EDIT:  Dear all, launch in June.  "))
    assert (result.status, result.value, result.approved) == (
        "edited",
        "Dear all, launch in June.",
        True,
    )
    assert result.edits == ("Dear all, launch in June.",)


async def test_edit_with_on_edit_revises_and_asks_again() -> None:
    def revise(value: str, instruction: str) -> str:
        return f"{value} ({instruction})"

    human = (
        ScriptedHuman()
        .answer("review", "edit: mention the budget", times=1)
        .answer("review", "approve", times=1)
    )
    result, _ = await _gate(human, on_edit=revise)
    assert result.status == "approved"
    assert result.value == f"{DRAFT} (mention the budget)"
    assert result.edits == ("mention the budget",)
    second = human.asked[1]
    assert isinstance(second, ClarificationRequest)
    assert "(mention the budget)" in second.question  # the human sees the revision


async def test_unrecognised_replies_are_asked_again_then_the_gate_gives_up() -> None:
    human = (
        ScriptedHuman()
        .answer("review", "Approve.", times=1)  # not the bare keyword
        .answer("review", "edit:", times=1)  # an edit with no text
        .answer("review", "approve", times=1)
    )
    result, _ = await _gate(human)
    assert result.status == "approved"
    assert result.replies == ("Approve.", "edit:", "approve")
    second = human.asked[1]
    assert isinstance(second, ClarificationRequest)
    assert second.question.startswith("I did not understand 'Approve.'")

    stubborn = ScriptedHuman().answer("review", "hmm")
    result, _ = await _gate(stubborn, max_asks=2)
    assert (result.status, result.approved) == ("unanswered", False)
    assert len(stubborn.asked) == 2


async def test_configurable_keywords() -> None:
    result, _ = await _gate(
        ScriptedHuman().answer("review", "Ship it"),
        approve_words={"ship it"},
        reject_words={"nope"},
    )
    assert result.status == "approved"
    result, _ = await _gate(
        ScriptedHuman().answer("review", "change: shorter"), edit_prefix="Change:"
    )
    assert (result.status, result.value) == ("edited", "shorter")


async def test_nobody_there_means_not_approved_and_on_reject_not_called() -> None:
    rejected: list[str] = []
    result, _ = await _gate(None, on_reject=rejected.append)
    assert (result.status, result.approved) == ("unanswered", False)
    assert rejected == []


async def test_misuse_is_refused() -> None:
    with pytest.raises(UserError, match="inside a tool"):
        await approval_gate("x")
    result_box: dict[str, Any] = {}

    @tool
    async def check(ctx: ToolContext) -> str:
        """Check."""
        for bad, match in (
            ({"approve_words": {"ok"}, "reject_words": {"OK"}}, "both approve and reject"),
            ({"edit_prefix": "  "}, "edit_prefix"),
            ({"max_asks": 0}, "max_asks"),
        ):
            with pytest.raises(UserError, match=match):
                await approval_gate("x", **bad)
        result_box["ok"] = True
        return "checked"

    agent = Agent("A", model=ScriptedModel([tool_call("check"), text("done")]), tools=[check])
    await agent.run("go")
    assert result_box == {"ok": True}
