"""Who answered over A2A, and who may: the name of the server token a message carried (or
the SDK's authenticated user), recorded with the answer (channel ``a2a``); a policy's
refusal is said to the caller and the question stays."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from a2a_ours import (
    COMPLETED,
    INPUT_REQUIRED,
    named_callers,
    our_server,
    sdk_client,
    send,
    status_text,
    user_message,
)
from a2a_served_agents import planner

from hpd_agent.governance import PathPolicy
from hpd_agent.store import RequestRecord, SQLiteStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK client


@pytest.fixture(autouse=True)
def counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_A2A_TEST_DIR", str(tmp_path))
    return tmp_path


async def _records(db: str) -> list[RequestRecord]:
    store = SQLiteStore(db)
    try:
        return await store.list_requests(status=None)
    finally:
        await store.aclose()


async def test_the_token_names_who_answered_and_the_policy_who_may(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    tokens = {"alice": "alice-secret", "bob": "bob-secret"}
    policy = PathPolicy({"alice": ["*"], "bob": ["Planner"]})  # not the Clarifier's question
    alice = {"Authorization": "Bearer alice-secret"}
    bob = {"Authorization": "Bearer bob-secret"}
    with anyio.fail_after(60), our_server(planner, store=db, token=tokens, policy=policy) as url:
        as_bob = await sdk_client(url, headers=bob)
        task = (await send(as_bob, user_message("a shop"))).task
        assert task.status.state == INPUT_REQUIRED
        refused = (await send(as_bob, user_message("SQLite", task=task))).task
        assert refused.status.state == INPUT_REQUIRED
        assert "'bob' may not answer request" in status_text(refused)
        [pending] = await _records(db)
        assert (pending.status, pending.answered_by) == ("pending", None)
        done = await send(await sdk_client(url, headers=alice), user_message("SQLite", task=task))
    assert done.task.status.state == COMPLETED
    [record] = await _records(db)
    assert (record.status, record.answered_by, record.channel) == ("answered", "alice", "a2a")


@pytest.mark.parametrize(("named", "expected"), [(True, "carol"), (False, None)])
async def test_an_authenticated_caller_is_named_else_nobody(
    tmp_path: Path, named: bool, expected: str | None
) -> None:
    db = str(tmp_path / "runs.db")
    wrap = named_callers if named else None
    headers = {"X-Test-User": "carol"}
    with anyio.fail_after(60), our_server(planner, store=db, wrap=wrap) as url:
        client = await sdk_client(url, headers=headers)
        task = (await send(client, user_message("a shop"))).task
        done = (await send(client, user_message("SQLite", task=task))).task
    assert done.status.state == COMPLETED
    [record] = await _records(db)
    assert (record.answered_by, record.channel) == (expected, "a2a")
