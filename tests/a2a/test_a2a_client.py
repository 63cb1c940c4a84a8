"""``RemoteAgent`` against real a2a-sdk servers (executors written in the tests, served on
127.0.0.1): the remote task's questions reach the root as ``ClarificationRequest``s tagged
with the remote's path, answers go back in the same task and context, every end state gives
the calling model the right result, and cancelling the run cancels the remote task."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import anyio.to_thread
import pytest
from a2a_servers import (
    A2AServer,
    Asking,
    Ending,
    ManyPending,
    NeedsAuth,
    Pending,
    Scripted,
    a2a_server,
)

from hpd_agent import (
    Agent,
    ClarificationRequest,
    ClarificationResolved,
    InvalidAnswerError,
    ToolContext,
    UserError,
    tool,
)
from hpd_agent.a2a import RemoteAgent, RemoteAgentError
from hpd_agent.messages import ToolResultMessage
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

CITY = ("Which city?", {"options": ["Paris", "Rome"]})


async def _tool(server: A2AServer, **kwargs: Any) -> Any:
    remote = RemoteAgent(server.url, **kwargs)
    await remote.read_card()  # in async code: read first, then as_tool() needs no request
    return remote.as_tool()


def _orchestrator(remote_tool: Any, query: str = "plan a trip") -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([tool_call(remote_tool.name, query=query), text("done")])
    return Agent("Orchestrator", model=model, tools=[remote_tool]), model


def _tool_results(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


async def test_input_required_is_a_question_answered_in_the_same_task_and_context() -> None:
    executor = Asking([CITY])
    with a2a_server(executor) as server:
        remote_tool = await _tool(server)
        agent, model = _orchestrator(remote_tool)
        human = ScriptedHuman({"Which city?": "Rome"})
        result = await agent.run("go", handler=human)
    assert result.output == "done"
    model.assert_complete()  # two model turns, no more
    (asked,) = human.asked
    assert isinstance(asked, ClarificationRequest)
    assert asked.agent_path == ("Orchestrator", "Planner")
    assert asked.depth == 1
    assert asked.question == "Which city?"
    assert asked.options == ("Paris", "Rome")
    assert _tool_results(result.messages) == ["plan a trip -> Rome"]
    # One query; the answer went into the same task and context.
    assert server.recorder.queries() == [server.recorder.calls[0]["params"]["message"]]
    assert executor.queries == ["plan a trip"] and executor.answers == ["Rome"]
    assert len(set(executor.tasks)) == 1 and len(executor.tasks) == 2
    assert remote_tool.name == "Planner"
    assert remote_tool.agent is not None


async def test_each_status_is_read_for_its_questions_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The call looks at a waiting status twice (has the task settled? what does it ask?):
    its questions are read from it (its metadata parsed) once."""
    from hpd_agent.a2a import _relay

    read: list[int] = []
    real = _relay.questions_of

    def reading(status: Any, metadata: Any) -> Any:
        read.append(status.state)
        return real(status, metadata)

    monkeypatch.setattr(_relay, "questions_of", reading)
    with a2a_server(Asking([CITY, ("Which month?", {})])) as server:
        agent, _ = _orchestrator(await _tool(server))
        human = ScriptedHuman({"Which city?": "Rome", "Which month?": "May"})
        result = await agent.run("go", handler=human)
    assert len(human.asked) == 2
    assert _tool_results(result.messages) == ["plan a trip -> Rome, May"]
    assert len(read) == 2  # the two statuses asking, each read once


async def test_the_remote_agent_path_is_appended_below_the_caller() -> None:
    # Orchestrator -> Sub (a local agent) -> the remote "Planner", whose "Clarifier" asks.
    ask = ("Budget?", {"agent_path": ["Planner", "Clarifier"]})
    with a2a_server(Asking([ask])) as server:
        remote_tool = await _tool(server)
        sub_model = ScriptedModel([tool_call("Planner", query="plan"), text("sub done")])
        sub = Agent("Sub", model=sub_model, tools=[remote_tool])
        root_model = ScriptedModel([tool_call("Sub", query="delegate"), text("root done")])
        root = Agent("Orchestrator", model=root_model, tools=[sub.as_tool()])
        human = ScriptedHuman({"Budget?": "1000"})
        result = await root.run("go", handler=human)
    assert result.output == "root done"
    (asked,) = human.asked
    assert asked.agent_path == ("Orchestrator", "Sub", "Planner", "Clarifier")
    assert asked.depth == 3


async def test_two_questions_in_turn_carry_the_remote_request_id_back() -> None:
    questions = [
        ("First?", {"request_id": "remote-1"}),
        ("Second?", {"request_id": "remote-2", "question_kind": "confirm"}),
    ]
    executor = Asking(questions)
    with a2a_server(executor) as server:
        agent, _ = _orchestrator(await _tool(server))
        human = ScriptedHuman({"First?": "one"}).confirm("Second?", True)
        result = await agent.run("go", handler=human)
    assert [r.question for r in human.asked] == ["First?", "Second?"]  # type: ignore[union-attr]
    assert [r.question_kind for r in human.asked] == ["text", "confirm"]  # type: ignore[union-attr]
    assert len({r.request_id for r in human.asked}) == 2
    assert executor.answers == ["one", True]  # a confirmation goes back as data: a bool
    assert executor.answer_metadata == [{"request_id": "remote-1"}, {"request_id": "remote-2"}]
    assert _tool_results(result.messages) == ["plan a trip -> one, True"]
    assert len(set(executor.tasks)) == 1


@pytest.mark.parametrize(
    ("state", "said"),
    [
        ("failed", "the remote task failed: out of paper"),
        ("rejected", "the remote task was rejected: out of paper"),
        ("canceled", "the remote task was canceled: out of paper"),
    ],
)
async def test_a_task_that_did_not_complete_is_an_error_result(state: str, said: str) -> None:
    with a2a_server(Ending(state, "out of paper")) as server:
        agent, model = _orchestrator(await _tool(server))
        result = await agent.run("go")
    assert result.output == "done"  # the model got the error and went on
    (content,) = _tool_results(result.messages)
    assert content.startswith(f"Error: RemoteAgentError: {said} (remote agent 'Planner'")
    model.assert_complete()


async def test_a_completed_task_without_artifacts_gives_its_last_agent_message() -> None:
    with a2a_server(Ending("completed", "all planned", artifact=False)) as server:
        agent, _ = _orchestrator(await _tool(server))
        result = await agent.run("go")
    assert _tool_results(result.messages) == ["all planned"]


async def test_cancelling_the_run_cancels_the_remote_task() -> None:
    executor = Asking([CITY])
    with a2a_server(executor) as server:
        agent, _ = _orchestrator(await _tool(server))
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    run.cancel()
        assert run.result.status == "cancelled"
        methods = server.recorder.methods()
    assert methods.count("CancelTask") == 1
    (task_id, _), *_ = executor.tasks
    cancel = next(c for c in server.recorder.calls if c["method"] == "CancelTask")
    assert cancel["params"]["id"] == task_id
    assert executor.cancels == [task_id]  # the remote's executor was told
    assert executor.answers == []


async def test_a_question_nobody_answers_cancels_the_remote_task() -> None:
    executor = Asking([CITY])
    with a2a_server(executor) as server:
        agent, model = _orchestrator(await _tool(server))
        result = await agent.run("go")  # no handler: the question is declined
        methods = server.recorder.methods()
    assert result.output == "done"
    (content,) = _tool_results(result.messages)
    assert "No user is available" in content
    assert methods.count("CancelTask") == 1
    model.assert_complete()


async def test_several_pending_questions_are_asked_at_once_and_answered_in_any_order() -> None:
    executor = ManyPending(
        [
            Pending("r-a", "Question A?", ["Planner", "A"]),
            Pending("r-b", "Question B?", ["Planner", "B"], options=["x", "y"]),
        ]
    )
    with a2a_server(executor) as server:
        agent, _ = _orchestrator(await _tool(server))
        seen: list[ClarificationRequest] = []
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    seen.append(event)
                    if len(seen) == 2:  # both asked before either is answered
                        by_path = {e.agent_path[-1]: e for e in seen}
                        await run.respond(by_path["B"].request_id, "y")
                        # The second answer comes once the remote has the first.
                        await anyio.to_thread.run_sync(executor.got_an_answer.wait)
                        await run.respond(by_path["A"].request_id, "alpha")
        answers = server.recorder.answers()
    assert run.result.status == "completed"
    assert sorted(e.agent_path for e in seen) == [
        ("Orchestrator", "Planner", "A"),
        ("Orchestrator", "Planner", "B"),
    ]
    assert {e.question: e.options for e in seen} == {"Question A?": None, "Question B?": ("x", "y")}
    # Sent in the order answered, each naming its request.
    assert [a["metadata"]["request_id"] for a in answers] == ["r-b", "r-a"]
    assert executor.answered == [("r-b", "y"), ("r-a", "alpha")]
    assert _tool_results(run.result.messages) == ["r-b=y, r-a=alpha"]


async def test_a_question_asked_alone_is_asked_in_the_calls_own_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One question at a time (the common case): asked from the tool call's own task, no
    task group set up for it; several at once: side by side, in a group."""
    groups: list[object] = []
    real = anyio.create_task_group

    def counted() -> Any:
        if sys._getframe(1).f_globals.get("__name__") == "hpd_agent.a2a._call":  # pyright: ignore[reportPrivateUsage]
            groups.append(None)
        return real()

    monkeypatch.setattr(anyio, "create_task_group", counted)
    executor = Asking([CITY, ("Which month?", {})])
    with a2a_server(executor) as server:
        agent, _ = _orchestrator(await _tool(server))
        human = ScriptedHuman({"Which city?": "Rome", "Which month?": "May"})
        result = await agent.run("go", handler=human)
    assert _tool_results(result.messages) == ["plan a trip -> Rome, May"]
    assert groups == []
    several = ManyPending([Pending("r-a", "A?", ["Planner"]), Pending("r-b", "B?", ["Planner"])])
    with a2a_server(several) as server:
        agent, _ = _orchestrator(await _tool(server))
        result = await agent.run("go", handler=ScriptedHuman({"A?": "a", "B?": "b"}))
    (answered,) = _tool_results(result.messages)
    assert sorted(answered.split(", ")) == ["r-a=a", "r-b=b"]  # in the order answered
    assert len(groups) == 1


async def test_auth_required_with_a_url_is_an_action_question() -> None:
    executor = NeedsAuth("http://127.0.0.1:9/login")
    with a2a_server(executor) as server:
        agent, _ = _orchestrator(await _tool(server))
        human = ScriptedHuman().complete_action("127.0.0.1:9/login", True)
        result = await agent.run("go", handler=human)
    (asked,) = human.asked
    assert asked.question_kind == "action"  # type: ignore[union-attr]
    assert asked.data == {"url": "http://127.0.0.1:9/login", "label": "Sign in"}  # type: ignore[union-attr]
    assert asked.agent_path == ("Orchestrator", "Planner")
    assert _tool_results(result.messages) == ["signed in, work done"]
    assert executor.executions == 2 and executor.follow_ups == ["done"]


async def test_auth_declined_or_without_a_url_ends_the_call_and_the_task() -> None:
    with a2a_server(NeedsAuth("http://127.0.0.1:9/login")) as server:
        agent, _ = _orchestrator(await _tool(server))
        human = ScriptedHuman().complete_action("login", False)
        declined = await agent.run("go", handler=human)
        declined_methods = server.recorder.methods()
    with a2a_server(NeedsAuth(None)) as server:
        agent, _ = _orchestrator(await _tool(server))
        no_url = await agent.run("go", handler=ScriptedHuman())
        no_url_methods = server.recorder.methods()
    (content,) = _tool_results(declined.messages)
    assert "the user did not sign in where the remote agent asked" in content
    (content,) = _tool_results(no_url.messages)
    assert "the remote agent needs authentication and gave no URL" in content
    assert declined_methods.count("CancelTask") == 1
    assert no_url_methods.count("CancelTask") == 1


async def test_a_remote_that_does_not_stream_is_followed_by_polling() -> None:
    executor = Asking([CITY])
    with a2a_server(executor, streaming=False) as server:
        agent, _ = _orchestrator(await _tool(server))
        result = await agent.run("go", handler=ScriptedHuman({"Which city?": "Paris"}))
        methods = server.recorder.methods()
    assert _tool_results(result.messages) == ["plan a trip -> Paris"]
    assert "SendStreamingMessage" not in methods and "SendMessage" in methods
    assert len(set(executor.tasks)) == 1


async def test_a_remote_that_cannot_be_reached_is_an_error_result() -> None:
    with a2a_server(Asking([])) as server:
        url = server.url
        remote = RemoteAgent(url, name="Gone")
        remote_tool = remote.as_tool()
    agent, _ = _orchestrator(remote_tool)  # the server is gone by now
    result = await agent.run("go")
    (content,) = _tool_results(result.messages)
    assert content.startswith(f"Error: RemoteAgentError: cannot read the agent card at {url}")


async def test_in_async_code_the_card_is_read_first_or_a_name_given() -> None:
    with a2a_server(Ending("completed", "ok")) as server:
        remote = RemoteAgent(server.url)
        with pytest.raises(UserError, match=r"await remote\.read_card"):
            remote.as_tool()
        named = RemoteAgent(server.url, name="My Planner!").as_tool()
        card = await remote.read_card()
        described = remote.as_tool(description="Plans trips.")
    assert named.name == "My_Planner"
    assert remote.name == card.name == "Planner"
    assert described.description == "Plans trips."
    assert remote.as_tool().description == "Planner: a test agent served with a2a-sdk."


def test_as_tool_reads_the_card_in_synchronous_code() -> None:
    with a2a_server(Ending("completed", "ok")) as server:
        remote_tool = RemoteAgent(server.url).as_tool()
        methods = server.recorder.methods()
    assert remote_tool.name == "Planner"
    assert methods == []  # a GET of the card, no JSON-RPC call


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(UserError, match="http"):
        RemoteAgent("ftp://example.com")
    with pytest.raises(UserError, match="empty"):
        RemoteAgent("http://127.0.0.1:9", name="")


async def test_a_tool_of_your_own_can_call_the_remote_agent() -> None:
    with a2a_server(Ending("completed", "42")) as server:
        remote = RemoteAgent(server.url)

        @tool
        async def ask_planner(ctx: ToolContext) -> str:
            """Ask the planner."""
            return "planner says " + await remote.call(ctx, "the answer?")

        model = ScriptedModel([tool_call("ask_planner"), text("done")])
        result = await Agent("Orchestrator", model=model, tools=[ask_planner]).run("go")
    assert _tool_results(result.messages) == ["planner says 42"]


def test_import_hpd_agent_does_not_import_a2a() -> None:
    code = "import sys, hpd_agent\nprint([m for m in sys.modules if m == 'a2a' or m.startswith(('a2a.', 'hpd_agent.a2a'))])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_remote_agent_error_is_an_hpd_agent_error() -> None:
    from hpd_agent import HpdAgentError

    error = RemoteAgentError("x", state="failed", task_id="t")
    assert isinstance(error, HpdAgentError) and error.state == "failed" and error.task_id == "t"


async def test_an_answer_the_remote_refuses_is_asked_again_as_a_new_question() -> None:
    # The remote asks "r1", refuses the answer and asks "r1" again (the same request id,
    # a new status saying why): a new question with an id of its own, not a replay.
    executor = Scripted(
        [[Pending("r1", "Which city?", ["Planner"])], [Pending("r1", "Which city?", ["Planner"])]],
        refused="Not a city we serve.",
    )
    with a2a_server(executor) as server:
        agent, _ = _orchestrator(await _tool(server))
        human = ScriptedHuman().answer("Not a city", "Rome").answer("Which city?", "Atlantis")
        result = await agent.run("go", handler=human)
    assert [r.question for r in human.asked] == [  # type: ignore[union-attr]
        "Which city?",
        "Not a city we serve. Which city?",
    ]
    assert len({r.request_id for r in human.asked}) == 2
    assert executor.answered == [("r1", "Atlantis"), ("r1", "Rome")]
    assert _tool_results(result.messages) == ["r1=Atlantis, r1=Rome"]


async def test_a_question_the_remote_no_longer_asks_is_withdrawn() -> None:
    # Round 1 waits for a and b; once a is answered the remote waits for c only (b was
    # settled on its side): b's question ends as cancelled, c is asked.
    executor = Scripted(
        [
            [
                Pending("a", "Question a?", ["Planner", "A"]),
                Pending("b", "Question b?", ["Planner", "B"]),
            ],
            [Pending("c", "Question c?", ["Planner", "C"])],
        ]
    )
    with a2a_server(executor) as server:
        agent, _ = _orchestrator(await _tool(server))
        ended: dict[str, str] = {}
        questions: dict[str, ClarificationRequest] = {}
        order: list[str] = []
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    questions[event.question] = event
                    order.append(f"asked {event.question}")
                    if event.question in ("Question a?", "Question c?"):
                        await run.respond(event.request_id, event.question[-2])
                elif isinstance(event, ClarificationResolved):
                    ended[event.request_id] = event.status
                    order.append(f"{event.status} {event.request_id}")
    assert run.result.status == "completed"
    b = questions["Question b?"].request_id
    assert ended[b] == "cancelled"
    assert ended[questions["Question a?"].request_id] == "answered"
    # Withdrawn as soon as the remote stopped asking it, not at the task's end.
    assert order.index(f"cancelled {b}") < order.index("asked Question c?")
    assert executor.answered == [("a", "a"), ("c", "c")]


async def test_typed_questions_keep_their_kind_and_answers_go_back_as_data() -> None:
    schema = {"type": "object", "properties": {"nights": {"type": "integer"}}}
    questions = [
        (
            "Which days?",
            {"question_kind": "choice", "options": ["fri", "sat", "sun"], "multiple": True},
        ),
        ("Dates?", {"question_kind": "custom", "name": "dates", "schema": schema}),
        ("Your e-mail?", {"question_kind": "input", "argument": "email"}),
        ("Garbage kind?", {"question_kind": "nonsense", "options": "not a list"}),
    ]
    executor = Asking(questions)
    with a2a_server(executor) as server:
        agent, _ = _orchestrator(await _tool(server))
        human = (
            ScriptedHuman()
            .choose("Which days?", ["fri", "sun"])
            .answer_custom("dates", {"nights": 2})
            .provide("email", " a@b.c ")
            .answer("Garbage kind?", "plain")
        )
        result = await agent.run("go", handler=human)
    kinds = [(r.question_kind, r.options, r.data) for r in human.asked]  # type: ignore[union-attr]
    assert kinds == [
        ("choice", ("fri", "sat", "sun"), {"multiple": True}),
        ("custom", None, {"name": "dates", "payload": {}, "schema": schema}),
        ("input", None, {"argument": "email", "tool": "Planner"}),
        ("text", None, None),  # an unknown kind and bad options: plain text
    ]
    assert executor.answers == [["fri", "sun"], {"nights": 2}, "a@b.c", "plain"]
    assert _tool_results(result.messages) == [
        "plan a trip -> ['fri', 'sun'], {'nights': 2.0}, a@b.c, plain"
    ]


async def test_a_remote_kind_unknown_here_is_asked_with_its_schema_and_label() -> None:
    from hpd_agent.questions import kind_named, validate_answer

    schema = {"type": "integer", "minimum": 1, "maximum": 5}
    stars = {"question_kind": "remote.stars", "schema": schema, "kind_label": "Stars"}
    nested = {"question_kind": "choice", "options": ["fri", "sat"], "data": {"multiple": True}}
    executor = Asking([("How good?", stars), ("Which days?", nested)])
    assert kind_named("remote.stars") is None
    with a2a_server(executor) as server:
        agent, _ = _orchestrator(await _tool(server))
        human = ScriptedHuman().answer("How good?", 4).choose("Which days?", ["sat"])
        await agent.run("go", handler=human)
    rating, days = human.asked
    assert isinstance(rating, ClarificationRequest) and isinstance(days, ClarificationRequest)
    assert (rating.question_kind, rating.answer_schema, rating.label) == (
        "remote.stars", schema, "Stars",
    )  # fmt: skip
    with pytest.raises(InvalidAnswerError, match="9 is greater than the maximum of 5"):
        validate_answer(rating, 9)  # checked here as the remote will check it
    assert (days.question_kind, days.data) == ("choice", {"multiple": True})
    assert executor.answers == [4, ["sat"]]
