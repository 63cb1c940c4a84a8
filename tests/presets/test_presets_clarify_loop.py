"""``clarify_loop``: generate, evaluate, ask, regenerate; rounds survive interrupt and resume."""

from __future__ import annotations

from typing import Any

import pytest

from hpd_agent import Agent, ClarificationRequest, ToolContext, UserError, tool
from hpd_agent.presets import (
    ClarifyInterrupted,
    ClarifyResult,
    ClarifyState,
    clarify_loop,
    low_confidence,
)
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


class Totals:
    """A generator whose confidence rises once the human names the fiscal year."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []

    async def __call__(self, state: ClarifyState) -> dict[str, Any]:
        self.seen.append(state.clarification)
        clear = any("2025" in c for c in state.clarifications)
        return {"output": f"totals (round {state.rounds})", "confidence": 0.95 if clear else 0.4}


def _agent_running(body: Any) -> tuple[Agent, dict[str, Any]]:
    """An agent whose one tool runs ``body(ctx)`` and keeps what it returns."""
    box: dict[str, Any] = {}

    @tool
    async def report(ctx: ToolContext) -> str:
        """Produce the report."""
        box["result"] = await body(ctx)
        return "ok"

    model = ScriptedModel([tool_call("report"), text("done")])
    return Agent("Analyst", model=model, tools=[report]), box


def _questions(human: ScriptedHuman) -> list[ClarificationRequest]:
    return [r for r in human.asked if isinstance(r, ClarificationRequest)]


async def test_the_whole_loop_with_a_scripted_human() -> None:
    generate = Totals()

    async def body(ctx: ToolContext) -> ClarifyResult[Any]:
        return await clarify_loop(generate, max_rounds=3)

    agent, box = _agent_running(body)
    human = (
        ScriptedHuman()
        .answer("Please clarify", "I meant totals", times=1)
        .answer("Please clarify", "the 2025 fiscal year", times=1)
    )
    await agent.run("report", handler=human)
    result = box["result"]
    assert result.satisfied
    assert result.rounds == 2
    assert result.clarifications == ("I meant totals", "the 2025 fiscal year")
    assert result.output == {"output": "totals (round 2)", "confidence": 0.95}
    assert generate.seen == [None, "I meant totals", "the 2025 fiscal year"]
    questions = _questions(human)
    assert "totals (round 0)" in questions[0].question  # the default prompt shows the output
    assert [q.context for q in questions] == [
        "Clarification 1 of at most 3.",
        "Clarification 2 of at most 3.",
    ]


async def test_rounds_run_out_and_the_last_output_is_returned_unsatisfied() -> None:
    calls: list[int] = []

    def generate(state: ClarifyState) -> str:
        calls.append(state.rounds)
        return f"draft {len(calls)}"

    async def body(ctx: ToolContext) -> ClarifyResult[Any]:
        return await clarify_loop(
            generate,
            evaluate=lambda out, st: True,
            prompt=lambda out, st: f"What is missing from {out}?",
            max_rounds=2,
        )

    agent, box = _agent_running(body)
    human = ScriptedHuman().answer("missing", "more detail")
    await agent.run("report", handler=human)
    result = box["result"]
    assert (result.satisfied, result.rounds, result.output) == (False, 2, "draft 3")
    assert calls == [0, 1, 2]
    assert [q.question for q in _questions(human)] == [
        "What is missing from draft 1?",
        "What is missing from draft 2?",
    ]


def test_default_evaluation_is_low_confidence_or_unclear() -> None:
    st = ClarifyState()
    assert low_confidence({"confidence": 0.5}, st)
    assert not low_confidence({"confidence": 0.9}, st)

    class Out:
        confidence = 0.69

    assert low_confidence(Out(), st)
    assert low_confidence("The scope is UNCLEAR", st)
    assert not low_confidence("All clear", st)
    assert not low_confidence({"confidence": True, "text": "fine"}, st)


async def test_an_interrupted_loop_resumes_at_the_round_it_reached() -> None:
    saved: dict[str, str] = {}
    generate = Totals()

    async def first(ctx: ToolContext) -> Any:
        try:
            return await clarify_loop(generate, max_rounds=3)
        except ClarifyInterrupted as e:
            saved["state"] = e.state.to_json()
            return e

    agent, box = _agent_running(first)
    async with agent.stream("report") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                if event.context == "Clarification 1 of at most 3.":
                    await run.respond(event.request_id, "I meant totals")
                else:
                    run.cancel_request(event.request_id)  # nobody answers round 2 now
    interrupted = box["result"]
    assert isinstance(interrupted, ClarifyInterrupted) and interrupted.status == "cancelled"
    state = ClarifyState.from_json(saved["state"])
    assert state.rounds == 2
    assert state.clarifications == ["I meant totals"]
    assert state.pending_question is not None

    # Later (another process, say): resume from the saved state.
    async def resumed(ctx: ToolContext) -> Any:
        return await clarify_loop(
            generate, max_rounds=3, state=ClarifyState.from_json(saved["state"])
        )

    agent2, box2 = _agent_running(resumed)
    human = ScriptedHuman().answer("Please clarify", "fiscal 2025")
    await agent2.run("report", handler=human)
    result = box2["result"]
    assert result.satisfied and result.rounds == 2
    assert result.clarifications == ("I meant totals", "fiscal 2025")
    (again,) = _questions(human)
    assert again.question == state.pending_question  # the same question, asked again
    assert again.context == "Clarification 2 of at most 3."
    # Generated twice before the interrupt, once after: no round was repeated.
    assert generate.seen == [None, "I meant totals", "fiscal 2025"]


async def test_resume_with_the_answer_given_elsewhere_and_rounds_still_capped() -> None:
    state = ClarifyState(rounds=2, clarifications=["a"], pending_question="Which year?")
    state.answer("still vague")  # e.g. the user replied by mail
    generate = Totals()

    async def body(ctx: ToolContext) -> Any:
        return await clarify_loop(generate, max_rounds=3, state=state)

    agent, box = _agent_running(body)
    human = ScriptedHuman().answer("Please clarify", "no idea")
    await agent.run("report", handler=human)
    result = box["result"]
    # One round was left: asked once, then the loop stops unsatisfied.
    assert (result.rounds, result.satisfied) == (3, False)
    assert len(_questions(human)) == 1
    assert _questions(human)[0].context == "Clarification 3 of at most 3."
    assert generate.seen == ["still vague", "no idea"]


async def test_state_saved_by_on_state_survives_a_cancelled_run() -> None:
    snapshots: list[str] = []
    generate = Totals()

    async def body(ctx: ToolContext) -> Any:
        return await clarify_loop(
            generate, max_rounds=3, on_state=lambda s: snapshots.append(s.to_json())
        )

    agent, _ = _agent_running(body)
    async with agent.stream("report") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                if event.context == "Clarification 1 of at most 3.":
                    await run.respond(event.request_id, "totals please")
                else:
                    run.cancel()  # the process goes away while round 2 waits
    assert run.result.status == "cancelled"
    state = ClarifyState.from_json(snapshots[-1])
    assert (state.rounds, state.clarifications) == (2, ["totals please"])
    assert state.pending_question is not None

    async def resumed(ctx: ToolContext) -> Any:
        return await clarify_loop(generate, max_rounds=3, state=state)

    agent2, box2 = _agent_running(resumed)
    await agent2.run("report", handler=ScriptedHuman().answer("Please clarify", "FY2025"))
    assert box2["result"].satisfied and box2["result"].rounds == 2


async def test_unanswered_with_return_gives_back_the_unsatisfied_output() -> None:
    async def body(ctx: ToolContext) -> Any:
        return await clarify_loop(lambda s: "unclear draft", if_unanswered="return")

    agent, box = _agent_running(body)
    await agent.run("report")  # nobody is listening
    result = box["result"]
    assert (result.output, result.satisfied, result.rounds) == ("unclear draft", False, 1)


async def test_unanswered_by_default_interrupts_and_the_model_is_told() -> None:
    async def body(ctx: ToolContext) -> Any:
        return await clarify_loop(lambda s: "unclear draft")

    agent, _ = _agent_running(body)
    result = await agent.run("report")
    assert "No user is available" in str(result.messages[-2].content)  # type: ignore[union-attr]


async def test_misuse_is_refused_clearly() -> None:
    with pytest.raises(UserError, match="inside a tool"):
        await clarify_loop(lambda s: "x")
    with pytest.raises(UserError, match="not a saved clarify state"):
        ClarifyState.from_json('{"rounds": -1, "clarifications": []}')
    with pytest.raises(UserError, match="not a saved clarify state"):
        ClarifyState.from_json("garbage")
    with pytest.raises(UserError, match="no clarification question is pending"):
        ClarifyState().answer("x")

    async def body(ctx: ToolContext) -> Any:
        with pytest.raises(UserError, match="max_rounds"):
            await clarify_loop(lambda s: "x", max_rounds=-1)
        return "checked"

    agent, box = _agent_running(body)
    await agent.run("report")
    assert box["result"] == "checked"
