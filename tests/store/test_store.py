"""The ``Store`` contract, on every backend: MemoryStore, SQLiteStore (a real file) and
PostgresStore (a real server on 127.0.0.1)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent import Approve
from hpd_agent.events import ClarificationRequest, PermissionRequest
from hpd_agent.exceptions import (
    InvalidAnswerError,
    RequestAlreadyAnsweredError,
    RequestCancelledError,
    RequestExpiredError,
    UnknownRequestError,
)
from hpd_agent.store import (
    JournalEntry,
    MemoryStore,
    RequestRecord,
    RunRecord,
    SQLiteStore,
    Store,
    respond,
)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    backend = request.param
    if backend == "memory":
        s: Store = MemoryStore()
    elif backend == "sqlite":
        s = SQLiteStore(tmp_path / "store.db")
    else:
        from hpd_agent.store import PostgresStore

        s = PostgresStore(request.getfixturevalue("fresh_postgres"))
    yield s
    anyio.run(s.aclose)


pytestmark = pytest.mark.anyio


def question(
    rid: str, *, run_id: str = "run_1", options: tuple[str, ...] | None = None
) -> RequestRecord:
    event = ClarificationRequest(
        run_id=run_id,
        agent_path=("Orchestrator", "CodingAgent"),
        depth=1,
        request_id=rid,
        question="Which framework?",
        options=options,
    )
    return RequestRecord.from_event(event, context={"channel": "test"})


def permission(rid: str) -> RequestRecord:
    event = PermissionRequest(
        run_id="run_1",
        agent_path=("Orchestrator",),
        depth=0,
        request_id=rid,
        tool_name="write_file",
        arguments={"path": "a.txt"},
        tool_call_id="c1",
    )
    return RequestRecord.from_event(event)


async def test_add_is_idempotent_and_round_trips(store: Store) -> None:
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


async def test_list_requests_filters_by_run_and_status(store: Store) -> None:
    await store.add_request(question("req_1", run_id="run_a"))
    await store.add_request(question("req_2", run_id="run_b"))
    await store.add_request(question("req_3", run_id="run_a"))
    await store.resolve("req_3", "cancelled")
    assert [r.request_id for r in await store.list_requests()] == ["req_1", "req_2"]
    assert [r.request_id for r in await store.list_requests(run_id="run_a")] == ["req_1"]
    assert [r.request_id for r in await store.list_requests(status=None, run_id="run_a")] == [
        "req_1",
        "req_3",
    ]
    assert [r.request_id for r in await store.list_requests(status="cancelled")] == ["req_3"]


async def test_answer_context_is_merged_key_by_key_and_read_back_as_written(store: Store) -> None:
    # The answer's context is laid over the stored one key by key: a key it names is
    # replaced whole (an object too, never merged into), a null kept as null.
    event = ClarificationRequest(
        run_id="run_1", agent_path=("A",), depth=0, request_id="req_ctx", question="Which?"
    )
    await store.add_request(
        RequestRecord.from_event(event, context={"channel": "test", "who": {"team": "x"}})
    )
    extra = {"who": {"name": "ana"}, "note": None, "n": 3}
    answered = await respond(store, "req_ctx", "Express", context=extra)
    expected = {"channel": "test", "who": {"name": "ana"}, "note": None, "n": 3}
    assert answered.context == expected
    stored = await store.get_request("req_ctx")
    assert stored is not None and stored.context == expected
    await store.add_request(question("req_flat"))
    await respond(store, "req_flat", "x", context={"sender": "ana", "n": 1.5, "ok": True})
    flat = await store.get_request("req_flat")
    assert flat is not None
    assert flat.context == {"channel": "test", "sender": "ana", "n": 1.5, "ok": True}


async def test_respond_refuses_each_case_with_a_distinct_error(store: Store) -> None:
    for rid in ("req_ok", "req_exp", "req_can", "req_opt"):
        await store.add_request(
            question(rid, options=("Express", "FastAPI") if rid == "req_opt" else None)
        )
    answered = await respond(store, "req_ok", "Express", context={"sender": "ana"})
    assert answered.status == "answered" and answered.answer == "Express"
    assert answered.answered_at is not None
    assert answered.context == {"channel": "test", "sender": "ana"}
    await store.resolve("req_exp", "expired")
    await store.resolve("req_can", "cancelled")

    with pytest.raises(UnknownRequestError):
        await respond(store, "req_nope", "x")
    with pytest.raises(RequestAlreadyAnsweredError):
        await respond(store, "req_ok", "FastAPI")
    with pytest.raises(RequestExpiredError):
        await respond(store, "req_exp", "late")
    with pytest.raises(RequestCancelledError):
        await respond(store, "req_can", "x")
    with pytest.raises(InvalidAnswerError):
        await respond(store, "req_opt", "Django")
    # Refusals changed nothing.
    first = await store.get_request("req_ok")
    assert first is not None and first.answer == "Express"
    opt = await store.get_request("req_opt")
    assert opt is not None and opt.status == "pending"
    # An option is stored in its canonical spelling.
    assert (await respond(store, "req_opt", " fastapi ")).answer == "FastAPI"


async def test_permission_answers_are_validated_and_stored_as_json(store: Store) -> None:
    await store.add_request(permission("req_p"))
    with pytest.raises(InvalidAnswerError):
        await respond(store, "req_p", "perhaps")
    record = await respond(store, "req_p", Approve(scope="run"))
    assert record.answer == {"scope": "run", "kind": "approve"}
    assert record.kind == "permission"


async def test_wait_resolved_wakes_when_answered(store: Store) -> None:
    await store.add_request(question("req_w"))
    got: list[str] = []

    async def waiter() -> None:
        record = await store.wait_resolved("req_w")
        got.append(record.answer)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await respond(store, "req_w", "Express")
    assert got == ["Express"]
    with pytest.raises(UnknownRequestError):
        await store.wait_resolved("req_missing")


async def test_recover_expires_only_old_or_overdue_requests(store: Store) -> None:
    now = time.time()
    old = question("req_old")
    await store.add_request(RequestRecord(**{**_fields(old), "created_at": now - 3600}))
    await store.add_request(question("req_new"))
    overdue = question("req_due")
    await store.add_request(RequestRecord(**{**_fields(overdue), "expires_at": now - 1}))
    expired = await store.recover(max_age=600)
    assert sorted(expired) == ["req_due", "req_old"]
    with pytest.raises(RequestExpiredError):
        await respond(store, "req_old", "late")
    assert (await respond(store, "req_new", "Express")).status == "answered"


async def test_journal_and_runs(store: Store) -> None:
    await store.journal_put(
        "run_1", JournalEntry(key="run_1@0", kind="model", value={"text": "hi"})
    )
    await store.journal_put(
        "run_1", JournalEntry(key="run_1@0:c1", kind="tool", value={"result": "ok"})
    )
    await store.journal_put(
        "run_1", JournalEntry(key="run_1@0", kind="model", value={"text": "hey"})
    )
    await store.journal_put("run_2", JournalEntry(key="run_2@0", kind="model", value={}))
    journal = await store.journal("run_1")
    assert set(journal) == {"run_1@0", "run_1@0:c1"}
    assert journal["run_1@0"].value == {"text": "hey"}
    assert await store.journal("run_none") == {}

    await store.put_run(RunRecord(run_id="run_1", agent_name="A", prompt="p", created_at=1.0))
    await store.put_run(RunRecord(run_id="run_2", agent_name="A", prompt="q", created_at=2.0))
    await store.put_run(
        RunRecord(
            run_id="run_1",
            agent_name="A",
            prompt="p",
            status="completed",
            output="done",
            created_at=1.0,
        )
    )
    run = await store.get_run("run_1")
    assert run is not None and run.status == "completed" and run.output == "done"
    assert await store.get_run("run_x") is None
    assert [r.run_id for r in await store.list_runs()] == ["run_1", "run_2"]
    assert [r.run_id for r in await store.list_runs(status="running")] == ["run_2"]


def _fields(record: RequestRecord) -> dict[str, object]:
    return {f: getattr(record, f) for f in record.__dataclass_fields__}
