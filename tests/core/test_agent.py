"""Agents as tools, nesting to any depth, and the seed scenario end to end."""

from __future__ import annotations

import anyio
import pytest

from hpd_agent import (
    Agent,
    AgentFinished,
    AgentStarted,
    ClarificationRequest,
    ClarificationResolved,
    Event,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolContext,
    UserError,
    ask_user,
    tool,
)
from hpd_agent.messages import ToolResultMessage, UserMessage
from hpd_agent.testing import FunctionModel, ScriptedHuman, ScriptedModel, text, tool_call

QUESTION = "Which framework: Express, FastAPI or Django?"


def seed_agents() -> tuple[Agent, ScriptedModel, ScriptedModel]:
    coder_model = ScriptedModel(
        [text(QUESTION), text("Built the auth system with Express: routes, JWT, tests.")],
        name="coder",
    )
    orchestrator_model = ScriptedModel(
        [
            tool_call("CodingAgent", query="Build an auth system"),
            tool_call("ask_user", question=QUESTION, options=["Express", "FastAPI", "Django"]),
            tool_call("CodingAgent", query="Build the auth system with Express"),
            text("Done: the auth system is built with Express."),
        ],
        name="orchestrator",
    )
    coder = Agent("CodingAgent", model=coder_model, tools=[ask_user()])
    orchestrator = Agent(
        "Orchestrator",
        model=orchestrator_model,
        instructions="You coordinate tasks.",
        tools=[coder.as_tool(), ask_user()],
    )
    return orchestrator, orchestrator_model, coder_model


async def test_seed_scenario_in_one_root_run() -> None:
    orchestrator, orchestrator_model, coder_model = seed_agents()
    events: list[Event] = []
    async with orchestrator.stream("Build an auth system") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ClarificationRequest):
                assert event.agent_path == ("Orchestrator",)
                assert event.question == QUESTION
                await run.respond(event.request_id, "Express")

    assert run.result.status == "completed"
    assert run.result.output == "Done: the auth system is built with Express."
    # Each model called exactly as often as its script says: nothing was re-run.
    orchestrator_model.assert_complete()
    coder_model.assert_complete()
    # One root run: a single RunStarted/RunFinished pair, every event under the same run id.
    assert [e.kind for e in events].count("run_started") == 1
    assert isinstance(events[-1], RunFinished)
    assert {e.run_id for e in events} == {run.run_id}
    # The answer reached the orchestrator's model as the ask_user tool result.
    third_request = orchestrator_model.requests[2]
    answer = third_request[-1]
    assert isinstance(answer, ToolResultMessage) and answer.name == "ask_user"
    assert answer.content == "Express"
    # The second CodingAgent call got the query built with the answer, in a fresh conversation.
    second_coder_request = coder_model.requests[1]
    assert [m for m in second_coder_request if isinstance(m, UserMessage)] == [
        UserMessage(content="Build the auth system with Express")
    ]


async def test_seed_scenario_with_handler() -> None:
    orchestrator, orchestrator_model, coder_model = seed_agents()
    human = ScriptedHuman({"framework": "Express"})
    result = await orchestrator.run("Build an auth system", handler=human)
    assert result.output == "Done: the auth system is built with Express."
    human.assert_all_asked()
    assert len(human.asked) == 1
    orchestrator_model.assert_complete()
    coder_model.assert_complete()


def chain(depth_names: list[str], leaf_question: str) -> tuple[Agent, list[ScriptedModel]]:
    """root -> ... -> leaf; the leaf asks, every parent passes the answer up."""
    leaf_model = ScriptedModel(
        [tool_call("ask_user", question=leaf_question), text("leaf used the answer")],
        name=depth_names[-1],
    )
    models = [leaf_model]
    agent = Agent(depth_names[-1], model=leaf_model, tools=[ask_user()])
    for name in reversed(depth_names[:-1]):
        model = ScriptedModel([tool_call(agent.name, query="go"), text(f"{name} done")], name=name)
        models.insert(0, model)
        agent = Agent(name, model=model, tools=[agent.as_tool()])
    return agent, models


async def test_depth_three_question_reaches_root_stream() -> None:
    root, models = chain(["Root", "Mid", "Leaf"], "Which database?")
    events: list[Event] = []
    async with root.stream("start") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ClarificationRequest):
                assert event.agent_path == ("Root", "Mid", "Leaf")
                assert event.depth == 2
                await run.respond(event.request_id, "PostgreSQL")
    assert run.result.output == "Root done"
    for m in models:
        m.assert_complete()
    leaf_answer = models[2].requests[1][-1]
    assert isinstance(leaf_answer, ToolResultMessage) and leaf_answer.content == "PostgreSQL"
    # Every nested agent's lifecycle is on the root stream, tagged with its path and depth.
    started = [(e.agent_path, e.depth) for e in events if isinstance(e, AgentStarted)]
    assert started == [
        (("Root",), 0),
        (("Root", "Mid"), 1),
        (("Root", "Mid", "Leaf"), 2),
    ]
    resolved = [e for e in events if isinstance(e, ClarificationResolved)]
    assert len(resolved) == 1 and resolved[0].answer == "PostgreSQL"


async def test_parallel_sub_agents_answered_in_reverse_order() -> None:
    research_model = ScriptedModel(
        [tool_call("ask_user", question="Which sources?"), text("research with ANSWER-R")],
        name="research",
    )
    coding_model = ScriptedModel(
        [tool_call("ask_user", question="Which language?"), text("code with ANSWER-C")],
        name="coding",
    )

    def echo_answer(model: ScriptedModel, marker: str) -> FunctionModel:
        async def fn(messages, info):  # type: ignore[no-untyped-def]
            last = messages[-1]
            if isinstance(last, ToolResultMessage):
                return text(f"{info.agent_name} used {last.content}")
            return tool_call("ask_user", question=f"{marker}?")

        return FunctionModel(fn)

    research = Agent(
        "ResearchAgent", model=echo_answer(research_model, "Which sources"), tools=[ask_user()]
    )
    coding = Agent(
        "CodingAgent", model=echo_answer(coding_model, "Which language"), tools=[ask_user()]
    )
    root_model = ScriptedModel(
        [
            [tool_call("ResearchAgent", query="research"), tool_call("CodingAgent", query="code")],
            text("all done"),
        ]
    )
    root = Agent("Orchestrator", model=root_model, tools=[research.as_tool(), coding.as_tool()])

    pending: list[ClarificationRequest] = []
    answers = {"Which sources?": "arxiv", "Which language?": "Rust"}
    async with root.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                pending.append(event)
                if len(pending) == 2:
                    # Both questions wait at once; answer the second first.
                    assert {tuple(run.pending)[i].request_id for i in range(2)} == {
                        p.request_id for p in pending
                    }
                    for request in reversed(pending):
                        await run.respond(request.request_id, answers[request.question])
    assert len({p.request_id for p in pending}) == 2
    results = root_model.requests[1][-2:]
    by_id = {m.tool_call_id: m.content for m in results if isinstance(m, ToolResultMessage)}
    calls = root_model.requests[1][-3].tool_calls  # type: ignore[union-attr]
    # Results come back keyed by tool call id, in the model's order, each with its own answer.
    assert [m.tool_call_id for m in results] == [c.id for c in calls]  # type: ignore[union-attr]
    assert by_id[calls[0].id] == "ResearchAgent used arxiv"
    assert by_id[calls[1].id] == "CodingAgent used Rust"


async def test_nested_events_delivered_exactly_once_with_tags() -> None:
    coder_model = ScriptedModel([text("sub answer")])
    coder = Agent("CodingAgent", model=coder_model)
    root = Agent(
        "Orchestrator",
        model=ScriptedModel([tool_call("CodingAgent", query="q"), text("root answer")]),
        tools=[coder.as_tool()],
    )
    events: list[Event] = []
    async with root.stream("go") as run:
        async for event in run:
            events.append(event)
    texts = [(e.agent_path, e.text) for e in events if isinstance(e, TextDelta)]
    assert texts == [
        (("Orchestrator", "CodingAgent"), "sub answer"),
        (("Orchestrator",), "root answer"),
    ]
    finished = [e for e in events if isinstance(e, AgentFinished)]
    assert [(e.agent_path, e.status, e.output) for e in finished] == [
        (("Orchestrator", "CodingAgent"), "completed", "sub answer"),
        (("Orchestrator",), "completed", "root answer"),
    ]
    tool_done = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.result for e in tool_done] == ["sub answer"]


async def test_agent_run_inside_custom_tool_is_nested() -> None:
    helper = Agent(
        "Helper",
        model=ScriptedModel([tool_call("ask_user", question="Name?"), text("hi")]),
        tools=[ask_user()],
    )

    @tool
    async def delegate(ctx: ToolContext, topic: str) -> str:
        """Ask the helper."""
        result = await helper.run(f"about {topic}")
        return f"{ctx.agent_path[-1]} got {result.output}"

    root = Agent(
        "Root",
        model=ScriptedModel([tool_call("delegate", topic="x"), text("ok")]),
        tools=[delegate],
    )
    human = ScriptedHuman().answer("Name?", "Ada", agent="Root > Helper")
    result = await root.run("go", handler=human)
    assert result.output == "ok"
    assert human.asked[0].agent_path == ("Root", "Helper")
    human.assert_all_asked()


async def test_nested_run_refuses_its_own_handler() -> None:
    inner = Agent("Inner", model=ScriptedModel([text("x")]))

    @tool
    async def bad() -> str:
        """Misuses a handler."""
        await inner.run("x", handler=ScriptedHuman())
        return "unreachable"

    model = ScriptedModel([tool_call("bad"), text("done")])
    root = Agent("Root", model=model, tools=[bad])
    await root.run("go")
    result_message = model.requests[1][-1]
    assert isinstance(result_message, ToolResultMessage) and result_message.is_error
    assert "UserError" in result_message.content


async def test_per_run_conversation_remembers_first_call() -> None:
    def sub(messages, info):  # type: ignore[no-untyped-def]
        queries = [m.content for m in messages if isinstance(m, UserMessage)]
        return text(" | ".join(queries))

    sub_agent = Agent("Memo", model=FunctionModel(sub))
    fresh_model = ScriptedModel(
        [tool_call("Memo", query="first"), tool_call("Memo", query="second"), text("end")]
    )
    kept_model = ScriptedModel(
        [tool_call("memo", query="first"), tool_call("memo", query="second"), text("end")]
    )
    fresh = Agent("Fresh", model=fresh_model, tools=[sub_agent.as_tool()])
    kept = Agent(
        "Kept", model=kept_model, tools=[sub_agent.as_tool("memo", conversation="per_run")]
    )
    await fresh.run("go")
    await kept.run("go")
    assert fresh_model.requests[2][-1].content == "second"  # type: ignore[union-attr]
    assert kept_model.requests[2][-1].content == "first | second"  # type: ignore[union-attr]
    # Another root run starts a new conversation.
    kept_model.steps.extend([tool_call("memo", query="third"), text("end")])
    await kept.run("again")
    assert kept_model.requests[4][-1].content == "third"  # type: ignore[union-attr]


async def test_sub_agent_failure_is_the_tool_result() -> None:
    looping = Agent(
        "Looper",
        model=ScriptedModel([tool_call("ask_user", question="?")] * 2),
        max_turns=2,
        tools=[ask_user()],
    )
    model = ScriptedModel([tool_call("Looper", query="go"), text("recovered")])
    root = Agent("Root", model=model, tools=[looping.as_tool()])
    result = await root.run("go")
    assert result.output == "recovered"
    failure = model.requests[1][-1]
    assert isinstance(failure, ToolResultMessage) and failure.is_error
    assert "MaxTurnsExceededError" in failure.content


def test_agent_rejects_bad_configuration() -> None:
    with pytest.raises(UserError):
        Agent("", model=ScriptedModel([]))
    with pytest.raises(UserError):
        Agent("a", model=ScriptedModel([]), max_turns=0)
    with pytest.raises(UserError, match="two tools named"):
        Agent("a", model=ScriptedModel([]), tools=[ask_user(), ask_user()])
    # A typo used to be accepted, and then a question waited forever.
    with pytest.raises(UserError, match=r"on_unhandled must be one of .* got 'interupt'"):
        Agent("a", model=ScriptedModel([]), on_unhandled="interupt")  # type: ignore[arg-type]


def test_examples_are_short_prompts_checked_when_the_agent_is_built() -> None:
    agent = Agent("a", model=ScriptedModel([]), examples=["  Build a todo API ", "Plan a trip"])
    assert agent.examples == ("Build a todo API", "Plan a trip")
    assert Agent("a", model=ScriptedModel([])).examples == ()
    refused = [
        ("Build a todo API", "a list of prompt strings, got str"),
        (["ok", 3], r"examples\[1\] must be a string, got int"),
        (["ok", "   "], r"examples\[1\] is blank"),
        (["x" * 201], r"examples\[0\] is 201 characters long; at most 200"),
        ([f"p{i}" for i in range(9)], "at most 8 examples, got 9"),
    ]
    for examples, message in refused:
        with pytest.raises(UserError, match=message):
            Agent("a", model=ScriptedModel([]), examples=examples)  # type: ignore[arg-type]


async def test_stream_inside_tool_is_refused() -> None:
    inner = Agent("Inner", model=ScriptedModel([text("x")]))

    @tool
    async def streamer() -> str:
        """Misuses stream."""
        inner.stream("x")
        return "unreachable"

    model = ScriptedModel([tool_call("streamer"), text("done")])
    await Agent("Root", model=model, tools=[streamer]).run("go")
    assert "stream() inside a tool call" in model.requests[1][-1].content  # type: ignore[union-attr]


async def test_history_continues_a_conversation() -> None:
    model = ScriptedModel([text("first answer"), text("second answer")])
    agent = Agent("Chat", model=model, instructions="Be brief.")
    first = await agent.run("hello")
    await agent.run("and then?", history=first.messages)
    sent = model.requests[1]
    assert [type(m).__name__ for m in sent] == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
    ]


async def test_concurrent_root_runs_do_not_share_state() -> None:
    def fn(messages, info):  # type: ignore[no-untyped-def]
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            return text(f"answer {last.content}")
        return tool_call("ask_user", question=f"q for {last.content}")  # type: ignore[union-attr]

    agent = Agent("A", model=FunctionModel(fn), tools=[ask_user()])
    outputs: dict[str, str] = {}

    async def one(prompt: str) -> None:
        async with agent.stream(prompt) as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    await run.respond(event.request_id, event.question.upper())
        outputs[prompt] = run.result.output or ""

    async with anyio.create_task_group() as tg:
        for p in ("one", "two", "three"):
            tg.start_soon(one, p)
    assert outputs == {p: f"answer Q FOR {p.upper()}" for p in ("one", "two", "three")}
