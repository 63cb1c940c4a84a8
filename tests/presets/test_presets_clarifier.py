"""``Clarifier``: its JSON parsing, its whole dialogue in front of a run, plan approval."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hpd_agent import (
    Agent,
    AgentFinished,
    AgentStarted,
    ClarificationRequest,
    RunFinished,
    ToolContext,
    UserError,
    tool,
)
from hpd_agent.messages import SystemMessage, UserMessage
from hpd_agent.presets import Clarifier, ClarifierResult, Plan, parse_clarification, parse_plan
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


def ask(question: str) -> Any:
    return text(json.dumps({"needs_clarification": True, "clarification_question": question}))


ENOUGH = text('{"needs_clarification": false, "clarification_question": ""}')


def plan(title: str, *sections: str) -> Any:
    return text(json.dumps({"title": title, "sections": list(sections)}))


# -- parsing -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "question"),
    [
        ('{"needs_clarification": true, "clarification_question": "Which years?"}', "Which years?"),
        (
            'Sure! Here is my answer: {"needs_clarification": true, "clarification_question": '
            '"Which years?"} Hope that helps.',
            "Which years?",
        ),
        (
            '```json\n{"needs_clarification": true,\n "clarification_question": " Which years? "}\n```',
            "Which years?",
        ),
        (
            'Thinking {about it}...\n```\n{"needs_clarification": "true", '
            '"clarification_question": "Which years?"}\n```',
            "Which years?",
        ),
        ('{"note": {"x": 1}, "needs_clarification": true, "clarification_question": "Q?"}', "Q?"),
    ],
)
def test_clarification_json_is_found_in_prose_and_fences(reply: str, question: str) -> None:
    decision = parse_clarification(reply)
    assert decision.needs_clarification
    assert decision.question == question


@pytest.mark.parametrize(
    "reply",
    [
        None,
        "",
        "I think the request is clear.",
        "{not json at all",
        '{"needs_clarification": true}',  # a flag with no question: nothing to ask
        '{"needs_clarification": true, "clarification_question": "   "}',
        '{"needs_clarification": "maybe", "clarification_question": "Q?"}',
        '{"needs_clarification": false, "clarification_question": "Q?"}',
        '["needs_clarification", true]',
        '```json\n{"needs_clarification": tru\n```',
        # nested deeper than the JSON parser goes (it raised RecursionError): not an answer
        '{"needs_clarification": ' * 100_000 + "true" + "}" * 100_000,
    ],
    ids=lambda r: r if r is None or len(r) < 40 else f"{r[:30]}...({len(r):,} chars)",
)
def test_unreadable_or_negative_replies_mean_no_clarification(reply: str | None) -> None:
    decision = parse_clarification(reply)
    assert not decision.needs_clarification
    assert decision.question is None


def test_plan_parsing_takes_json_fences_dicts_and_markdown() -> None:
    assert parse_plan(
        'Plan:\n```json\n{"title": "T", "sections": ["a", " b "]}\n```', fallback_title="F"
    ) == Plan(title="T", sections=("a", "b"))
    assert parse_plan(
        '{"title": "T", "sections": [{"title": "a"}, {"name": "b"}, 3]}', fallback_title="F"
    ) == Plan(title="T", sections=("a", "b"))
    markdown = "# Title: Energy in Japan\n\n- GDP impact\n* Jobs\n2. Policy\n"
    assert parse_plan(markdown, fallback_title="F") == Plan(
        title="Energy in Japan", sections=("GDP impact", "Jobs", "Policy")
    )
    assert parse_plan("", fallback_title="Fallback") == Plan(title="Fallback")
    assert parse_plan('{"title": 5, "sections": "oops"}', fallback_title="F") == Plan(title="F")


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(UserError, match="both approve and reject"):
        Clarifier(ScriptedModel([]), approve_words={"ok", "no"})
    with pytest.raises(UserError, match="not one string"):
        Clarifier(ScriptedModel([]), skip_words="skip")
    with pytest.raises(UserError, match="0 or more"):
        Clarifier(ScriptedModel([]), max_turns=-1)


# -- the whole dialogue in front of a run ------------------------------------------------------
def _researcher(clarifier: Clarifier, *steps: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(steps) or [text("the report")])
    return Agent(
        "Researcher", model=model, instructions="You research.", clarifier=clarifier
    ), model


async def test_questions_feedback_and_approval_reach_the_main_agents_instructions() -> None:
    asker = ScriptedModel(
        [
            ask("Which countries?"),
            text(
                "```json\n"
                + '{"needs_clarification": true, "clarification_question": "GDP or jobs?"}\n```'
            ),
            ENOUGH,
        ]
    )
    planner = ScriptedModel(
        [
            plan("Renewables in Germany and Japan", "GDP impact", "Jobs"),
            plan("Renewables in Germany and Japan", "GDP impact", "Jobs", "Policy"),
            plan("Renewables in Germany and Japan", "GDP impact", "Jobs", "Policy frameworks"),
        ]
    )
    clarifier = Clarifier(asker, planner_model=planner, plan=True)
    agent, main = _researcher(clarifier)
    human = (
        ScriptedHuman()
        .answer("Which countries", "Germany and Japan")
        .answer("GDP or jobs", "Both")
        .answer("proposed plan", "Add a section on policy", times=1)
        .answer("proposed plan", "Approve.", times=1)  # not the bare keyword: feedback
        .answer("proposed plan", "  APPROVE ", times=1)
    )
    result = await agent.run("Economic impact of renewables in the G7", handler=human)

    assert result.status == "completed"
    assert result.output == "the report"
    human.assert_all_asked()
    asker.assert_complete()
    planner.assert_complete()
    clarified = result.clarifier
    assert isinstance(clarified, ClarifierResult)
    assert [(t.question, t.answer) for t in clarified.dialogue] == [
        ("Which countries?", "Germany and Japan"),
        ("GDP or jobs?", "Both"),
    ]
    assert clarified.feedback_history == ("Add a section on policy", "Approve.")
    assert clarified.approved and not clarified.auto_approved and not clarified.rejected
    assert clarified.plan == Plan(
        title="Renewables in Germany and Japan",
        sections=("GDP impact", "Jobs", "Policy frameworks"),
    )
    # Every question came from the clarifier's own frame under the agent.
    assert {r.agent_path for r in human.asked} == {("Researcher", "Clarifier")}
    # The planner saw the whole feedback history on the last regeneration.
    last_draft_request = str(planner.requests[2][-1].content)  # type: ignore[union-attr]
    assert "1. Add a section on policy" in last_draft_request
    assert "2. Approve." in last_draft_request
    assert "Q: Which countries?\nA: Germany and Japan" in last_draft_request
    # The main agent's instructions hold the clarifications and the approved plan.
    system = main.requests[0][0]
    assert isinstance(system, SystemMessage)
    assert system.content.startswith("You research.")
    assert "A: Germany and Japan" in system.content
    assert "## Approved plan" in system.content
    assert "3. Policy frameworks" in system.content
    assert main.requests[0][-1] == UserMessage(content="Economic impact of renewables in the G7")


async def test_a_rejected_plan_ends_the_run_without_running_the_agent() -> None:
    clarifier = Clarifier(
        ScriptedModel([ENOUGH]), planner_model=ScriptedModel([plan("P", "a")]), plan=True
    )
    agent, main = _researcher(clarifier)
    events: list[Any] = []

    class Rejecting(ScriptedHuman):
        async def on_event(self, event: Any) -> None:
            events.append(event)

    human = Rejecting().answer("proposed plan", " Reject ")
    result = await agent.run("Research it", handler=human)
    assert result.status == "rejected"
    assert result.output is None
    assert result.clarifier is not None and result.clarifier.rejected
    assert main.requests == []  # the expensive agent never ran
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.status == "rejected"
    clarifier_done = [e for e in events if isinstance(e, AgentFinished)]
    assert [(e.agent_path, e.status) for e in clarifier_done] == [
        (("Researcher", "Clarifier"), "rejected")
    ]


@pytest.mark.parametrize("reply", ["skip", " DONE ", "", "Skip"])
async def test_the_user_can_skip_the_remaining_questions(reply: str) -> None:
    asker = ScriptedModel([ask("Which years?"), ask("never asked")])
    clarifier = Clarifier(asker, max_turns=3)
    agent, main = _researcher(clarifier)
    human = ScriptedHuman().answer("Which years", reply)
    result = await agent.run("Research it", handler=human)
    assert result.status == "completed"
    assert result.clarifier is not None
    assert result.clarifier.skipped
    assert result.clarifier.dialogue == ()
    assert len(asker.requests) == 1 and len(human.asked) == 1
    system = main.requests[0][0]
    assert isinstance(system, SystemMessage) and system.content == "You research."


async def test_no_more_than_max_turns_questions_are_asked() -> None:
    asker = ScriptedModel([ask("Q1?"), ask("Q2?"), ask("Q3?")])
    clarifier = Clarifier(asker, max_turns=2)
    agent, _ = _researcher(clarifier)
    human = ScriptedHuman().answer("Q", "an answer")
    result = await agent.run("Research it", handler=human)
    assert [r.question for r in human.asked if isinstance(r, ClarificationRequest)] == [
        "Q1?",
        "Q2?",
    ]
    assert len(asker.requests) == 2  # after the last allowed answer, no more model calls
    assert result.clarifier is not None and len(result.clarifier.dialogue) == 2
    # The model was told how many questions it has left.
    assert "1 more question" in str(asker.requests[1][-1].content)  # type: ignore[union-attr]


async def test_feedback_past_max_plan_iterations_auto_approves() -> None:
    planner = ScriptedModel([plan("v1"), plan("v2"), plan("v3")])
    clarifier = Clarifier(
        ScriptedModel([ENOUGH]), planner_model=planner, plan=True, max_plan_iterations=2
    )
    agent, main = _researcher(clarifier)
    human = ScriptedHuman().answer("proposed plan", lambda r: f"change {len(r.question)}")
    result = await agent.run("Research it", handler=human)
    clarified = result.clarifier
    assert clarified is not None
    assert clarified.approved and clarified.auto_approved
    assert len(clarified.feedback_history) == 3
    assert clarified.feedback_applied == 2
    assert clarified.plan == Plan(title="v3")  # the last plan the user saw
    planner.assert_complete()  # two regenerations, no third
    system = main.requests[0][0]
    assert isinstance(system, SystemMessage)
    assert "# v3" in system.content
    assert f"- {clarified.feedback_history[2]}" in system.content  # passed on, not lost


async def test_keyword_sets_are_configurable_and_match_the_whole_reply() -> None:
    planner = ScriptedModel([plan("v1"), plan("v2")])
    clarifier = Clarifier(
        ScriptedModel([ENOUGH]),
        planner_model=planner,
        plan=True,
        approve_words={"Ship it"},
        reject_words={"scrap"},
    )
    agent, _ = _researcher(clarifier)
    human = (
        ScriptedHuman()
        .answer("proposed plan", "approve", times=1)  # not an approve word any more
        .answer("proposed plan", "  SHIP IT\n", times=1)
    )
    result = await agent.run("Research it", handler=human)
    assert result.clarifier is not None
    assert result.clarifier.approved and not result.clarifier.auto_approved
    assert result.clarifier.feedback_history == ("approve",)
    assert result.clarifier.plan == Plan(title="v2")


async def test_garbage_from_the_models_means_no_questions_and_a_fallback_plan() -> None:
    clarifier = Clarifier(
        ScriptedModel([text("I'd love to help! {broken")]),
        planner_model=ScriptedModel([text("")]),
        plan=True,
    )
    agent, _ = _researcher(clarifier)
    human = ScriptedHuman().answer("proposed plan", "ok")
    result = await agent.run("Survey battery recycling", handler=human)
    assert result.status == "completed"
    assert result.clarifier is not None
    assert result.clarifier.dialogue == ()
    assert result.clarifier.plan == Plan(title="Survey battery recycling")
    assert len(human.asked) == 1


async def test_the_dialogue_works_on_a_stream_consumer() -> None:
    clarifier = Clarifier(ScriptedModel([ask("Which city?"), ENOUGH]), max_turns=2)
    agent, main = _researcher(clarifier)
    seen: list[str] = []
    async with agent.stream("Find a flat") as run:
        async for event in run:
            if isinstance(event, AgentStarted):
                seen.append("/".join(event.agent_path))
            if isinstance(event, ClarificationRequest):
                assert event.agent_path == ("Researcher", "Clarifier") and event.depth == 1
                await run.respond(event.request_id, "Lisbon")
    assert run.result.status == "completed"
    assert seen == ["Researcher/Clarifier", "Researcher"]
    system = main.requests[0][0]
    assert isinstance(system, SystemMessage) and "A: Lisbon" in system.content


@pytest.mark.parametrize(("policy", "status"), [("approve", "completed"), ("reject", "rejected")])
async def test_with_nobody_listening_the_policy_decides_the_plan(policy: Any, status: str) -> None:
    clarifier = Clarifier(
        ScriptedModel([ask("Which city?")]),
        planner_model=ScriptedModel([plan("P")]),
        plan=True,
        if_unanswered=policy,
    )
    agent, main = _researcher(clarifier)
    result = await agent.run("Find a flat")  # no handler: every question is unavailable
    assert result.status == status
    assert result.clarifier is not None
    assert [(t.question, t.answer) for t in result.clarifier.dialogue] == [("Which city?", None)]
    assert result.clarifier.auto_approved == (policy == "approve")
    assert len(main.requests) == (1 if policy == "approve" else 0)


async def test_a_nested_agent_with_a_clarifier_asks_from_its_depth() -> None:
    clarifier = Clarifier(
        ScriptedModel([ENOUGH]), planner_model=ScriptedModel([plan("P")]), plan=True
    )
    researcher, main = _researcher(clarifier)
    boss_model = ScriptedModel([tool_call("Researcher", query="dig"), text("summary")])
    boss = Agent("Boss", model=boss_model, tools=[researcher.as_tool()])
    human = ScriptedHuman().answer("proposed plan", "no", agent="Boss > Researcher > Clarifier")
    result = await boss.run("go", handler=human)
    assert result.status == "completed"
    assert main.requests == []
    tool_result = boss_model.requests[1][-1]
    assert "rejected the proposed plan" in str(tool_result.content)  # type: ignore[union-attr]


async def test_clarifier_run_from_a_tool_and_outside_any_run() -> None:
    clarifier = Clarifier(ScriptedModel([ask("Which city?"), ENOUGH]))

    @tool
    async def scope(ctx: ToolContext, task: str) -> str:
        """Scope a task.

        Args:
            task: The task.
        """
        found = await clarifier.run(task)
        return found.log

    agent = Agent(
        "Main",
        model=ScriptedModel([tool_call("scope", task="Find a flat"), text("ok")]),
        tools=[scope],
    )
    human = ScriptedHuman().answer("Which city", "Porto")
    result = await agent.run("go", handler=human)
    assert result.messages[-2].content == "Request: Find a flat\nQ: Which city?\nA: Porto"  # type: ignore[union-attr]
    assert human.asked[0].agent_path == ("Main",)
    with pytest.raises(UserError, match="inside a tool"):
        await Clarifier(ScriptedModel([])).run("no run here")


async def test_a_durable_run_replays_the_clarifiers_model_calls_on_resume(tmp_path: Any) -> None:
    from hpd_agent import ask_user
    from hpd_agent.store import SQLiteStore

    # Interrupted twice (the clarifier's question, then the main agent's): across both
    # resumes, each model is called exactly as often as its script says.
    asker = ScriptedModel([ask("Which years?"), ENOUGH])
    clarifier = Clarifier(asker, max_turns=2)
    main = ScriptedModel(
        [tool_call("ask_user", question="Which format?"), text("the report, as a table")]
    )
    agent = Agent(
        "Researcher",
        model=main,
        instructions="You research.",
        clarifier=clarifier,
        tools=[ask_user()],
    )
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        first = await agent.run("Research it", store=store, on_unhandled="interrupt")
        assert first.status == "interrupted"
        (years,) = first.pending
        assert isinstance(years, ClarificationRequest) and years.question == "Which years?"
        second = await agent.resume(
            first.run_id,
            store=store,
            answers={years.request_id: "2020-2024"},
            on_unhandled="interrupt",
        )
        assert second.status == "interrupted"
        (fmt,) = second.pending
        assert isinstance(fmt, ClarificationRequest) and fmt.question == "Which format?"
        done = await agent.resume(first.run_id, store=store, answers={fmt.request_id: "table"})
    finally:
        await store.aclose()
    assert done.output == "the report, as a table"
    asker.assert_complete()
    main.assert_complete()
    system = main.requests[-1][0]
    assert isinstance(system, SystemMessage) and "2020-2024" in system.content
