"""``Run.deliver``: a run driven in the caller's task, each event handed to a callback as it
is emitted (no task of the run's own, no stream), with the block's semantics otherwise:
answers and ``cancel`` from other tasks, an outer cancellation or a failing callback leaving
a stored run resumable."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from hpd_agent import Agent, ask_user
from hpd_agent.events import ClarificationRequest, Event, RunFinished, TextDelta
from hpd_agent.exceptions import UserError
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import MemoryStore
from hpd_agent.testing import FunctionModel, ScriptedModel, Step, text, tool_call

pytestmark = pytest.mark.anyio

_BODY = "".join(f"{i:03d}" for i in range(200))


def _talker() -> Agent:
    return Agent("Talker", model=ScriptedModel([text(_BODY)], chunk_size=3))


def _asker() -> Agent:
    def step(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        if isinstance(messages[-1], ToolResultMessage):
            return text(f"using {messages[-1].content}")
        return tool_call("ask_user", question="Which database?")

    return Agent("Asker", model=FunctionModel(step), tools=[ask_user()])


def _shape(events: list[Event]) -> list[tuple[str, str]]:
    return [(type(e).__name__, e.text if isinstance(e, TextDelta) else "") for e in events]


async def test_events_are_delivered_in_order_in_the_callers_own_task() -> None:
    iterated: list[Event] = []
    async with _talker().stream("talk") as run:
        async for event in run:
            iterated.append(event)
    delivered: list[Event] = []
    tasks: set[int] = set()

    def sink(event: Event) -> None:
        delivered.append(event)
        tasks.add(anyio.get_current_task().id)

    with anyio.fail_after(5):
        result = await _talker().stream("talk").deliver(sink)
    assert _shape(delivered) == _shape(iterated)
    assert isinstance(delivered[-1], RunFinished)
    assert result.output == _BODY
    assert tasks == {anyio.get_current_task().id}  # no task of the run's own


async def test_a_question_is_answered_from_another_task_while_the_run_is_delivered() -> None:
    run = _asker().stream("go")
    async with anyio.create_task_group() as tg:

        def sink(event: Event) -> None:
            if isinstance(event, ClarificationRequest):
                tg.start_soon(run.respond, event.request_id, "Postgres")

        with anyio.fail_after(5):
            result = await run.deliver(sink)
        assert result.status == "completed" and result.output == "using Postgres"
        assert run.done and run.result is result


async def test_cancel_from_another_task_ends_a_delivered_run_cancelled() -> None:
    run = _asker().stream("go")

    def sink(event: Event) -> None:
        if isinstance(event, ClarificationRequest):
            run.cancel()

    with anyio.fail_after(5):
        result = await run.deliver(sink)
    assert result.status == "cancelled"


async def test_an_outer_cancellation_leaves_the_stored_request_resumable() -> None:
    store = MemoryStore()
    run = _asker().stream("go", store=store, run_id="run_d")
    with anyio.fail_after(5), anyio.CancelScope() as outer:

        def sink(event: Event) -> None:
            if isinstance(event, ClarificationRequest):
                outer.cancel()

        await run.deliver(sink)
    assert outer.cancelled_caught and run.result.status == "cancelled"
    (record,) = await store.list_requests(run_id="run_d")
    assert record.status == "pending"  # like a crash, not a cancel
    done = await _asker().resume("run_d", store=store, answers={record.request_id: "SQLite"})
    assert done.output == "using SQLite"


async def test_a_sink_that_raises_stops_the_run_and_its_error_is_raised() -> None:
    store = MemoryStore()
    run = _asker().stream("go", store=store, run_id="run_e")

    def sink(event: Event) -> None:
        if isinstance(event, ClarificationRequest):
            raise LookupError("the sink broke")

    with anyio.fail_after(5), pytest.raises(LookupError, match="the sink broke"):
        await run.deliver(sink)
    assert run.result.status == "cancelled"
    (record,) = await store.list_requests(run_id="run_e")
    assert record.status == "pending"  # the emitter never saw the error; the run is resumable


async def test_a_run_is_delivered_or_entered_once() -> None:
    run = _talker().stream("talk")
    await run.deliver(lambda event: None)
    with pytest.raises(UserError):
        await run.deliver(lambda event: None)
    with pytest.raises(UserError):
        async with run:
            pass
    with pytest.raises(UserError, match="before iterating"):
        await _talker().stream("talk").__anext__()
