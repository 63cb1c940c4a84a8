"""Declining a request: ``run.respond(request_id, Decline())`` ends any request "declined".

The asking tool gets ``QuestionNotAnswered(status="declined")``; left uncaught, the model
reads a tool result saying the user declined, and the run goes on. A decline is atomic like
any answer: an ended request refuses it (and refuses an answer after it) with the distinct
errors, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

import hpd_agent
from hpd_agent import (
    Agent,
    ClarificationRequest,
    ClarificationResolved,
    Decline,
    Event,
    Hook,
    PermissionRequest,
    PermissionResolved,
    QuestionNotAnswered,
    RequestAlreadyAnsweredError,
    RequestCancelledError,
    RequestEvent,
    RequestExpiredError,
    ToolContext,
    UnknownRequestError,
    ask_user,
    tool,
)
from hpd_agent.events import RequestStatus
from hpd_agent.messages import ToolResultMessage
from hpd_agent.store import MemoryStore, Store
from hpd_agent.testing import ScriptedModel, text, tool_call

Ask = Callable[[ToolContext], Awaitable[Any]]

# One asking call per question kind: each must end "declined" when declined.
ASKS: dict[str, Ask] = {
    "text": lambda ctx: ctx.ask("Colour?"),
    "text-options": lambda ctx: ctx.ask("Colour?", options=["red", "blue"]),
    "input": lambda ctx: ctx.ask_input("email"),
    "choice": lambda ctx: ctx.ask_choice("Which?", ["a", "b"]),
    "choice-multiple": lambda ctx: ctx.ask_choice("Which?", ["a", "b"], multiple=True),
    "confirm": lambda ctx: ctx.confirm("Sure?"),
    "action": lambda ctx: ctx.ask_action("https://example.invalid/auth", label="Sign in"),
    "custom": lambda ctx: ctx.ask_custom("pick", "Range?", schema={"type": "object"}),
}


def _asking_agent(ask: Ask, seen: list[QuestionNotAnswered]) -> tuple[Agent, ScriptedModel]:
    @tool
    async def probe(ctx: ToolContext) -> str:
        """Ask the human one question."""
        try:
            return f"answered {await ask(ctx)!r}"
        except QuestionNotAnswered as e:
            seen.append(e)
            raise

    model = ScriptedModel([tool_call("probe"), text("went on")])
    return Agent("A", model=model, tools=[probe]), model


async def _declining(
    agent: Agent, store: Store | None = None
) -> tuple[list[Event], hpd_agent.RunResult]:
    """Run ``agent``, declining every request it raises; its events and result."""
    events: list[Event] = []
    with anyio.fail_after(10):
        async with agent.stream("go", store=store) as run:
            async for event in run:
                events.append(event)
                if isinstance(event, (ClarificationRequest, PermissionRequest)):
                    assert await run.respond(event.request_id, Decline()) == Decline()
    return events, run.result


@pytest.fixture(params=["memory", "memory-store"])
def store(request: pytest.FixtureRequest) -> Store | None:
    # In memory (the hot path), and through a durable backend (the store decides).
    return None if request.param == "memory" else MemoryStore()


def test_decline_is_a_frozen_value_at_the_top_level() -> None:
    assert hpd_agent.Decline is Decline is hpd_agent.questions.Decline
    assert Decline() == Decline()
    with pytest.raises(AttributeError):
        Decline().kind = "x"  # type: ignore[misc]


@pytest.mark.parametrize("kind", list(ASKS))
async def test_every_question_kind_can_be_declined(kind: str, store: Store | None) -> None:
    seen: list[QuestionNotAnswered] = []
    agent, model = _asking_agent(ASKS[kind], seen)
    events, result = await _declining(agent, store)
    assert result.status == "completed" and result.output == "went on"
    (error,) = seen
    assert error.status == "declined" and str(error) == "The user declined to answer."
    (request,) = [e for e in events if isinstance(e, ClarificationRequest)]
    (resolved,) = [e for e in events if isinstance(e, ClarificationResolved)]
    assert (resolved.request_id, resolved.status, resolved.answer) == (
        request.request_id,
        "declined",
        None,
    )
    assert error.request_id == request.request_id
    # The loop turned the uncaught QuestionNotAnswered into a plain tool result.
    last = model.requests[1][-1]
    assert isinstance(last, ToolResultMessage) and not last.is_error
    assert last.content.startswith("The user declined to answer.")
    if store is not None:
        record = await store.get_request(request.request_id)
        assert record is not None and (record.status, record.answer) == ("declined", None)


async def test_ask_user_tells_the_model_the_user_declined(store: Store | None) -> None:
    model = ScriptedModel([tool_call("ask_user", question="Which port?"), text("assumed 80")])
    agent = Agent("A", model=model, tools=[ask_user()])
    events, result = await _declining(agent, store)
    assert result.output == "assumed 80"
    last = model.requests[1][-1]
    assert isinstance(last, ToolResultMessage) and not last.is_error
    assert last.content == (
        "The user declined to answer. Do not ask again now; continue with your best "
        "judgement and state the assumptions you make."
    )
    assert [e.status for e in events if isinstance(e, ClarificationResolved)] == ["declined"]


async def test_a_declined_permission_keeps_the_tool_from_running(store: Store | None) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    async def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    model = ScriptedModel([tool_call("delete", path="/tmp/x"), text("left it")])
    events, result = await _declining(Agent("A", model=model, tools=[delete]), store)
    assert ran == [] and result.output == "left it"
    (resolved,) = [e for e in events if isinstance(e, PermissionResolved)]
    assert (resolved.status, resolved.approved, resolved.scope) == ("declined", False, None)
    last = model.requests[1][-1]
    assert isinstance(last, ToolResultMessage) and not last.is_error
    assert last.content == (
        "The tool 'delete' did not run: the user declined to answer whether it may run."
    )


class _Observer(Hook):
    def __init__(self) -> None:
        self.ended: list[tuple[str, RequestStatus, Any]] = []

    def request_resolved(self, event: RequestEvent, status: RequestStatus, answer: Any) -> None:
        self.ended.append((event.request_id, status, answer))


async def test_hooks_observe_the_decline(store: Store | None) -> None:
    observer = _Observer()
    model = ScriptedModel([tool_call("ask_user", question="Q?"), text("ok")])
    agent = Agent("A", model=model, tools=[ask_user()])
    events: list[Event] = []
    async with agent.stream("go", store=store, hooks=[observer]) as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ClarificationRequest):
                await run.respond(event.request_id, Decline())
    (request,) = [e for e in events if isinstance(e, ClarificationRequest)]
    assert observer.ended == [(request.request_id, "declined", None)]


# -- atomic: every refusal is distinct and changes nothing ---------------------------------------
def _asker(timeout: float | None = None) -> Agent:
    model = ScriptedModel([tool_call("ask_user", question="Colour?"), text("done")])
    return Agent("A", model=model, tools=[ask_user(timeout=timeout)])


async def _refusals_after(
    first: Any, store: Store | None
) -> tuple[list[Event], list[type[BaseException]], Any]:
    """Give ``first`` to the question, then a decline, an answer and a decline again."""
    events: list[Event] = []
    refused: list[type[BaseException]] = []
    accepted: Any = None
    with anyio.fail_after(10):
        async with _asker().stream("go", store=store) as run:
            async for event in run:
                events.append(event)
                if isinstance(event, ClarificationRequest):
                    rid = event.request_id
                    accepted = await run.respond(rid, first)
                    for late in (Decline(), "red", Decline()):
                        try:
                            await run.respond(rid, late)
                        except hpd_agent.RequestError as e:
                            refused.append(type(e))
                    with pytest.raises(UnknownRequestError):
                        await run.respond("no-such-request", Decline())
    return events, refused, accepted


async def test_a_decline_or_an_answer_after_a_decline_is_refused(store: Store | None) -> None:
    events, refused, accepted = await _refusals_after(Decline(), store)
    assert accepted == Decline()
    assert refused == [RequestAlreadyAnsweredError] * 3
    resolved = [e for e in events if isinstance(e, ClarificationResolved)]
    assert [(e.status, e.answer) for e in resolved] == [("declined", None)]
    if store is not None:
        record = await store.get_request(resolved[0].request_id)
        assert record is not None and record.status == "declined"


async def test_a_decline_after_an_answer_is_refused(store: Store | None) -> None:
    events, refused, accepted = await _refusals_after("blue", store)
    assert accepted == "blue"
    assert refused == [RequestAlreadyAnsweredError] * 3
    resolved = [e for e in events if isinstance(e, ClarificationResolved)]
    assert [(e.status, e.answer) for e in resolved] == [("answered", "blue")]
    if store is not None:
        record = await store.get_request(resolved[0].request_id)
        assert record is not None and (record.status, record.answer) == ("answered", "blue")


async def test_a_decline_after_expiry_is_refused(store: Store | None) -> None:
    refused: list[BaseException] = []
    with anyio.fail_after(10):
        async with _asker(timeout=0.01).stream("go", store=store) as run:
            async for event in run:
                if isinstance(event, ClarificationResolved):
                    assert event.status == "expired"
                    with pytest.raises(RequestExpiredError) as caught:
                        await run.respond(event.request_id, Decline())
                    refused.append(caught.value)
    assert len(refused) == 1 and run.result.status == "completed"


async def test_a_decline_after_cancel_is_refused(store: Store | None) -> None:
    with anyio.fail_after(10):
        async with _asker().stream("go", store=store) as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    run.cancel_request(event.request_id)
                    with pytest.raises(RequestCancelledError):
                        await run.respond(event.request_id, Decline())
                if isinstance(event, ClarificationResolved):
                    assert event.status == "cancelled"
    assert run.result.status == "completed"


async def test_respond_nowait_declines_from_the_event_sink() -> None:
    seen: list[QuestionNotAnswered] = []
    agent, _ = _asking_agent(ASKS["confirm"], seen)
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                assert run.coordinator.respond_nowait(event.request_id, Decline()) == Decline()
    assert [e.status for e in seen] == ["declined"]
