"""``hpd_agent.mcp.mcp_server``: an agent as an MCP tool whose questions become elicitations.

Driven by the MCP SDK's own client (``mcp.Client`` with an ``elicitation_callback``) on both
protocol versions (``mode="legacy"``: 2025-11-25, ``elicitation/create`` during the call;
``mode="auto"``: 2026-07-28, ``InputRequiredResult`` and a retry), in process, over
streamable HTTP on 127.0.0.1 (uvicorn in this process) and over stdio (a real
``hpd-agent mcp`` subprocess). Model calls and tool side effects are counted in files.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_server_agents as agents
import mcp_types as types
import pytest
from _child import PYTHONPATH
from anyio import wait_all_tasks_blocked
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from hpd_agent import Agent
from hpd_agent.mcp import mcp_server
from hpd_agent.store import SQLiteStore

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
MODES = ["legacy", "auto"]
VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28"}

Reply = Callable[[types.ElicitRequestFormParams], Awaitable[types.ElicitResult]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn serves on asyncio; tests/mcp/test_mcp_server_trio.py: trio


@pytest.fixture(autouse=True)
def counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_MCP_TEST_DIR", str(tmp_path))
    agents.GATES.clear()
    return tmp_path


class Human:
    """The MCP client's elicitation callback: records every form, answers with ``reply``."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.forms: list[types.ElicitRequestFormParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.forms.append(params)
        return await self.reply(params)

    @property
    def messages(self) -> list[str]:
        return [f.message for f in self.forms]


def accept(content: dict[str, Any]) -> Reply:
    async def reply(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=content)

    return reply


@asynccontextmanager
async def http_url(agent: Agent, **options: Any) -> AsyncIterator[str]:
    """``mcp_server(agent)`` over streamable HTTP on 127.0.0.1 (uvicorn in this process)."""
    import uvicorn

    app = mcp_server(agent, **options).streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
            finally:
                server.should_exit = True
    finally:
        sock.close()


@asynccontextmanager
async def connect(
    transport: str, name: str, mode: str, human: Human | None, **options: Any
) -> AsyncIterator[Client]:
    """An SDK client connected to the agent ``name`` of ``mcp_server_agents``."""
    callback = {} if human is None else {"elicitation_callback": human}
    agent: Agent = getattr(agents, name)
    if transport == "memory":
        async with Client(mcp_server(agent, **options), mode=mode, **callback) as client:
            yield client
    elif transport == "http":
        async with http_url(agent, **options) as url, Client(url, mode=mode, **callback) as c:
            yield c
    else:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "hpd_agent.cli", "mcp", f"tests.mcp.mcp_server_agents:{name}"],
            env={**os.environ, "PYTHONPATH": PYTHONPATH},
            cwd=str(REPO),
        )
        async with Client(params, mode=mode, **callback) as client:
            yield client


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def our_processes(marker: Path) -> list[int]:
    """Live processes whose environment names ``marker`` (the test's counting folder)."""
    found: list[int] = []
    needle = f"HPD_MCP_TEST_DIR={marker}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                env = (entry / "environ").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if needle in env.split(b"\0") and state != "Z":
                found.append(int(entry.name))
    return found


# -- the round trip ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", ["memory", "http", "stdio"])
async def test_a_nested_question_reaches_the_client_and_the_same_run_goes_on(
    transport: str, mode: str, counting: Path
) -> None:
    human = Human(accept({"answer": "PostgreSQL"}))
    async with connect(transport, "planner", mode, human) as client:
        assert client.protocol_version == VERSION[mode]
        [tool] = (await client.list_tools()).tools
        assert tool.name == "Planner"
        assert tool.input_schema["required"] == ["query"]
        with anyio.fail_after(60):
            result = await client.call_tool("Planner", {"query": "a todo API"})
    assert not result.is_error
    assert text_of(result) == "Plan: The user chose PostgreSQL."
    assert human.messages == ["Planner > Clarifier: Which database should the plan assume?"]
    [form] = human.forms
    assert form.requested_schema["properties"]["answer"]["enum"] == ["SQLite", "PostgreSQL"]
    assert form.requested_schema["required"] == ["answer"]
    # Nothing re-run: each model turn once, the side effect before the question once.
    assert agents.counted("model") == ["Planner", "Clarifier", "Clarifier", "Clarifier", "Planner"]
    assert agents.counted("effect") == ["survey db"]
    if transport == "stdio":
        assert our_processes(counting) == []  # the server process is gone with the client


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", ["memory", "http"])
async def test_parallel_questions_are_sent_together_once_the_run_settles(
    transport: str, mode: str
) -> None:
    gate = agents.GATES["slow"] = anyio.Event()
    both = anyio.Event()

    async def reply(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        if len(human.forms) == 2:
            both.set()
        with anyio.fail_after(30):  # one alone means they were not sent together
            await both.wait()
        colour = "red" if params.message.startswith("Lead > Fast") else "large"
        return types.ElicitResult(action="accept", content={"answer": colour})

    human = Human(reply)
    results: list[types.CallToolResult] = []
    async with connect(transport, "lead", mode, human) as client, anyio.create_task_group() as tg:

        async def call() -> None:
            results.append(await client.call_tool("Lead", {"query": "go"}))

        tg.start_soon(call)
        # Fast waits on its question while Slow's survey works: not settled, nothing sent.
        await wait_all_tasks_blocked()
        assert human.forms == []
        gate.set()
    assert sorted(human.messages) == [
        "Lead > Fast: Fast: which colour?",
        "Lead > Slow: Slow: which size?",
    ]
    assert text_of(results[0]) == "fast got red / slow got large"
    assert sorted(agents.counted("model")) == sorted(["Lead"] * 2 + ["Fast"] * 2 + ["Slow"] * 3)
    assert agents.counted("effect") == ["survey slow"]


# -- schemas and answers by kind -------------------------------------------------------------
KINDS = [
    # kind, the answer property's schema (or the whole form's), the content, what the tool got
    ("text", {"type": "string", "title": "Answer"}, {"answer": "Ada"}, "Ada"),
    (
        "text_options",
        {"type": "string", "enum": ["tabs", "spaces"], "title": "Answer"},
        {"answer": "spaces"},
        "spaces",
    ),
    ("input", {"type": "string", "minLength": 1, "title": "Answer"}, {"answer": " bob "}, "bob"),
    (
        "choice",
        {"type": "string", "enum": ["red", "green"], "title": "Answer"},
        {"answer": "green"},
        "green",
    ),
    (
        "choices",
        {
            "type": "array",
            "items": {"type": "string", "enum": ["red", "green", "blue"]},
            "minItems": 1,
            "title": "Answer",
        },
        {"answer": ["blue", "red"]},
        ["blue", "red"],
    ),
    ("confirm", {"type": "boolean", "title": "Answer"}, {"answer": True}, True),
    (
        "action",
        {
            "type": "boolean",
            "description": "true once done at https://example.test/login",
            "title": "Answer",
        },
        {"answer": True},
        True,
    ),
    ("custom_flat", None, {"name": "Ada", "age": 36}, {"name": "Ada", "age": 36}),
    (
        "custom_nested",
        {"type": "string", "title": "Answer", "description": "the answer as JSON"},
        {"answer": '{"range": {"from": 3}}'},
        {"range": {"from": 3}},
    ),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("kind", "prop", "content", "got"), KINDS, ids=[k[0] for k in KINDS])
async def test_each_question_kind_has_its_schema_and_its_answer(
    mode: str, kind: str, prop: dict[str, Any] | None, content: dict[str, Any], got: Any
) -> None:
    human = Human(accept(content))
    async with connect("memory", "asker", mode, human) as client:
        result = await client.call_tool("Asker", {"query": kind})
    [form] = human.forms
    schema = form.requested_schema
    if prop is None:  # a flat custom schema goes as it is
        assert {k: v for k, v in schema.items() if k != "$schema"} == agents.FLAT
    else:
        assert schema["properties"] == {"answer": prop}
        assert schema["required"] == ["answer"]
    assert text_of(result) == f"answer: {json.dumps(got)}"
    assert agents.counted("effect") == [f"{kind}={json.dumps(got)}"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("decision", "ran", "said"),
    [("approve_once", True, "deployed to prod"), ("deny", False, "denied")],
)
async def test_a_permission_asks_for_a_decision(
    mode: str, decision: str, ran: bool, said: str
) -> None:
    human = Human(accept({"decision": decision}))
    async with connect("memory", "asker", mode, human) as client:
        result = await client.call_tool("Asker", {"query": "permission"})
    [form] = human.forms
    assert form.message == "Asker: Allow deploy? (target: prod)"
    assert form.requested_schema["properties"] == {
        "decision": {"type": "string", "enum": ["approve_once", "approve_run", "deny"]}
    }
    assert said in text_of(result)
    assert agents.counted("effect") == (["deploy prod"] if ran else [])


# -- refused answers, decline, cancel ---------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", ["memory", "http"])
async def test_an_invalid_answer_is_asked_again_with_the_reason(transport: str, mode: str) -> None:
    replies = iter([{"answer": "   "}, {"answer": "bob"}])

    async def reply(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=next(replies))

    human = Human(reply)
    async with connect(transport, "asker", mode, human) as client:
        result = await client.call_tool("Asker", {"query": "input"})
    first, second = human.messages
    assert first == "Asker: Please provide a value for 'recipient' (needed by kinds)."
    assert second == (
        f"{first}\n(Your last answer was not accepted: a value for 'recipient' is required; "
        "the answer was empty)"
    )
    assert text_of(result) == 'answer: "bob"'
    assert agents.counted("effect") == ['input="bob"']
    assert agents.counted("model") == ["Asker", "Asker"]


@pytest.mark.parametrize("mode", MODES)
async def test_decline_tells_the_asker_and_the_run_goes_on(mode: str) -> None:
    async def reply(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    human = Human(reply)
    async with connect("http", "planner", mode, human) as client:
        result = await client.call_tool("Planner", {"query": "a todo API"})
    assert not result.is_error
    assert text_of(result).startswith("Plan: The user chose ")
    assert "declined" in text_of(result)
    assert agents.counted("model") == ["Planner", "Clarifier", "Clarifier", "Clarifier", "Planner"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", ["memory", "http"])
async def test_cancel_cancels_the_run(transport: str, mode: str, tmp_path: Path) -> None:
    async def reply(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        return types.ElicitResult(action="cancel")

    human = Human(reply)
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        async with connect(transport, "asker", mode, human, store=store) as client:
            result = await client.call_tool("Asker", {"query": "confirm"})
        assert result.is_error
        assert text_of(result) == (
            "The run was cancelled: the MCP client cancelled the question 'Asker: Go on?'."
        )
        assert agents.counted("effect") == []  # the tool never got past its question
        [run] = await store.list_runs()
        assert run.status == "cancelled"
        [request] = await store.list_requests(status=None)
        assert request.status == "cancelled"
    finally:
        await store.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_cannot_elicit_gets_the_run_without_answers(mode: str) -> None:
    async with connect("memory", "planner", mode, None) as client:
        result = await client.call_tool("Planner", {"query": "a todo API"})
    assert text_of(result).startswith("Plan: The user chose ")
    assert "cancelled" in text_of(result)


async def test_a_wrong_tool_or_query_is_refused() -> None:
    async with connect("memory", "planner", "auto", None) as client:
        with pytest.raises(MCPError, match="no tool 'Nope': this server has 'Planner'"):
            await client.call_tool("Nope", {"query": "x"})
        bad = await client.call_tool("Planner", {"task": "x"})
    assert bad.is_error and text_of(bad) == 'the tool takes {"query": string}'
    assert agents.counted("model") == []


# -- who answered -----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
async def test_an_answer_is_recorded_as_given_by_the_client_named_in_its_client_info(
    mode: str, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    human = Human(accept({"answer": "PostgreSQL"}))
    named = types.Implementation(name="review-desk", version="1.0")
    try:
        server = mcp_server(agents.planner, store=store)
        async with Client(server, mode=mode, elicitation_callback=human, client_info=named) as c:
            with anyio.fail_after(60):
                result = await c.call_tool("Planner", {"query": "a todo API"})
        assert text_of(result) == "Plan: The user chose PostgreSQL."
        [record] = await store.list_requests(status=None)
    finally:
        await store.aclose()
    assert (record.status, record.answered_by, record.channel) == ("answered", "review-desk", "mcp")


async def test_a_clients_huge_name_is_recorded_cut_to_a_bound(tmp_path: Path) -> None:
    """The client chooses its name: a megabyte of it is not written into each record."""
    store = SQLiteStore(tmp_path / "runs.db")
    human = Human(accept({"answer": "PostgreSQL"}))
    named = types.Implementation(name="desk" * 250_000, version="1.0")
    try:
        server = mcp_server(agents.planner, store=store)
        async with Client(
            server, mode=MODES[0], elicitation_callback=human, client_info=named
        ) as c:
            with anyio.fail_after(60):
                await c.call_tool("Planner", {"query": "a todo API"})
        [record] = await store.list_requests(status=None)
    finally:
        await store.aclose()
    assert record.answered_by is not None and record.answered_by.startswith("deskdesk")
    assert record.answered_by.endswith("[truncated 999,800 characters]")
    assert len(record.answered_by) < 300
