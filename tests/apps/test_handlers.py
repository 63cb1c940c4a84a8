"""Handlers: serve() feeds events and answers requests; nobody listening never hangs."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hpd_agent import (
    Agent,
    BaseHandler,
    ClarificationRequest,
    Event,
    Handler,
    NoUserAvailableError,
    RequestEvent,
    ask_user,
)
from hpd_agent.messages import ToolResultMessage
from hpd_agent.testing import ScriptedModel, text, tool_call


class Recorder(BaseHandler):
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.events: list[Event] = []
        self.asked = 0

    async def on_event(self, event: Event) -> None:
        self.events.append(event)

    async def on_clarification(self, request: ClarificationRequest) -> Any:
        self.asked += 1
        return self.answers.pop(0)


def picker() -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(
        [tool_call("ask_user", question="Size?", options=["S", "M", "L"]), text("done")]
    )
    return Agent("A", model=model, tools=[ask_user()]), model


async def test_handler_sees_every_event_and_answers() -> None:
    agent, model = picker()
    handler = Recorder(["M"])
    assert isinstance(handler, Handler)
    result = await agent.run("go", handler=handler)
    assert result.output == "done"
    assert handler.events[0].kind == "run_started" and handler.events[-1].kind == "run_finished"
    assert model.requests[1][-1].content == "M"  # type: ignore[union-attr]


async def test_invalid_handler_answer_is_asked_again() -> None:
    agent, model = picker()
    handler = Recorder(["XL", "L"])
    await agent.run("go", handler=handler)
    assert handler.asked == 2
    assert model.requests[1][-1].content == "L"  # type: ignore[union-attr]


async def test_handler_that_keeps_answering_wrong_cannot_stall_the_run() -> None:
    agent, model = picker()
    handler = Recorder(["XL"] * 3)
    result = await agent.run("go", handler=handler)
    assert result.output == "done"
    assert "cancelled" in model.requests[1][-1].content  # type: ignore[union-attr]


async def test_questions_are_handled_concurrently() -> None:
    # Two questions at once; the handler answers the first only after seeing the second.
    both_seen = anyio.Event()
    seen: list[str] = []

    class Concurrent(BaseHandler):
        async def on_clarification(self, request: ClarificationRequest) -> Any:
            seen.append(request.question)
            if len(seen) == 2:
                both_seen.set()
            with anyio.fail_after(5):
                await both_seen.wait()
            return request.question.upper()

    model = ScriptedModel(
        [[tool_call("ask_user", question="a"), tool_call("ask_user", question="b")], text("ok")]
    )
    await Agent("A", model=model, tools=[ask_user()]).run("go", handler=Concurrent())
    assert [m.content for m in model.requests[1] if isinstance(m, ToolResultMessage)] == ["A", "B"]


async def test_no_handler_resolves_at_once_as_unavailable() -> None:
    model = ScriptedModel([tool_call("ask_user", question="Anyone?"), text("fine")])
    result = await Agent("A", model=model, tools=[ask_user()]).run("go")
    assert result.output == "fine"
    answer = model.requests[1][-1]
    assert isinstance(answer, ToolResultMessage) and not answer.is_error
    assert answer.content.startswith("No user is available to answer right now.")


async def test_policy_error_fails_the_run_even_from_deep_parallel_calls() -> None:
    leaf = Agent(
        "Leaf", model=ScriptedModel([tool_call("ask_user", question="?")]), tools=[ask_user()]
    )
    root = Agent(
        "Root",
        model=ScriptedModel(
            [[tool_call("Leaf", query="x"), tool_call("ask_user", question="also?")]]
        ),
        tools=[leaf.as_tool(), ask_user()],
        on_unhandled="error",
    )
    with pytest.raises(NoUserAvailableError):
        await root.run("go")


async def test_base_handler_without_overrides_says_what_is_missing() -> None:
    agent, _ = picker()
    with pytest.raises(NotImplementedError, match="cannot answer 'text' questions"):
        await agent.run("go", handler=BaseHandler())


async def test_request_resolved_elsewhere_stops_the_handler_task() -> None:
    # The question expires while the handler is still "thinking": its task is cancelled and
    # the run completes instead of waiting for the handler.
    stopped = anyio.Event()

    class Slow(BaseHandler):
        async def on_request(self, request: RequestEvent) -> Any:
            try:
                await anyio.sleep_forever()
            finally:
                stopped.set()

    model = ScriptedModel([tool_call("ask_user", question="?"), text("moved on")])
    result = await Agent("A", model=model, tools=[ask_user(timeout=0.01)]).run("go", handler=Slow())
    assert result.output == "moved on"
    assert stopped.is_set()


async def test_a_handler_that_raises_run_cancelled_cancels_the_run() -> None:
    from hpd_agent import RunCancelledError
    from hpd_agent.events import ClarificationResolved

    class Leaves(Recorder):
        async def on_clarification(self, request: ClarificationRequest) -> Any:
            raise RunCancelledError("the human left")

    agent, model = picker()
    handler = Leaves([])
    result = await agent.run("go", handler=handler)
    assert result.status == "cancelled"
    resolved = [e for e in handler.events if isinstance(e, ClarificationResolved)]
    assert [e.status for e in resolved] == ["cancelled"]  # ended, never answered
    assert handler.events[-1].kind == "run_finished"
    assert len(model.requests) == 1  # the model never saw an answer
