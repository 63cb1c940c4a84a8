"""The store contract (``store_contract``): runs through the store (sessions, leases, resume)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from ..agent import Agent
from ..clarification import ask_user
from ..events import ClarificationRequest
from ..exceptions import InvalidAnswerError, RunLeasedError, UserError
from ..messages import Message, ToolResultMessage
from ..models._base import ModelRequestParams
from ..store import Lease, Store, cancel_run, respond
from ..tools import tool
from ._contract_requests import StoreFactory
from ._models import FunctionModel, ScriptedModel, Step, text, tool_call

__all__ = [
    "test_store_a_cancelled_run_releases_its_lease",
    "test_store_a_new_run_on_a_kept_id_is_refused_and_takes_no_lease",
    "test_store_a_new_run_on_a_leased_id_is_refused_and_writes_nothing",
    "test_store_a_refused_resume_gives_the_lease_back",
    "test_store_a_run_holds_its_lease_while_it_runs_and_releases_it",
    "test_store_a_run_that_loses_its_lease_stops_and_writes_nothing_more",
    "test_store_an_answer_through_the_store_wakes_the_waiting_run",
    "test_store_an_interrupted_run_resumes_and_runs_nothing_twice",
    "test_store_cancel_run_stops_a_run_waiting_for_a_human",
]

RENEWED_TTL = 0.3
"""A lease this short is renewed several times while a test watches (every 0.1 s)."""


def _asking() -> Agent:
    model = ScriptedModel([tool_call("ask_user", question="Go?"), text("went")])
    return Agent("Asker", model=model, tools=[ask_user()])


def _last_result(messages: Sequence[Message]) -> str:
    return next(m.content for m in reversed(messages) if isinstance(m, ToolResultMessage))


def _builder(calls: list[str], effects: list[str]) -> Agent:
    """A depth-2 tree: the Coder runs ``record`` and asks a question in one turn; every
    model turn is noted in ``calls``, every run of the side effect in ``effects``."""

    @tool
    def record(line: str) -> str:
        """Record a step (a side effect that must run once)."""
        effects.append(line)
        return "recorded"

    def coder(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        calls.append(f"coder@{info.turn}")
        if info.turn == 0:
            return [
                tool_call("record", _id="step", line="scaffolded"),
                tool_call("ask_user", _id="ask", question="Which framework?"),
            ]
        return text("built with " + _last_result(messages))

    def top(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        calls.append(f"top@{info.turn}")
        if info.turn == 0:
            return tool_call("Coder", _id="delegate", query="Build it")
        return text("Top: " + _last_result(messages))

    coding = Agent("Coder", model=FunctionModel(coder), tools=[record, ask_user()])
    return Agent("Top", model=FunctionModel(top), tools=[coding.as_tool()])


async def _changed(store: Store, run_id: str, was: Lease | None) -> Lease | None:
    """The run's lease once it differs from ``was`` (bounded)."""
    with anyio.fail_after(10):
        for _ in range(10_000):  # a renewal is due every third of the TTL: look until then
            now = await store.get_lease(run_id)
            if now != was:
                return now
            await anyio.sleep(0.02)
    raise AssertionError(f"the lease of {run_id} did not change")


@pytest.mark.anyio
async def test_store_an_interrupted_run_resumes_and_runs_nothing_twice(
    contract_store: Store,
) -> None:
    store = contract_store
    calls: list[str] = []
    effects: list[str] = []
    result = await _builder(calls, effects).run("go", store=store, on_unhandled="interrupt")
    assert result.status == "interrupted"
    (pending,) = result.pending
    assert isinstance(pending, ClarificationRequest)
    assert pending.agent_path == ("Top", "Coder")
    stored = await store.list_requests(run_id=result.run_id)
    assert [r.request_id for r in stored] == [pending.request_id]
    run = await store.get_run(result.run_id)
    assert run is not None and run.status == "interrupted" and run.agent_name == "Top"
    assert await store.get_lease(result.run_id) is None
    # A resume without the answer interrupts again on the same request, running nothing.
    again = await _builder(calls, effects).resume(
        result.run_id, store=store, on_unhandled="interrupt"
    )
    assert [p.request_id for p in again.pending] == [pending.request_id]
    resumed = await _builder(calls, effects).resume(
        result.run_id, store=store, answers={pending.request_id: "FastAPI"}
    )
    assert resumed.output == "Top: built with FastAPI"
    assert effects == ["scaffolded"]  # once, across three lives
    assert calls == ["top@0", "coder@0", "coder@1", "top@1"]  # no model turn twice
    run = await store.get_run(result.run_id)
    assert run is not None and run.status == "completed" and run.output == resumed.output
    # Resuming a finished run replays it whole: the same output, still no model call.
    assert (await _builder(calls, effects).resume(result.run_id, store=store)).output == (
        resumed.output
    )
    assert len(calls) == 4


@pytest.mark.anyio
async def test_store_an_answer_through_the_store_wakes_the_waiting_run(
    contract_store: Store,
) -> None:
    # No handler: with a store, the run waits for an answer from anywhere (here: written
    # to the store by ``respond``, not given to the run).
    store = contract_store
    with anyio.fail_after(30):
        async with _asking().stream("go", store=store, run_id="run_hot") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    (pending,) = await store.list_requests(run_id="run_hot")
                    assert pending.request_id == event.request_id
                    await respond(store, event.request_id, "yes", context={"sender": "ops"})
    assert run.result.output == "went"
    (record,) = await store.list_requests(run_id="run_hot", status=None)
    assert record.status == "answered" and record.answer == "yes"
    assert record.context["sender"] == "ops"


@pytest.mark.anyio
async def test_store_a_run_holds_its_lease_while_it_runs_and_releases_it(
    contract_store_factory: StoreFactory,
) -> None:
    store = contract_store_factory(lease_ttl=RENEWED_TTL)
    try:
        async with _asking().stream("go", store=store, run_id="r1") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    held = await store.get_lease("r1")
                    assert held is not None
                    # Kept alive past its first expiry (renewed every third of its TTL).
                    renewed = await _changed(store, "r1", held)
                    assert renewed is not None and renewed.holder == held.holder
                    assert renewed.expires_at > held.expires_at
                    await run.respond(event.request_id, "yes")
        assert run.result.output == "went"
        assert await store.get_lease("r1") is None
        record = await store.get_run("r1")
        assert record is not None and record.status == "completed" and record.output == "went"
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_store_a_cancelled_run_releases_its_lease(contract_store: Store) -> None:
    store = contract_store
    async with _asking().stream("go", store=store, run_id="r2") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                run.cancel()
    assert run.result.status == "cancelled"
    assert await store.get_lease("r2") is None
    (asked,) = await store.list_requests(run_id="r2", status=None)
    assert asked.status == "cancelled"
    record = await store.get_run("r2")
    assert record is not None and record.status == "cancelled"


@pytest.mark.anyio
async def test_store_a_refused_resume_gives_the_lease_back(contract_store: Store) -> None:
    store = contract_store
    model = ScriptedModel([tool_call("ask_user", question="Pick", options=["a", "b"])])
    agent = Agent("Asker", model=model, tools=[ask_user()])
    result = await agent.run("go", store=store, run_id="r3", on_unhandled="interrupt")
    (pending,) = result.pending
    with pytest.raises(InvalidAnswerError):
        await agent.resume("r3", store=store, answers={pending.request_id: "zzz"})
    assert await store.get_lease("r3") is None
    record = await store.get_request(pending.request_id)
    assert record is not None and record.status == "pending"


@pytest.mark.anyio
async def test_store_a_run_that_loses_its_lease_stops_and_writes_nothing_more(
    contract_store: Store,
) -> None:
    store = contract_store
    with anyio.fail_after(20), pytest.raises(RunLeasedError) as lost:
        async with _asking().stream("go", store=store, run_id="r4") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    # Another holder takes the lease (as another process would after
                    # this one stalled past its expiry).
                    mine = await store.get_lease("r4")
                    assert mine is not None
                    await store.release_lease("r4", mine.holder)
                    await store.take_lease("r4", "thief:9:z", 60)
    assert lost.value.holder == "thief:9:z" and lost.value.lost
    record = await store.get_run("r4")
    assert record is not None and record.status == "running"  # left to the new holder
    (asked,) = await store.list_requests(run_id="r4")
    assert asked.status == "pending"
    thief = await store.get_lease("r4")
    assert thief is not None and thief.holder == "thief:9:z"


@pytest.mark.anyio
async def test_store_a_new_run_on_a_leased_id_is_refused_and_writes_nothing(
    contract_store: Store,
) -> None:
    store = contract_store
    await store.take_lease("busy", "other:1:x", 60)
    with pytest.raises(RunLeasedError) as refused:
        await _asking().run("go", store=store, run_id="busy")
    assert refused.value.holder == "other:1:x"
    assert await store.get_run("busy") is None  # no record without the lease
    lease = await store.get_lease("busy")
    assert lease is not None and lease.holder == "other:1:x"


@pytest.mark.anyio
async def test_store_a_new_run_on_a_kept_id_is_refused_and_takes_no_lease(
    contract_store: Store,
) -> None:
    store = contract_store
    await _asking().run("go", store=store, run_id="kept", on_unhandled="interrupt")
    with pytest.raises(UserError, match="already in"):
        await _asking().run("again", store=store, run_id="kept")
    assert await store.get_lease("kept") is None
    record = await store.get_run("kept")
    assert record is not None and record.prompt == "go" and record.status == "interrupted"


@pytest.mark.anyio
async def test_store_cancel_run_stops_a_run_waiting_for_a_human(contract_store: Store) -> None:
    store = contract_store
    calls: list[str] = []

    def reply(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        calls.append("model")
        if not any(isinstance(m, ToolResultMessage) for m in messages):
            return tool_call("ask_user", question="Which region?")
        return text("deployed")

    agent = Agent("Deployer", model=FunctionModel(reply), tools=[ask_user()])
    with pytest.raises(RunLeasedError) as lost:  # the driver stopped where it waited
        async with agent.stream("deploy", store=store, run_id="run-c") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    with anyio.fail_after(30):
                        assert (await cancel_run(store, "run-c")).status == "cancelled"
    assert lost.value.lost
    assert calls == ["model"]  # fenced out at once: its model was not asked again
    record = await store.get_run("run-c")
    assert record is not None and record.status == "cancelled"
    (asked,) = await store.list_requests(run_id="run-c", status=None)
    assert asked.status == "cancelled"
    assert await store.get_lease("run-c") is None  # given up
    assert (await cancel_run(store, "run-c")).status == "cancelled"  # again: unchanged
    with pytest.raises(UserError, match="no run 'nope'"):
        await cancel_run(store, "nope")
