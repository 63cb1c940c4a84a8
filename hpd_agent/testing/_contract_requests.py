"""The store contract (``store_contract``): requests, answers, the journal and run records."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

import anyio
import pytest

from ..events import ClarificationRequest, PermissionRequest
from ..exceptions import (
    AnswerRefusedError,
    InvalidAnswerError,
    RequestAlreadyAnsweredError,
    RequestCancelledError,
    RequestExpiredError,
    UnknownRequestError,
)
from ..permissions import Approve
from ..questions import Decline
from ..store import DEFAULT_LEASE_TTL, JournalEntry, RequestRecord, RunRecord, Store, respond

__all__ = [
    "StoreFactory",
    "contract_store",
    "permission",
    "question",
    "test_store_add_request_is_idempotent_and_round_trips",
    "test_store_answer_context_is_merged_key_by_key",
    "test_store_journal_and_run_records",
    "test_store_keeps_who_answered_once",
    "test_store_list_requests_filters_by_run_and_status",
    "test_store_permission_answers_are_checked_and_kept_as_json",
    "test_store_recover_expires_only_old_or_overdue_requests",
    "test_store_respond_refuses_each_case_with_a_distinct_error",
    "test_store_wait_resolved_wakes_when_answered",
]


class StoreFactory(Protocol):
    """The ``contract_store_factory`` fixture's value."""

    def __call__(self, *, lease_ttl: float) -> Store:
        """A new store object on a new, empty store, whose leases last ``lease_ttl``."""
        ...


@pytest.fixture
async def contract_store(contract_store_factory: StoreFactory) -> AsyncIterator[Store]:
    """A new store from ``contract_store_factory`` (the default lease TTL), closed after."""
    store = contract_store_factory(lease_ttl=DEFAULT_LEASE_TTL)
    try:
        yield store
    finally:
        await store.aclose()


def question(
    request_id: str, *, run_id: str = "run_1", options: tuple[str, ...] | None = None
) -> RequestRecord:
    """A pending question of ``run_id``, as a run would store it."""
    event = ClarificationRequest(
        run_id=run_id,
        agent_path=("Orchestrator", "CodingAgent"),
        depth=1,
        request_id=request_id,
        question="Which framework?",
        options=options,
    )
    return RequestRecord.from_event(event, context={"channel": "test"})


def permission(request_id: str) -> RequestRecord:
    """A pending permission request of ``run_1``."""
    event = PermissionRequest(
        run_id="run_1",
        agent_path=("Orchestrator",),
        depth=0,
        request_id=request_id,
        tool_name="write_file",
        arguments={"path": "a.txt"},
        tool_call_id="c1",
    )
    return RequestRecord.from_event(event)


@pytest.mark.anyio
async def test_store_add_request_is_idempotent_and_round_trips(contract_store: Store) -> None:
    store = contract_store
    record = question("req_a", options=("Express", "FastAPI"))
    assert await store.add_request(record) == record
    # A replay adding the same id gets the stored record back, unchanged.
    again = await store.add_request(question("req_a"))
    assert again.options == ("Express", "FastAPI")
    got = await store.get_request("req_a")
    assert got is not None
    assert got.agent_path == ("Orchestrator", "CodingAgent")
    assert got.event == record.event
    assert got.context == {"channel": "test"}
    assert await store.get_request("req_missing") is None


@pytest.mark.anyio
async def test_store_list_requests_filters_by_run_and_status(contract_store: Store) -> None:
    store = contract_store
    await store.add_request(question("req_1", run_id="run_a"))
    await store.add_request(question("req_2", run_id="run_b"))
    await store.add_request(question("req_3", run_id="run_a"))
    await store.resolve("req_3", "cancelled")
    assert [r.request_id for r in await store.list_requests()] == ["req_1", "req_2"]
    assert [r.request_id for r in await store.list_requests(run_id="run_a")] == ["req_1"]
    every = await store.list_requests(status=None, run_id="run_a")
    assert [r.request_id for r in every] == ["req_1", "req_3"]
    assert [r.request_id for r in await store.list_requests(status="cancelled")] == ["req_3"]


@pytest.mark.anyio
async def test_store_answer_context_is_merged_key_by_key(contract_store: Store) -> None:
    # The answer's context is laid over the stored one key by key: a key it names is
    # replaced whole (an object too, never merged into), a null kept as null.
    store = contract_store
    event = ClarificationRequest(
        run_id="run_1", agent_path=("A",), depth=0, request_id="req_ctx", question="Which?"
    )
    await store.add_request(
        RequestRecord.from_event(event, context={"channel": "test", "who": {"team": "x"}})
    )
    extra = {"who": {"name": "ana"}, "note": None, "n": 3}
    answered = await respond(store, "req_ctx", "Express", context=extra)
    # ``respond`` adds the answer's channel ("api": code answered): it replaces the stored one.
    expected = {"channel": "api", "who": {"name": "ana"}, "note": None, "n": 3}
    assert answered.context == expected
    stored = await store.get_request("req_ctx")
    assert stored is not None and stored.context == expected
    await store.add_request(question("req_flat"))
    await respond(store, "req_flat", "x", context={"sender": "ana", "n": 1.5, "ok": True})
    flat = await store.get_request("req_flat")
    assert flat is not None
    assert flat.context == {"channel": "api", "sender": "ana", "n": 1.5, "ok": True}


@pytest.mark.anyio
async def test_store_respond_refuses_each_case_with_a_distinct_error(
    contract_store: Store,
) -> None:
    store = contract_store
    for rid in ("req_ok", "req_exp", "req_can", "req_opt"):
        options = ("Express", "FastAPI") if rid == "req_opt" else None
        await store.add_request(question(rid, options=options))
    answered = await respond(store, "req_ok", "Express", context={"sender": "ana"})
    assert answered.status == "answered" and answered.answer == "Express"
    assert answered.answered_at is not None
    assert answered.context == {"channel": "api", "sender": "ana"}
    await store.resolve("req_exp", "expired")
    await store.resolve("req_can", "cancelled")
    # Each case its own error, from ``respond`` and from ``resolve`` alike.
    refused: list[tuple[type[Exception], str]] = [
        (UnknownRequestError, "req_nope"),
        (RequestAlreadyAnsweredError, "req_ok"),
        (RequestExpiredError, "req_exp"),
        (RequestCancelledError, "req_can"),
    ]
    for error, rid in refused:
        with pytest.raises(error):
            await respond(store, rid, "FastAPI")
        with pytest.raises(error):
            await store.resolve(rid, "answered", "FastAPI")
    with pytest.raises(InvalidAnswerError):
        await respond(store, "req_opt", "Django")
    # Refusals changed nothing.
    first = await store.get_request("req_ok")
    assert first is not None and first.answer == "Express"
    opt = await store.get_request("req_opt")
    assert opt is not None and opt.status == "pending"
    # An option is stored in its canonical spelling.
    assert (await respond(store, "req_opt", " fastapi ")).answer == "FastAPI"


@pytest.mark.anyio
async def test_store_permission_answers_are_checked_and_kept_as_json(
    contract_store: Store,
) -> None:
    store = contract_store
    await store.add_request(permission("req_p"))
    with pytest.raises(InvalidAnswerError):
        await respond(store, "req_p", "perhaps")
    record = await respond(store, "req_p", Approve(scope="run"))
    assert record.answer == {"scope": "run", "kind": "approve"}
    assert record.kind == "permission"
    stored = await store.get_request("req_p")
    assert stored is not None and stored.answer == {"scope": "run", "kind": "approve"}


class _OnlyAlice:
    """A policy letting only alice answer."""

    def allows(self, identity: str, request: RequestRecord) -> bool | str:
        return identity == "alice" or f"{identity} is not alice"


@pytest.mark.anyio
async def test_store_keeps_who_answered_once(contract_store: Store) -> None:
    # Who answered and on which channel are written with the answer (the context's
    # ``answered_by`` and ``channel``) and never overwritten; a policy's refusal writes nothing.
    store = contract_store
    for rid in ("req_who", "req_no", "req_exp", "req_pol"):
        await store.add_request(question(rid))
    answered = await respond(store, "req_who", "Express", by="alice", channel="cli")
    assert (answered.answered_by, answered.channel) == ("alice", "cli")
    assert answered.answered_at is not None
    with pytest.raises(RequestAlreadyAnsweredError):
        await respond(store, "req_who", "Koa", by="bob", channel="web")
    stored = await store.get_request("req_who")
    assert stored is not None and stored.answer == "Express"
    assert (stored.answered_by, stored.channel) == ("alice", "cli")
    declined = await respond(store, "req_no", Decline(), by="bob", channel="web")
    assert (declined.status, declined.answered_by, declined.channel) == ("declined", "bob", "web")
    await store.resolve("req_exp", "expired")
    expired = await store.get_request("req_exp")
    assert expired is not None and (expired.answered_by, expired.channel) == (None, None)
    with pytest.raises(AnswerRefusedError, match="bob is not alice"):
        await respond(store, "req_pol", "Express", by="bob", policy=_OnlyAlice())
    untouched = await store.get_request("req_pol")
    assert untouched is not None and untouched.status == "pending"
    assert untouched.context == {"channel": "test"} and untouched.answered_at is None
    taken = await respond(store, "req_pol", "Express", by="alice", policy=_OnlyAlice())
    assert (taken.status, taken.answered_by, taken.channel) == ("answered", "alice", "api")


@pytest.mark.anyio
async def test_store_wait_resolved_wakes_when_answered(contract_store: Store) -> None:
    store = contract_store
    await store.add_request(question("req_w"))
    got: list[Any] = []

    async def waiter() -> None:
        got.append((await store.wait_resolved("req_w")).answer)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            await respond(store, "req_w", "Express")
    assert got == ["Express"]
    with pytest.raises(UnknownRequestError):
        await store.wait_resolved("req_missing")


@pytest.mark.anyio
async def test_store_recover_expires_only_old_or_overdue_requests(contract_store: Store) -> None:
    store = contract_store
    now = time.time()
    await store.add_request(dataclasses.replace(question("req_old"), created_at=now - 3600))
    await store.add_request(question("req_new"))
    await store.add_request(dataclasses.replace(question("req_due"), expires_at=now - 1))
    assert sorted(await store.recover(max_age=600)) == ["req_due", "req_old"]
    with pytest.raises(RequestExpiredError):
        await respond(store, "req_old", "late")
    assert (await respond(store, "req_new", "Express")).status == "answered"
    # Only the run asked for, and ``now`` as the clock.
    await store.add_request(question("req_x", run_id="run_x"))
    await store.add_request(question("req_y", run_id="run_y"))
    later = time.time() + 7200
    assert await store.recover(max_age=600, run_id="run_x", now=later) == ["req_x"]
    still = await store.get_request("req_y")
    assert still is not None and still.status == "pending"


@pytest.mark.anyio
async def test_store_journal_and_run_records(contract_store: Store) -> None:
    store = contract_store
    await store.journal_put("run_1", JournalEntry(key="run_1@0", kind="model", value={"t": "hi"}))
    await store.journal_put("run_1", JournalEntry(key="run_1@0:c1", kind="tool", value="ok"))
    await store.journal_put("run_1", JournalEntry(key="run_1@0", kind="model", value={"t": "hey"}))
    await store.journal_put("run_2", JournalEntry(key="run_2@0", kind="model", value={}))
    journal = await store.journal("run_1")
    assert set(journal) == {"run_1@0", "run_1@0:c1"}
    assert journal["run_1@0"].value == {"t": "hey"} and journal["run_1@0:c1"].value == "ok"
    assert journal["run_1@0"].kind == "model"
    assert await store.journal("run_none") == {}

    first = RunRecord(run_id="run_1", agent_name="A", prompt="p", created_at=1.0)
    await store.put_run(first)
    await store.put_run(RunRecord(run_id="run_2", agent_name="A", prompt="q", created_at=2.0))
    await store.put_run(dataclasses.replace(first, status="completed", output="done"))
    run = await store.get_run("run_1")
    assert run is not None and run.status == "completed" and run.output == "done"
    assert run.prompt == "p" and run.agent_name == "A"
    assert await store.get_run("run_x") is None
    assert [r.run_id for r in await store.list_runs()] == ["run_1", "run_2"]
    assert [r.run_id for r in await store.list_runs(status="running")] == ["run_2"]
