"""Durable runs in one process: journaling, interrupt and resume, answers through the store,
start-up recovery, and deduplication of identical questions."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio
import durable_agents
import pytest

from hpd_agent import Agent, Approve, ToolContext, ask_user, tool
from hpd_agent.events import (
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    RunFinished,
    TextDelta,
    ToolCallFinished,
)
from hpd_agent.exceptions import (
    InvalidAnswerError,
    RequestAlreadyAnsweredError,
    RequestCancelledError,
    RequestExpiredError,
    UnknownRequestError,
    UserError,
)
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import MemoryStore, SQLiteStore, Store, respond
from hpd_agent.testing import FunctionModel, text, tool_call

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")
    yield s
    anyio.run(s.aclose)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    return tmp_path


async def test_interrupt_persists_then_resume_with_answers_reruns_nothing(
    store: Store, workdir: Path
) -> None:
    agent = durable_agents.build()
    result = await agent.run("Build an API", store=store, on_unhandled="interrupt")
    assert result.status == "interrupted"
    (pending,) = result.pending
    assert isinstance(pending, ClarificationRequest)
    assert pending.agent_path == ("Orchestrator", "CodingAgent")
    stored = await store.list_requests(run_id=result.run_id)
    assert [r.request_id for r in stored] == [pending.request_id]
    run = await store.get_run(result.run_id)
    assert run is not None and run.status == "interrupted"
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]

    resumed = await durable_agents.build().resume(
        result.run_id, store=store, answers={pending.request_id: "FastAPI"}
    )
    assert resumed.status == "completed"
    assert resumed.output == "Orchestrator: built with FastAPI"
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    assert durable_agents.read_lines("calls.txt") == durable_agents.EVERY_TURN
    run = await store.get_run(result.run_id)
    assert run is not None and run.status == "completed" and run.output == resumed.output
    # Resuming a finished run replays it whole: same output, still no model call.
    again = await durable_agents.build().resume(result.run_id, store=store)
    assert again.output == resumed.output
    assert len(durable_agents.read_lines("calls.txt")) == 4


async def test_resume_without_answer_interrupts_again_with_the_same_request(
    store: Store, workdir: Path
) -> None:
    first = await durable_agents.build().run("Build", store=store, on_unhandled="interrupt")
    second = await durable_agents.build().resume(
        first.run_id, store=store, on_unhandled="interrupt"
    )
    assert second.status == "interrupted"
    assert [p.request_id for p in second.pending] == [p.request_id for p in first.pending]
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    assert durable_agents.read_lines("calls.txt") == ["orchestrator@0", "coder@0"]


async def test_resume_refuses_bad_answers_and_loses_nothing(store: Store, workdir: Path) -> None:
    agent = Agent(
        "Picker",
        model=FunctionModel(
            lambda m, i: (
                tool_call("ask_user", question="Pick", options=["a", "b"])
                if i.turn == 0
                else text("picked " + _last_result(m))
            )
        ),
        tools=[ask_user()],
    )
    result = await agent.run("go", store=store, on_unhandled="interrupt")
    rid = result.pending[0].request_id
    with pytest.raises(InvalidAnswerError):
        await agent.resume(result.run_id, store=store, answers={rid: "c"})
    with pytest.raises(UnknownRequestError):
        await agent.resume(result.run_id, store=store, answers={"req_nope": "a"})
    record = await store.get_request(rid)
    assert record is not None and record.status == "pending"
    done = await agent.resume(result.run_id, store=store, answers={rid: "B"})
    assert done.output == "picked b"
    with pytest.raises(RequestAlreadyAnsweredError):
        await agent.resume(result.run_id, store=store, answers={rid: "a"})


async def test_resume_checks_run_and_agent(store: Store) -> None:
    agent = Agent("A", model=FunctionModel(lambda m, i: text("hi")))
    with pytest.raises(UserError, match="no run"):
        await agent.resume("run_missing", store=store)
    result = await agent.run("go", store=store)
    other = Agent("B", model=FunctionModel(lambda m, i: text("hi")))
    with pytest.raises(UserError, match="same agent"):
        await other.resume(result.run_id, store=store)
    with pytest.raises(UserError, match="already in"):
        await agent.run("go", store=store, run_id=result.run_id)


async def test_interrupt_needs_a_store() -> None:
    agent = Agent("A", model=FunctionModel(lambda m, i: text("hi")))
    with pytest.raises(UserError, match="needs a store"):
        await agent.run("go", on_unhandled="interrupt")


async def test_replayed_events_are_marked(store: Store, workdir: Path) -> None:
    first = await durable_agents.build().run("Build", store=store, on_unhandled="interrupt")
    rid = first.pending[0].request_id
    await respond(store, rid, "Flask")
    events: list[Event] = []
    async with durable_agents.build().resume_stream(first.run_id, store=store) as run:
        async for event in run:
            events.append(event)
    assert run.result.output == "Orchestrator: built with Flask"
    replayed = [(type(e).__name__, getattr(e, "tool_name", None)) for e in events if e.replayed]
    assert ("ToolCallFinished", "record_step") in replayed
    assert ("ClarificationRequest", None) in replayed
    assert ("ClarificationResolved", None) in replayed
    resolved = [e for e in events if isinstance(e, ClarificationResolved)]
    assert [(e.request_id, e.answer, e.replayed) for e in resolved] == [(rid, "Flask", True)]
    live_text = [e.text for e in events if isinstance(e, TextDelta) and not e.replayed]
    assert live_text == ["built with Flask", "Orchestrator: built with Flask"]
    assert isinstance(events[-1], RunFinished) and events[-1].status == "completed"


async def test_stream_respond_writes_through_the_store(store: Store, workdir: Path) -> None:
    async with durable_agents.build().stream("Build", store=store) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                assert await run.respond(event.request_id, "Django") == "Django"
                with pytest.raises(RequestAlreadyAnsweredError):
                    await run.respond(event.request_id, "Flask")
                record = await store.get_request(event.request_id)
                assert record is not None and record.answer == "Django"
    assert run.result.output == "Orchestrator: built with Django"


async def test_answer_through_the_store_wakes_a_waiting_run(store: Store, workdir: Path) -> None:
    # No handler and no consumer: with a store, the run waits for an answer from anywhere.
    outputs: list[str | None] = []

    async def run_it() -> None:
        result = await durable_agents.build().run("Build", store=store, run_id="run_hot")
        outputs.append(result.output)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_it)
        while not (pending := await store.list_requests(run_id="run_hot")):
            await anyio.wait_all_tasks_blocked()
        await respond(store, pending[0].request_id, "Rails", context={"sender": "ops"})
    assert outputs == ["Orchestrator: built with Rails"]
    record = await store.get_request(pending[0].request_id)
    assert record is not None and record.context["sender"] == "ops"


async def test_recovery_expires_old_requests_and_the_asker_sees_the_timeout(
    store: Store, workdir: Path
) -> None:
    first = await durable_agents.build().run("Build", store=store, on_unhandled="interrupt")
    rid = first.pending[0].request_id
    expired = await store.recover(max_age=0.0)
    assert expired == [rid]
    resumed = await durable_agents.build().resume(first.run_id, store=store)
    assert resumed.status == "completed"
    assert resumed.output is not None
    assert "did not answer" in resumed.output and "expired" in resumed.output
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]


async def test_recovery_keeps_recent_requests_answerable(store: Store, workdir: Path) -> None:
    first = await durable_agents.build().run("Build", store=store, on_unhandled="interrupt")
    rid = first.pending[0].request_id
    resumed = await durable_agents.build().resume(
        first.run_id, store=store, max_age=3600, answers={rid: "Phoenix"}
    )
    assert resumed.output == "Orchestrator: built with Phoenix"


async def test_request_timeout_survives_resume(store: Store) -> None:
    asks = 0

    def model(messages: Sequence[Message], info: ModelRequestParams):
        nonlocal asks
        if info.turn == 0:
            asks += 1
            return tool_call("ask_user", question="Quick?")
        return text(_last_result(messages))

    agent = Agent("A", model=FunctionModel(model), tools=[ask_user(timeout=0.05)])
    first = await agent.run("go", store=store, on_unhandled="interrupt")
    rid = first.pending[0].request_id
    record = await store.get_request(rid)
    assert record is not None and record.expires_at is not None
    # Resumed after its deadline passed: it expires at once, with the timeout text.
    await anyio.sleep(0.06)  # the deadline must really be in the past: this is what's tested
    done = await agent.resume(first.run_id, store=store)
    assert "did not answer within 0.05 seconds" in (done.output or "")
    assert asks == 1


async def _ask_region_twice(store: Store | None) -> list[ClarificationRequest]:
    """Two identical questions and a third in one turn; returns what reached the human."""

    def model(messages: Sequence[Message], info: ModelRequestParams):
        if info.turn == 0:
            return [
                tool_call("ask_user", _id="a", question="Which region?"),
                tool_call("ask_user", _id="b", question="Which region?"),
                tool_call("ask_user", _id="c", question="Which zone?"),
            ]
        results = [m.content for m in messages if isinstance(m, ToolResultMessage)]
        return text(" & ".join(results))

    agent = Agent("A", model=FunctionModel(model), tools=[ask_user()])
    asked: list[ClarificationRequest] = []
    answered: set[str] = set()
    answers = {"Which region?": "eu-west", "Which zone?": "b"}
    async with agent.stream("go", store=store) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                asked.append(event)
            # Calls start in the model's order, each once the one before has suspended: by
            # the time the zone question exists, the second region question has found the
            # first and joined it. Answer nothing before that (events may come in any
            # order when the store write yields), everything after.
            if any(r.question == "Which zone?" for r in asked):
                for request in asked:
                    if request.request_id not in answered:
                        answered.add(request.request_id)
                        await run.respond(request.request_id, answers[request.question])
    assert run.result.output == "eu-west & eu-west & b"
    return asked


async def test_same_question_twice_in_parallel_is_asked_once(store: Store) -> None:
    asked = await _ask_region_twice(store)
    assert sorted(r.question for r in asked) == ["Which region?", "Which zone?"]
    assert len(await store.list_requests(status=None)) == 2


async def test_same_question_twice_without_store_is_asked_once() -> None:
    asked = await _ask_region_twice(None)
    assert sorted(r.question for r in asked) == ["Which region?", "Which zone?"]


def _region_twice_agent() -> Agent:
    """An agent whose first turn asks the same question twice in parallel."""

    def model(messages: Sequence[Message], info: ModelRequestParams):
        if info.turn == 0:
            return [
                tool_call("ask_user", _id="a", question="Which region?"),
                tool_call("ask_user", _id="b", question="Which region?"),
            ]
        return text(" & ".join(m.content for m in messages if isinstance(m, ToolResultMessage)))

    return Agent("A", model=FunctionModel(model), tools=[ask_user()])


async def test_dedup_survives_interrupt_and_resume(store: Store) -> None:
    agent = _region_twice_agent()
    human_free = await agent.run("go", store=store, on_unhandled="interrupt")
    assert len(await store.list_requests()) == 1
    rid = (await store.list_requests())[0].request_id
    done = await agent.resume(human_free.run_id, store=store, answers={rid: "us"})
    assert done.output == "us & us"


async def test_permission_approved_for_the_run_is_restored_on_resume(store: Store) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: Where.
        """
        ran.append(target)
        return f"deployed {target}"

    def model(messages: Sequence[Message], info: ModelRequestParams):
        if info.turn == 0:
            return tool_call("deploy", target="staging")
        if info.turn == 1:
            return tool_call("ask_user", question="Ready for prod?")
        if info.turn == 2:
            return tool_call("deploy", target="prod")
        return text("done")

    agent = Agent("Ops", model=FunctionModel(model), tools=[deploy, ask_user()])
    first = await agent.run("ship", store=store, on_unhandled="interrupt")
    (perm,) = first.pending
    assert isinstance(perm, PermissionRequest)
    second = await agent.resume(
        first.run_id,
        store=store,
        answers={perm.request_id: Approve(scope="run")},
        on_unhandled="interrupt",
    )
    assert second.status == "interrupted" and ran == ["staging"]
    (question,) = second.pending
    # The run-wide approval was replayed: deploying to prod asks nothing more.
    third = await agent.resume(first.run_id, store=store, answers={question.request_id: "yes"})
    assert third.output == "done"
    assert ran == ["staging", "prod"]


def _last_result(messages: Sequence[Message]) -> str:
    for m in reversed(messages):
        if isinstance(m, ToolResultMessage):
            return m.content
    return ""


async def test_tool_results_in_failing_events_are_not_rejournaled(store: Store) -> None:
    """A finished run's events of a replay: every tool call finished replayed, none live."""
    agent = Agent(
        "A",
        model=FunctionModel(
            lambda m, i: tool_call("echo", text="x") if i.turn == 0 else text("ok")
        ),
        tools=[tool(lambda text: text, name="echo", description="Echo.")],
    )
    first = await agent.run("go", store=store)
    events: list[Event] = []
    async with agent.resume_stream(first.run_id, store=store) as run:
        async for event in run:
            events.append(event)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.tool_name, e.replayed) for e in finished] == [("echo", True)]


async def test_cancelling_a_run_cancels_its_stored_requests(store: Store, workdir: Path) -> None:
    async with durable_agents.build().stream("Build", store=store, run_id="run_c") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                rid = event.request_id
                run.cancel()
    assert run.result.status == "cancelled"
    record = await store.get_request(rid)
    assert record is not None and record.status == "cancelled"
    with pytest.raises(RequestCancelledError):
        await respond(store, rid, "too late")
    stored_run = await store.get_run("run_c")
    assert stored_run is not None and stored_run.status == "cancelled"


async def test_expired_in_process_refuses_a_late_answer(store: Store) -> None:
    agent = Agent(
        "A",
        model=FunctionModel(
            lambda m, i: (
                tool_call("ask_user", question="Now?") if i.turn == 0 else text(_last_result(m))
            )
        ),
        tools=[ask_user(timeout=0.01)],
    )
    async with agent.stream("go", store=store) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                rid = event.request_id  # not answered: it times out
    assert "did not answer within 0.01 seconds" in (run.result.output or "")
    record = await store.get_request(rid)
    assert record is not None and record.status == "expired"
    with pytest.raises(RequestExpiredError):
        await respond(store, rid, "late")


async def test_per_run_sub_agent_conversation_survives_resume(store: Store) -> None:
    """A sub-agent kept per run remembers its first call after a cold resume."""
    seen: list[list[str]] = []

    def helper_model(messages: Sequence[Message], info: ModelRequestParams):
        users = [m.content for m in messages if m.kind == "user"]
        seen.append(users)
        if info.turn == 0 and len(users) == 2:
            return tool_call("ask_user", question="Which colour?")
        return text(f"noted {users[-1]}" if info.turn == 0 else _last_result(messages))

    helper = Agent("Helper", model=FunctionModel(helper_model), tools=[ask_user()])

    def boss_model(messages: Sequence[Message], info: ModelRequestParams):
        if info.turn == 0:
            return tool_call("Helper", query="remember apples")
        if info.turn == 1:
            return tool_call("Helper", query="what did I say?")
        return text(_last_result(messages))

    boss = Agent(
        "Boss", model=FunctionModel(boss_model), tools=[helper.as_tool(conversation="per_run")]
    )
    first = await boss.run("go", store=store, on_unhandled="interrupt")
    (question,) = first.pending
    done = await boss.resume(first.run_id, store=store, answers={question.request_id: "red"})
    assert done.output == "red"
    # The second call's live turn after the resume still has the first call's conversation.
    assert seen[-1] == ["remember apples", "what did I say?"]
    assert len(seen) == 3  # first call, second call's turn 0 (replayed since), its turn 1


async def test_dedup_interrupts_again_on_resume_without_answers(store: Store) -> None:
    agent = _region_twice_agent()
    first = await agent.run("go", store=store, on_unhandled="interrupt")
    with anyio.fail_after(10):
        second = await agent.resume(first.run_id, store=store, on_unhandled="interrupt")
    assert second.status == "interrupted"
    assert [p.request_id for p in second.pending] == [p.request_id for p in first.pending]
    done = await agent.resume(
        first.run_id, store=store, answers={first.pending[0].request_id: "ap"}
    )
    assert done.output == "ap & ap"


async def test_resume_answers_are_all_checked_before_any_is_written(store: Store) -> None:
    def model(messages: Sequence[Message], info: ModelRequestParams):
        if info.turn == 0:
            return [
                tool_call("ask_user", _id="a", question="Name?"),
                tool_call("ask_user", _id="b", question="Size?", options=["S", "M"]),
            ]
        return text(" & ".join(m.content for m in messages if isinstance(m, ToolResultMessage)))

    agent = Agent("A", model=FunctionModel(model), tools=[ask_user()])
    first = await agent.run("go", store=store, on_unhandled="interrupt")
    # Both parallel questions were raised before the run stopped.
    by_question = {p.question: p.request_id for p in first.pending}  # type: ignore[union-attr]
    assert set(by_question) == {"Name?", "Size?"}
    with pytest.raises(InvalidAnswerError):
        await agent.resume(
            first.run_id,
            store=store,
            answers={by_question["Name?"]: "Ann", by_question["Size?"]: "XL"},
        )
    assert len(await store.list_requests(run_id=first.run_id)) == 2  # nothing was written
    done = await agent.resume(
        first.run_id, store=store, answers={by_question["Name?"]: "Ann", by_question["Size?"]: "m"}
    )
    assert done.output == "Ann & M"


async def test_cancellation_from_outside_leaves_requests_resumable(
    store: Store, workdir: Path
) -> None:
    """A process shutting down (an outer cancel scope here) is like a crash, not a cancel."""
    seen: set[str] = set()
    with anyio.CancelScope() as outer:
        async with durable_agents.build().stream("Build", store=store, run_id="run_s") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    seen.add("question")
                elif isinstance(event, ToolCallFinished) and event.tool_name == "record_step":
                    seen.add("step")  # a tool thread still running is abandoned, not awaited
                if seen == {"question", "step"}:
                    outer.cancel()
                    await anyio.sleep_forever()
    (record,) = await store.list_requests(run_id="run_s")
    assert record.status == "pending"
    done = await durable_agents.build().resume(
        "run_s", store=store, answers={record.request_id: "Koa"}
    )
    assert done.output == "Orchestrator: built with Koa"
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]


async def test_typed_question_answered_through_the_store_is_checked_by_kind(
    store: Store,
) -> None:
    # A choice question left pending in the store: another process (here: store.respond,
    # as the CLI does) must get the same checks as run.respond, by value or by index.
    @tool
    async def pick_region(ctx: ToolContext) -> str:
        """Pick where to deploy."""
        return await ctx.ask_choice("Which region?", ["eu-west", "us-east"])

    model = FunctionModel(
        lambda messages, info: (
            text(f"deploying to {messages[-1].content}")  # type: ignore[union-attr]
            if isinstance(messages[-1], ToolResultMessage)
            else tool_call("pick_region")
        )
    )
    agent = Agent("Deployer", model=model, tools=[pick_region])
    first = await agent.run("deploy", store=store, on_unhandled="interrupt")
    (pending,) = first.pending
    assert isinstance(pending, ClarificationRequest) and pending.question_kind == "choice"
    with pytest.raises(InvalidAnswerError):
        await respond(store, pending.request_id, "mars")
    with pytest.raises(InvalidAnswerError):
        await respond(store, pending.request_id, 7)
    record = await respond(store, pending.request_id, 1)
    assert record.answer == "us-east"
    resumed = await agent.resume(first.run_id, store=store)
    assert resumed.output == "deploying to us-east"
