"""``create_app`` served on 127.0.0.1, called with a2a-sdk's own client (streaming and not):
the tree's questions as ``input-required`` with their metadata, answers in the same task
(by ``request_id`` or the oldest), refused answers asked again, the output as an artifact,
``CancelTask`` ending the run, the agent card, the token and the Host rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_ours import (
    CANCELED,
    COMPLETED,
    INPUT_REQUIRED,
    artifact_text,
    cancel,
    our_server,
    sdk_client,
    send,
    served_client,
    status_metadata,
    status_text,
    user_message,
)
from a2a_served_agents import asker, counted, lead, planner

from hpd_agent.store import RunRecord, SQLiteStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK client


@pytest.fixture(autouse=True)
def counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_A2A_TEST_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("streaming", [True, False])
async def test_a_nested_question_is_input_required_and_the_answer_goes_on(
    streaming: bool,
) -> None:
    async with served_client(planner, streaming=streaming) as client:
        first = await send(client, user_message("a shop"))
        task = first.task
        assert task.status.state == INPUT_REQUIRED
        assert first.states[-1] == INPUT_REQUIRED
        assert status_text(task) == "Which database should the plan assume?"
        meta = status_metadata(task)
        rid = meta["request_id"]
        assert meta["question_kind"] == "text"
        assert meta["options"] == ["SQLite", "PostgreSQL"]
        assert meta["schema"] is None
        assert meta["agent_path"] == ["Planner", "Clarifier"]
        assert meta["requests"] == [
            {
                "request_id": rid,
                "question": "Which database should the plan assume?",
                "question_kind": "text",
                "options": ["SQLite", "PostgreSQL"],
                "schema": None,
                "agent_path": ["Planner", "Clarifier"],
            }
        ]
        done = await send(client, user_message("PostgreSQL", task=task))
    assert done.task.id == task.id and done.task.context_id == task.context_id
    assert done.task.status.state == COMPLETED
    assert artifact_text(done.task) == "Plan: The user chose PostgreSQL."
    # The Clarifier went on in the same turn: nothing ran twice.
    assert counted("effect") == ["survey db"]
    assert counted("model") == ["Planner", "Clarifier", "Clarifier", "Clarifier", "Planner"]


@pytest.mark.parametrize("streaming", [True, False])
async def test_two_pending_questions_answered_in_reverse_order_by_request_id(
    streaming: bool,
) -> None:
    async with served_client(lead, streaming=streaming) as client:
        task = (await send(client, user_message("go"))).task
        listed = status_metadata(task)["requests"]
        assert [(r["question"], r["agent_path"]) for r in listed] == [
            ("Which colour?", ["Lead", "Fast"]),
            ("Which size?", ["Lead", "Slow"]),
        ]
        colour, size = (r["request_id"] for r in listed)
        assert status_metadata(task)["request_id"] == colour  # the oldest is the status's
        second = await send(client, user_message("big", task=task, metadata={"request_id": size}))
        assert second.task.status.state == INPUT_REQUIRED
        assert [r["request_id"] for r in status_metadata(second.task)["requests"]] == [colour]
        done = await send(client, user_message("red", task=task))  # no id: the oldest
    assert done.task.status.state == COMPLETED
    assert artifact_text(done.task) == "fast got red / slow got big"
    assert sorted(counted("model")) == ["Fast", "Fast", "Lead", "Lead", "Slow", "Slow"]


async def test_an_answers_metadata_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The metadata naming the request answered (and saying whether it declines) is turned
    into JSON data once per answer, not once per look."""
    from google.protobuf.struct_pb2 import Struct

    from hpd_agent.a2a import _pending

    reads: list[Struct] = []
    real = _pending.MessageToDict

    def reading(message: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(message, Struct):
            reads.append(message)
        return real(message, *args, **kwargs)

    monkeypatch.setattr(_pending, "MessageToDict", reading)
    async with served_client(lead) as client:
        task = (await send(client, user_message("go"))).task
        colour, size = (r["request_id"] for r in status_metadata(task)["requests"])
        assert reads == []  # a query without metadata reads none
        second = await send(client, user_message("big", task=task, metadata={"request_id": size}))
        assert [r["request_id"] for r in status_metadata(second.task)["requests"]] == [colour]
        assert len(reads) == 1


@pytest.mark.parametrize("streaming", [True, False])
async def test_an_invalid_answer_asks_the_same_request_again_with_the_reason(
    streaming: bool,
) -> None:
    async with served_client(planner, streaming=streaming) as client:
        task = (await send(client, user_message("a shop"))).task
        rid = status_metadata(task)["request_id"]
        again = (await send(client, user_message("MySQL", task=task))).task
        assert again.status.state == INPUT_REQUIRED
        meta = status_metadata(again)
        assert meta["request_id"] == rid
        assert "MySQL" in meta["error"]
        assert "Your last answer was not accepted" in status_text(again)
        assert again.status.message.message_id != task.status.message.message_id
        done = (await send(client, user_message("SQLite", task=task))).task
    assert done.status.state == COMPLETED
    assert artifact_text(done) == "Plan: The user chose SQLite."
    assert counted("effect") == ["survey db"]


@pytest.mark.parametrize(
    ("kind", "answer", "expected"),
    [
        ("choices", ["red", "blue"], 'answer: ["red", "blue"]'),
        ("confirm", True, "answer: true"),
        ("confirm", "no", "answer: false"),
        ("permission", "approve_once", "answer: deployed to prod"),
        ("permission", "deny", None),
    ],
)
async def test_question_kinds_and_permissions(kind: str, answer: Any, expected: str | None) -> None:
    async with served_client(asker, streaming=False) as client:
        task = (await send(client, user_message(kind))).task
        meta = status_metadata(task)
        if kind == "permission":
            assert meta["question_kind"] == "choice"
            assert meta["options"] == ["approve_once", "approve_run", "deny"]
        else:
            assert meta["question_kind"] == ("confirm" if kind == "confirm" else "choice")
        done = (await send(client, user_message(answer, task=task))).task
    assert done.status.state == COMPLETED
    if expected is not None:
        assert artifact_text(done) == expected
    else:
        assert "deploy prod" not in counted("effect")


async def test_a_declined_question_goes_on_without_an_answer() -> None:
    async with served_client(asker) as client:
        task = (await send(client, user_message("text"))).task
        done = (await send(client, user_message("", task=task, metadata={"decline": True}))).task
    assert done.status.state == COMPLETED
    assert counted("effect") == []  # the asking tool raised: its side effect never ran


async def _stored_run(db: str, run_id: str) -> RunRecord | None:
    store = SQLiteStore(db)
    try:
        return await store.get_run(run_id)
    finally:
        await store.aclose()


@pytest.mark.parametrize("streaming", [True, False])
async def test_cancel_task_cancels_the_waiting_run(tmp_path: Path, streaming: bool) -> None:
    db = str(tmp_path / "runs.db")
    async with served_client(planner, store=db, streaming=streaming) as client:
        task = (await send(client, user_message("a shop"))).task
        cancelled = await cancel(client, task)
        assert cancelled.status.state == CANCELED
    record = await _stored_run(db, task.id)
    assert record is not None and record.status == "cancelled"
    assert counted("model") == ["Planner", "Clarifier", "Clarifier"]


async def test_a_task_canceled_after_a_restart_cancels_its_stored_run(tmp_path: Path) -> None:
    """The restarted server's SDK holds no active task for it: it records CANCELED without
    calling the executor; the stored run still goes no further."""
    db = str(tmp_path / "runs.db")
    with our_server(planner, store=db) as url:
        task = (await send(await sdk_client(url), user_message("a shop"))).task
    async with served_client(planner, store=db) as client:
        cancelled = await cancel(client, task)
        assert cancelled.status.state == CANCELED
    record = await _stored_run(db, task.id)
    assert record is not None and record.status == "cancelled"


async def test_the_card_advertises_the_url_the_request_came_in_on() -> None:
    with our_server(planner) as url:
        port = url.rsplit(":", 1)[1]
        async with httpx.AsyncClient() as http:
            card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
            by_name = await http.get(
                f"{url}/.well-known/agent-card.json", headers={"Host": f"localhost:{port}"}
            )
    assert card["name"] == "Planner"
    assert card["supportedInterfaces"][0]["url"] == url
    assert card["capabilities"]["streaming"] is True
    assert by_name.json()["supportedInterfaces"][0]["url"] == f"http://localhost:{port}"
    with our_server(planner, url="https://planner.example/a2a") as url:
        async with httpx.AsyncClient() as http:
            card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
    assert card["supportedInterfaces"][0]["url"] == "https://planner.example/a2a"


async def test_a_token_guards_json_rpc_and_the_host_rule_guards_a_server_without_one() -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}
    with our_server(planner, token="s3cret") as url:
        async with httpx.AsyncClient() as http:
            refused = await http.post(url + "/", json=call)
            wrong = await http.post(url + "/", json=call, headers={"Authorization": "Bearer x"})
            card = await http.get(f"{url}/.well-known/agent-card.json")
        headers = {"Authorization": "Bearer s3cret"}
        client_http = httpx.AsyncClient(headers=headers)
        from a2a.client import ClientConfig, create_client

        client = await create_client(url, client_config=ClientConfig(httpx_client=client_http))
        task = (await send(client, user_message("a shop"))).task
        await client_http.aclose()
    assert refused.status_code == 401 and wrong.status_code == 401
    assert card.status_code == 200
    assert task.status.state == INPUT_REQUIRED
    with our_server(planner) as url:
        async with httpx.AsyncClient() as http:
            rebound = await http.post(url + "/", json=call, headers={"Host": "evil.example"})
    assert rebound.status_code == 421


async def test_a_kind_of_the_apps_own_is_described_by_its_schema_and_checked_by_it() -> None:
    from rating_kind import QUESTION, rate_plan

    from hpd_agent import Agent
    from hpd_agent.testing import ScriptedModel, text, tool_call

    model = ScriptedModel([tool_call("rate_plan"), text("done")])
    agent = Agent("Planner", description="Plans.", model=model, tools=[rate_plan])
    async with served_client(agent) as client:
        task = (await send(client, user_message("a plan"))).task
        assert task.status.state == INPUT_REQUIRED and status_text(task) == QUESTION
        meta = status_metadata(task)
        assert (meta["question_kind"], meta["kind_label"]) == ("rating", "Rate 1–5")
        assert meta["schema"] == {"type": "integer", "minimum": 1, "maximum": 5}
        again = (await send(client, user_message(9, task=task))).task
        assert again.status.state == INPUT_REQUIRED
        # A data part is a protobuf Value (whole numbers travel as 9.0): read back as 9.
        assert "9 is greater than the maximum of 5" in status_metadata(again)["error"]
        # Words are read as a person's typed answer is, by the kind: "****" is 4 stars.
        typed = (await send(client, user_message("six", task=task))).task
        assert typed.status.state == INPUT_REQUIRED
        assert "Rate from 1 to 5: type 4, 4/5 or ****." in status_metadata(typed)["error"]
        done = (await send(client, user_message("****", task=task))).task
    assert done.status.state == COMPLETED
    assert model.requests[-1][-1].content == "rated 4 of 5"  # type: ignore[union-attr]


async def test_a_questions_details_are_nested_under_data() -> None:
    from hpd_agent import Agent, ToolContext, tool
    from hpd_agent.testing import ScriptedModel, text, tool_call

    @tool
    async def pick(ctx: ToolContext) -> str:
        return ",".join(await ctx.ask_choice("Which days?", ["fri", "sat"], multiple=True))

    agent = Agent("Planner", model=ScriptedModel([tool_call("pick"), text("done")]), tools=[pick])
    async with served_client(agent) as client:
        task = (await send(client, user_message("go"))).task
        meta = status_metadata(task)
        assert meta["data"] == {"multiple": True} and "multiple" not in meta
        assert "kind_label" not in meta and meta["schema"] is None  # said by kind and options
        done = (await send(client, user_message(["sat", "fri"], task=task))).task
    assert done.status.state == COMPLETED
