"""A2A contexts carry conversations (``create_app``, a2a-sdk's own client): a new task in a
context runs the agent with the context's earlier prompts and answers (the model's messages
show them), a new or invented context starts afresh, a store keeps them across a restart,
one task at a time per context, and a hostile ``contextId`` is bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)
from a2a.client import Client
from a2a.helpers import new_text_part
from a2a.types import Message, Role, Task
from a2a.utils.errors import A2AError
from a2a_ours import (
    CANCELED,
    COMPLETED,
    INPUT_REQUIRED,
    artifact_text,
    cancel,
    named_callers,
    our_server,
    sdk_client,
    send,
    served_client,
    user_message,
)
from a2a_served_agents import chat, counted, seen

from hpd_agent.a2a import _contexts

pytestmark = pytest.mark.anyio

BUSY = "still working or waiting for input"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK client


@pytest.fixture(autouse=True)
def counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_A2A_TEST_DIR", str(tmp_path))
    return tmp_path


def store_of(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store of ``kind`` (``sqlite`` or ``postgres``), empty: where it is."""
    if kind == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("fresh_postgres"))


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store a restarted server opens again."""
    return store_of(request.param, request, tmp_path)


def said(text: str, context_id: str = "") -> Message:
    """A user message starting a new task, in ``context_id`` (empty: a new context)."""
    return Message(
        role=Role.ROLE_USER,
        message_id=f"m-{len(counted('seen'))}-{text[:20]}-{id(text)}",
        parts=[new_text_part(text)],
        context_id=context_id,
    )


async def turn(client: Client, text: str, context_id: str = "") -> Task:
    """One task: ``text`` sent in ``context_id``; the task once it stopped."""
    return (await send(client, said(text, context_id))).task


@pytest.mark.parametrize("streaming", [True, False])
async def test_a_second_task_in_a_context_sees_the_first_exchange(streaming: bool) -> None:
    async with served_client(chat, streaming=streaming) as client:
        first = await turn(client, "my name is Ada")
        second = await turn(client, "what is my name?", first.context_id)
        third = await turn(client, "and again?", first.context_id)
        other = await turn(client, "hello")
    assert [t.status.state for t in (first, second, third, other)] == [COMPLETED] * 4
    assert second.context_id == third.context_id == first.context_id != other.context_id
    assert len({first.id, second.id, third.id}) == 3  # a task per turn
    assert artifact_text(second) == "heard: what is my name?"
    assert seen() == [
        ["user: my name is Ada"],
        ["user: my name is Ada", "assistant: heard: my name is Ada", "user: what is my name?"],
        [
            "user: my name is Ada",
            "assistant: heard: my name is Ada",
            "user: what is my name?",
            "assistant: heard: what is my name?",
            "user: and again?",
        ],
        ["user: hello"],  # another context: nothing of the first
    ]


async def test_a_context_the_client_names_starts_afresh_under_that_id() -> None:
    async with served_client(chat) as client:
        first = await turn(client, "one", "my-own-context")
        second = await turn(client, "two", "my-own-context")
        other = await turn(client, "three", "my-other-context")
    assert (first.context_id, second.context_id) == ("my-own-context", "my-own-context")
    assert other.context_id == "my-other-context"
    assert seen() == [["user: one"], ["user: one", "assistant: heard: one", "user: two"],
                      ["user: three"]]  # fmt: skip


async def test_a_context_of_one_caller_is_not_another_callers() -> None:
    with our_server(chat, wrap=named_callers) as url:
        ann = await sdk_client(url, headers={"X-Test-User": "ann"})
        bob = await sdk_client(url, headers={"X-Test-User": "bob"})
        first = await turn(ann, "ann's secret", "shared")
        await turn(bob, "bob here", "shared")
        await turn(ann, "ann again", "shared")
    assert first.context_id == "shared"
    assert seen() == [
        ["user: ann's secret"],
        ["user: bob here"],  # bob's "shared" is his own conversation
        ["user: ann's secret", "assistant: heard: ann's secret", "user: ann again"],
    ]


async def test_a_store_keeps_the_context_across_a_restart(location: str) -> None:
    store = location
    async with served_client(chat, store=store) as client:
        first = await turn(client, "my name is Ada")
    async with served_client(chat, store=store) as client:  # a new app on the same file
        second = await turn(client, "what is my name?", first.context_id)
    assert second.status.state == COMPLETED
    assert seen()[-1] == [
        "user: my name is Ada",
        "assistant: heard: my name is Ada",
        "user: what is my name?",
    ]


@pytest.mark.parametrize("stored", [False, True])
async def test_a_new_task_waits_for_the_contexts_last_to_end(stored: bool, tmp_path: Path) -> None:
    options: dict[str, Any] = {"store": str(tmp_path / "runs.db")} if stored else {}
    async with served_client(chat, **options) as client:
        asking = await turn(client, "ask me")
        assert asking.status.state == INPUT_REQUIRED
        requests = len(seen())
        with pytest.raises(A2AError) as refused:
            await turn(client, "meanwhile", asking.context_id)
        elsewhere = await turn(client, "another context")  # not held by the first
        done = (await send(client, user_message("blue", task=asking))).task
        after = await turn(client, "and now?", asking.context_id)
    assert BUSY in str(refused.value) and asking.id in str(refused.value)
    assert seen()[requests] == ["user: another context"]  # "meanwhile" never ran
    assert elsewhere.status.state == COMPLETED
    assert artifact_text(done) == "ask me -> blue"
    assert after.status.state == COMPLETED
    assert seen()[-1] == ["user: ask me", "assistant: ask me -> blue", "user: and now?"]


async def test_two_new_tasks_of_one_context_at_once_one_is_refused(tmp_path: Path) -> None:
    results: list[Task | A2AError] = []

    async with served_client(chat, store=str(tmp_path / "runs.db")) as client:

        async def one(text: str) -> None:
            try:
                results.append(await turn(client, text, "together"))
            except A2AError as e:
                results.append(e)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "ask first")
            tg.start_soon(one, "ask second")
    refused = [r for r in results if isinstance(r, A2AError)]
    taken = [r for r in results if isinstance(r, Task)]
    assert len(refused) == 1 and BUSY in str(refused[0])
    assert len(taken) == 1 and taken[0].status.state == INPUT_REQUIRED
    assert len(seen()) == 1


async def test_a_task_left_waiting_holds_its_context_across_a_restart(location: str) -> None:
    store = location
    async with served_client(chat, store=store) as client:
        asking = await turn(client, "ask me")
    async with served_client(chat, store=store) as client:
        with pytest.raises(A2AError) as refused:
            await turn(client, "meanwhile", asking.context_id)
        assert (await cancel(client, asking)).status.state == CANCELED
        after = await turn(client, "again", asking.context_id)
    assert BUSY in str(refused.value)
    assert after.status.state == COMPLETED
    assert seen()[-1] == ["user: again"]  # a cancelled turn leaves the history as it was


async def test_a_waiting_task_resumed_after_a_restart_keeps_its_turn(location: str) -> None:
    store = location
    async with served_client(chat, store=store) as client:
        asking = await turn(client, "ask me")
    async with served_client(chat, store=store) as client:
        done = (await send(client, user_message("red", task=asking))).task
        after = await turn(client, "and now?", asking.context_id)
    assert artifact_text(done) == "ask me -> red" and after.status.state == COMPLETED
    assert seen()[-1] == ["user: ask me", "assistant: ask me -> red", "user: and now?"]


@pytest.mark.parametrize("stored", ["", "sqlite", "postgres"])
async def test_a_hostile_context_id_is_bounded_or_just_a_value(
    stored: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    odd = "../../etc/passwd'; DROP TABLE hpd_thread_rows;--\u202e\x00 %s {} 🙂"
    odd = (odd * 10)[: _contexts.MAX_CONTEXT_ID]
    options: dict[str, Any] = {"store": store_of(stored, request, tmp_path)} if stored else {}
    async with served_client(chat, **options) as client:
        with pytest.raises(A2AError) as refused:
            await turn(client, "long", "c" * 100_000)
        first = await turn(client, "one", odd)
        second = await turn(client, "two", odd)
        near = await turn(client, "three", odd[:-1])
    message = str(refused.value)
    assert "contextId has 100000 characters, more than 256" in message and len(message) < 300
    assert first.context_id == second.context_id == odd
    assert near.status.state == COMPLETED
    assert seen() == [["user: one"], ["user: one", "assistant: heard: one", "user: two"],
                      ["user: three"]]  # fmt: skip


async def test_without_a_store_the_contexts_used_last_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_contexts, "MAX_CONTEXTS", 2)
    async with served_client(chat) as client:
        await turn(client, "a1", "A")
        await turn(client, "b1", "B")
        await turn(client, "c1", "C")  # A is the one unused longest: forgotten
        b2 = await turn(client, "b2", "B")
        a2 = await turn(client, "a2", "A")
    assert b2.status.state == a2.status.state == COMPLETED
    assert seen()[3] == ["user: b1", "assistant: heard: b1", "user: b2"]
    assert seen()[4] == ["user: a2"]  # a fresh conversation, not an error


async def test_two_servers_on_one_store_share_the_context(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.db")
    with our_server(chat, store=store) as a_url, our_server(chat, store=store) as b_url:
        a, b = await sdk_client(a_url), await sdk_client(b_url)
        asking = await turn(a, "ask me")
        with pytest.raises(A2AError) as refused:
            await turn(b, "meanwhile", asking.context_id)  # A's task holds the context
        done = (await send(a, user_message("green", task=asking))).task
        after = await turn(b, "and now?", asking.context_id)
    assert BUSY in str(refused.value)
    assert artifact_text(done) == "ask me -> green" and after.status.state == COMPLETED
    assert seen()[-1] == ["user: ask me", "assistant: ask me -> green", "user: and now?"]
