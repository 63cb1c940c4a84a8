"""respond(): routed by id only, atomic, and each refusal a distinct error that changes nothing."""

from __future__ import annotations

import anyio
import pytest

from hpd_agent import (
    Agent,
    ClarificationRequest,
    ClarificationResolved,
    Event,
    InvalidAnswerError,
    RequestAlreadyAnsweredError,
    RequestCancelledError,
    RequestExpiredError,
    UnknownRequestError,
    ask_user,
)
from hpd_agent.messages import ToolResultMessage
from hpd_agent.testing import ScriptedModel, text, tool_call


def asking_agent(
    *, timeout: float | None = None, options: list[str] | None = None
) -> tuple[Agent, ScriptedModel]:
    args: dict[str, object] = {"question": "Pick a colour"}
    if options:
        args["options"] = options
    model = ScriptedModel([tool_call("ask_user", **args), text("done")])
    return Agent("Asker", model=model, tools=[ask_user(timeout=timeout)]), model


async def test_refusals_are_distinct_and_change_nothing() -> None:
    agent, model = asking_agent(options=["red", "green"])
    events: list[Event] = []
    async with agent.stream("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ClarificationRequest):
                rid = event.request_id
                with pytest.raises(UnknownRequestError) as unknown:
                    await run.respond("req_nope", "red")
                assert unknown.value.request_id == "req_nope"
                with pytest.raises(InvalidAnswerError, match="not one of the options"):
                    await run.respond(rid, "blue")
                with pytest.raises(InvalidAnswerError, match="index 42 is out of range"):
                    await run.respond(rid, 42)  # an int is an option's 0-based index
                with pytest.raises(InvalidAnswerError, match="got list"):
                    await run.respond(rid, ["red"])
                # Still pending after the refusals: the valid answer goes through.
                assert [p.request_id for p in run.pending] == [rid]
                assert await run.respond(rid, " GREEN ") == "green"
                with pytest.raises(RequestAlreadyAnsweredError):
                    await run.respond(rid, "red")
    resolved = [e for e in events if isinstance(e, ClarificationResolved)]
    assert [(e.status, e.answer) for e in resolved] == [("answered", "green")]
    answer = model.requests[1][-1]
    assert isinstance(answer, ToolResultMessage) and answer.content == "green"


async def test_late_answer_after_expiry_is_refused() -> None:
    agent, model = asking_agent(timeout=0.01)
    expired_id = None
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationResolved):
                assert event.status == "expired"
                expired_id = event.request_id
                with pytest.raises(RequestExpiredError):
                    await run.respond(event.request_id, "red")
    assert expired_id is not None
    result = model.requests[1][-1]
    assert isinstance(result, ToolResultMessage) and not result.is_error
    assert "did not answer within 0.01 seconds" in result.content


async def test_cancelled_request_tells_the_model_and_refuses_answers() -> None:
    agent, model = asking_agent()
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                run.cancel_request(event.request_id)
                with pytest.raises(RequestCancelledError):
                    await run.respond(event.request_id, "red")
    assert run.result.output == "done"
    result = model.requests[1][-1]
    assert isinstance(result, ToolResultMessage)
    assert "cancelled before the user answered" in result.content


async def test_request_is_registered_before_its_event_is_seen() -> None:
    # Answering synchronously from the sink, the instant the event is emitted, must work.
    agent, model = asking_agent()
    async with agent.stream("go") as run:
        original = run.coordinator.outlet.sink
        assert original is not None

        def answer_immediately(event: Event) -> None:
            original(event)
            if isinstance(event, ClarificationRequest):
                run.coordinator.respond_nowait(event.request_id, "instant")

        run.coordinator.outlet.sink = answer_immediately
        async for _ in run:
            pass
    assert model.requests[1][-1].content == "instant"  # type: ignore[union-attr]


async def test_request_ids_are_stable_for_the_same_call_path() -> None:
    ids: list[str] = []
    for _ in range(2):
        agent, _model = asking_agent()
        async with agent.stream("go", run_id="run_fixed") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    ids.append(event.request_id)
                    await run.respond(event.request_id, "x")
    assert ids[0] == ids[1] and ids[0].startswith("req_")


async def test_many_pending_requests_answered_in_any_order() -> None:
    n = 20
    model = ScriptedModel(
        [[tool_call("ask_user", question=f"q{i}") for i in range(n)], text("done")]
    )
    agent = Agent("Many", model=model, tools=[ask_user()])
    seen: dict[str, str] = {}
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                seen[event.request_id] = event.question
                if len(seen) == n:
                    for rid in sorted(seen, reverse=True):
                        await run.respond(rid, f"answer to {seen[rid]}")
    results = [m for m in model.requests[1] if isinstance(m, ToolResultMessage)]
    assert [r.content for r in results] == [f"answer to q{i}" for i in range(n)]


async def test_respond_from_another_task_wakes_the_asker() -> None:
    agent, model = asking_agent()
    async with agent.stream("go") as run, anyio.create_task_group() as tg:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                tg.start_soon(run.respond, event.request_id, "from elsewhere")
    assert model.requests[1][-1].content == "from elsewhere"  # type: ignore[union-attr]
