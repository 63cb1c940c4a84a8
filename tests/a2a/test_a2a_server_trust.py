"""``create_app`` at its trust edges, with a2a-sdk's own client: two answers racing for one
question, refusals that quote at most a bounded piece of the answer, a body nested too
deep to read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import Client
from a2a.types import GetTaskRequest, ListTasksRequest, SendMessageRequest, Task
from a2a.utils.errors import A2AError
from a2a_ours import (
    COMPLETED,
    INPUT_REQUIRED,
    artifact_text,
    named_callers,
    our_server,
    sdk_client,
    send,
    served_client,
    status_metadata,
    status_text,
    user_message,
)
from a2a_served_agents import asker, counted, planner

from hpd_agent.a2a._tasks import TASK_RUN_PREFIX
from hpd_agent.store import JournalEntry, SQLiteStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK client


@pytest.fixture(autouse=True)
def counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_A2A_TEST_DIR", str(tmp_path))
    return tmp_path


async def _answer(client: Client, task: Task, answer: str, got: dict[str, Any]) -> None:
    """Send ``answer`` in ``task``; what came back (the last event, or the error)."""
    try:
        request = SendMessageRequest(message=user_message(answer, task=task))
        async for event in client.send_message(request):
            got[answer] = event
    except Exception as e:
        got[answer] = e


@pytest.mark.parametrize("streaming", [True, False])
async def test_two_answers_at_once_one_wins_and_the_task_completes(streaming: bool) -> None:
    # The race is between the run ending and the second answer finding it: a few tries.
    async with served_client(planner, streaming=streaming) as client:
        for _ in range(5):
            task = (await send(client, user_message("a shop"))).task
            assert task.status.state == INPUT_REQUIRED
            got: dict[str, Any] = {}
            async with anyio.create_task_group() as tg:
                for answer in ("SQLite", "PostgreSQL"):
                    tg.start_soon(_answer, client, task, answer, got)
            final = await client.get_task(GetTaskRequest(id=task.id))
            assert final.status.state == COMPLETED, final.status
            assert artifact_text(final) in (
                "Plan: The user chose SQLite.",
                "Plan: The user chose PostgreSQL.",
            )
            for outcome in got.values():
                if isinstance(outcome, Exception):  # the loser, told the task has ended
                    said = str(outcome)
                    assert "already ended" in said or "terminal state" in said, said
    # One answer taken per task: the Clarifier went on once, the Planner finished once.
    assert counted("effect") == ["survey db"] * 5
    assert counted("model").count("Planner") == 10


async def test_a_refused_answer_is_quoted_back_bounded() -> None:
    huge = "x" * 2_000_000
    async with served_client(asker, streaming=False) as client:
        task = (await send(client, user_message("permission"))).task
        rid = status_metadata(task)["request_id"]
        refused = (await send(client, user_message(huge, task=task))).task
        meta = status_metadata(refused)
        unknown = user_message("deny", task=task, metadata={"request_id": huge})
        unknown_refused = (await send(client, unknown)).task
        done = (await send(client, user_message("approve_once", task=task))).task
    assert refused.status.state == INPUT_REQUIRED
    assert meta["request_id"] == rid  # asked again
    assert meta["error"].startswith("the answer must be one of approve_once, approve_run, deny")
    assert "[truncated 1,999,8" in meta["error"]
    assert len(meta["error"]) < 400 and len(status_text(refused)) < 500
    # An unknown request id is quoted as boundedly (it is the client's text too).
    unknown_meta = status_metadata(unknown_refused)
    assert "no question with request_id" in unknown_meta["error"]
    assert len(unknown_meta["error"]) < 400 and len(status_text(unknown_refused)) < 500
    assert done.status.state == COMPLETED
    assert artifact_text(done) == "answer: deployed to prod"


async def test_an_answer_nested_too_deep_is_refused_and_the_question_stays_open() -> None:
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    with our_server(asker) as url:
        client = await sdk_client(url, streaming=False)
        task = (await send(client, user_message("permission"))).task
        message = {
            "role": "ROLE_USER",
            "messageId": "deep-1",
            "taskId": task.id,
            "contextId": task.context_id,
            "parts": [{"data": "DEEP"}],
        }
        call = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": message}}
        body = json.dumps(call).replace('"DEEP"', deep)
        async with httpx.AsyncClient(timeout=60) as http:
            refused = await http.post(
                url + "/", content=body, headers={"Content-Type": "application/json"}
            )
        still = await client.get_task(GetTaskRequest(id=task.id))
        # Brackets inside a string are text, not nesting: an ordinary (refused) answer.
        brackets = (await send(client, user_message("{[" * 300, task=task))).task
        done = (await send(client, user_message("approve_once", task=task))).task
    error = refused.json()["error"]
    assert error["code"] == -32600, error
    assert error["message"] == "invalid request: the JSON nests deeper than 100 levels"
    assert still.status.state == INPUT_REQUIRED
    assert status_metadata(brackets)["error"].startswith("the answer must be one of")
    assert done.status.state == COMPLETED


async def test_a_kept_task_is_read_back_for_its_owner_only(tmp_path: Path) -> None:
    """With named callers (an authentication middleware), a restarted server reads a task
    back from the store for the caller who owns it, not for another (one shared token makes
    every caller the same owner: docs/a2a.md)."""
    db = str(tmp_path / "runs.db")
    alice, bob = {"X-Test-User": "alice"}, {"X-Test-User": "bob"}
    with our_server(planner, store=db, wrap=named_callers) as url:
        task = (await send(await sdk_client(url, headers=alice), user_message("a shop"))).task
        listed = await (await sdk_client(url, headers=bob)).list_tasks(ListTasksRequest())
    assert task.status.state == INPUT_REQUIRED and list(listed.tasks) == []
    with our_server(planner, store=db, wrap=named_callers) as url:  # restarted
        with pytest.raises(A2AError):
            await (await sdk_client(url, headers=bob)).get_task(GetTaskRequest(id=task.id))
        as_alice = await sdk_client(url, headers=alice)
        again = await as_alice.get_task(GetTaskRequest(id=task.id))
        done = (await send(as_alice, user_message("SQLite", task=task))).task
    assert again.status.state == INPUT_REQUIRED
    assert done.status.state == COMPLETED


async def test_a_task_kept_before_owners_were_is_the_unnamed_callers(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    with our_server(planner, store=db) as url:
        task = (await send(await sdk_client(url), user_message("a shop"))).task
    store = SQLiteStore(db)
    try:  # the entry as an earlier version wrote it: the task alone
        kept = TASK_RUN_PREFIX + task.id
        entry = (await store.journal(kept))["task"]
        assert entry.value["owner"] == ""
        await store.journal_put(
            kept, JournalEntry(key="task", kind="step", value=entry.value["task"])
        )
    finally:
        await store.aclose()
    with our_server(planner, store=db) as url:
        client = await sdk_client(url)
        again = await client.get_task(GetTaskRequest(id=task.id))
        done = (await send(client, user_message("SQLite", task=task))).task
    assert again.status.state == INPUT_REQUIRED
    assert done.status.state == COMPLETED
