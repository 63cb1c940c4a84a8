"""The MCP client: a server's tools in an agent, and its questions (elicitations) asked of
the human at the root, on both protocol versions, over stdio and streamable HTTP, against a
low-level server and a FastMCP one (``mcp_client_servers.py``, real processes)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.elicitation import render_elicitation_schema
from mcp_client_harness import Target, stdio_children, target
from mcp_client_servers import NAME_SCHEMA, Booking, Name

from hpd_agent import (
    Agent,
    ClarificationRequest,
    Decline,
    Event,
    InvalidAnswerError,
    Run,
    ToolCallFinished,
)
from hpd_agent.mcp import ELICITATION, MCPServerError, MCPTools
from hpd_agent.messages import ToolResultMessage
from hpd_agent.testing import FunctionModel, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

COMBOS = [
    (kind, transport, mode)
    for kind in ("low", "fast")
    for transport in ("stdio", "http")
    for mode in ("auto", "legacy")
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK on trio: test_mcp_client_trio.py


@pytest.fixture(params=COMBOS, ids=["-".join(c) for c in COMBOS])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    with target(*request.param, tmp_path) as t:
        yield t


def _combos(*wanted: tuple[str, str, str]) -> Any:
    return pytest.mark.parametrize(
        "server", wanted, indirect=True, ids=["-".join(w) for w in wanted]
    )


SEEN: list[Event] = []


async def drive(
    agent: Agent, answer: Callable[[ClarificationRequest], Any], **options: Any
) -> tuple[Run, list[ClarificationRequest]]:
    """Stream a run, answering each question with ``answer(event)`` (None: leave it); the
    run's events are kept in ``SEEN``."""
    asked: list[ClarificationRequest] = []
    SEEN.clear()
    async with agent.stream("go", **options) as run:
        async for event in run:
            SEEN.append(event)
            if isinstance(event, ClarificationRequest) and not event.replayed:
                asked.append(event)
                reply = answer(event)
                if reply is not None:
                    await run.respond(event.request_id, reply)
    return run, asked


def tool_results(run: Run) -> list[ToolResultMessage]:
    return [m for m in run.result.messages if isinstance(m, ToolResultMessage)]


def nested(tools: MCPTools, *calls: Any, final: str = "sub done") -> tuple[Agent, ScriptedModel]:
    """Root → Sub, Sub holding the server's tools and making ``calls`` in one turn."""
    sub_model = ScriptedModel([list(calls), text(final)])
    sub = Agent("Sub", model=sub_model, tools=[tools])
    root = Agent(
        "Root",
        model=ScriptedModel([tool_call("Sub", query="q"), text("root done")]),
        tools=[sub.as_tool()],
    )
    return root, sub_model


# -- tools and results ---------------------------------------------------------------------------
@_combos(("low", "stdio", "auto"), ("low", "http", "legacy"), ("fast", "http", "auto"))
async def test_the_model_sees_each_server_tool_with_its_prefix_and_schema(server: Target) -> None:
    model = ScriptedModel([text("done")])
    agent = Agent("A", model=model, tools=[server.tools(prefix="srv")])
    await agent.run("go")
    seen = {d.name: d for d in model.params[0].tools}
    if server.kind == "low":
        assert list(seen) == [
            "srv_add", "srv_fail", "srv_ask", "srv_ask_two", "srv_visit", "srv_forms", "srv_crash",
        ]  # fmt: skip
        assert seen["srv_add"].description == "Add two numbers."
        assert seen["srv_add"].parameters == {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        }
    else:
        assert list(seen) == ["srv_book", "srv_greet", "srv_shout"]
        assert seen["srv_shout"].parameters["properties"]["text"]["type"] == "string"
        assert seen["srv_book"].parameters["properties"] == {}  # resolved, not the model's


@_combos(("low", "stdio", "auto"), ("low", "stdio", "legacy"), ("low", "http", "auto"))
async def test_a_result_is_its_text_and_is_error_an_error_result(server: Target) -> None:
    model = ScriptedModel(
        [[tool_call("add", a=2, b=3), tool_call("fail")], tool_call("add", a=1, b=1), text("ok")]
    )
    agent = Agent("A", model=model, tools=[server.tools()])
    result = await agent.run("go")
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(m.content, m.is_error) for m in results] == [
        ("5", False),
        ("Error: MCPToolError: boom: the tool failed", True),
        ("2", False),
    ]
    assert server.effects() == ["add", "add"]


# -- form elicitation -----------------------------------------------------------------------------
def _ask_call(server: Target) -> Any:
    if server.kind == "low":
        return tool_call("ask", _id="call_mcp", why="(for the badge)")
    return tool_call("greet", _id="call_mcp")


async def test_an_elicitation_reaches_the_root_as_the_calling_tools_question(
    server: Target,
) -> None:
    root, _ = nested(server.tools(), _ask_call(server))
    run, asked = await drive(root, lambda e: {"name": "Ada"})
    assert run.result.output == "root done"
    [question] = asked
    assert question.question_kind == "custom"
    assert question.agent_path == ("Root", "Sub")
    assert question.tool_call_id == "call_mcp"
    assert question.data is not None and question.data["name"] == ELICITATION
    assert question.data["payload"]["protocol"] == server.protocol
    if server.kind == "low":
        assert question.question == "What is your name? (for the badge)"
        assert question.data["schema"] == NAME_SCHEMA
        assert server.effects() == ["ask:start", 'ask:done accept {"name": "Ada"}']
    else:
        assert question.question == "Who is it for?"
        rendered = render_elicitation_schema(Name)
        if server.modern:  # 2026-07-28 carries $schema, type, properties, required only
            rendered = {k: v for k, v in rendered.items() if k != "title"}
        assert question.data["schema"] == rendered
        assert server.effects() == ["greet:accept"]
    [finished] = [
        e for e in SEEN if isinstance(e, ToolCallFinished) and e.agent_path == ("Root", "Sub")
    ]
    assert finished.tool_call_id == "call_mcp"
    assert finished.result in ('ask accept {"name": "Ada"}', "hello Ada")


@_combos(
    ("low", "stdio", "auto"),
    ("low", "stdio", "legacy"),
    ("fast", "http", "auto"),
    ("fast", "http", "legacy"),
)
async def test_decline_declines_and_a_cancelled_question_cancels(server: Target) -> None:
    outcomes: list[str] = []
    for reply in ("decline", "cancel"):
        agent = Agent(
            "A",
            model=ScriptedModel([_ask_call(server), text("done")]),
            tools=[server.tools()],
        )
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    if reply == "decline":
                        await run.respond(event.request_id, Decline())
                    else:
                        run.cancel_request(event.request_id)
        outcomes.append(tool_results(run)[0].content)
    expected = (
        ["ask decline", "ask cancel"] if server.kind == "low" else ["greet decline", "greet cancel"]
    )
    assert outcomes == expected


@_combos(("low", "stdio", "auto"), ("low", "http", "legacy"))
async def test_nobody_to_answer_cancels_the_elicitation(server: Target) -> None:
    agent = Agent(
        "A", model=ScriptedModel([_ask_call(server), text("done")]), tools=[server.tools()]
    )
    result = await agent.run("go")  # no handler, no stream: "unavailable" at once
    assert [m.content for m in result.messages if isinstance(m, ToolResultMessage)] == [
        "ask cancel"
    ]


@_combos(("low", "stdio", "auto"), ("low", "http", "legacy"))
async def test_an_invalid_answer_is_refused_and_the_question_stays_open(server: Target) -> None:
    refusals: list[str] = []
    agent = Agent(
        "A", model=ScriptedModel([_ask_call(server), text("done")]), tools=[server.tools()]
    )
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                for bad in ({"name": ""}, {"nom": "Ada"}, {"name": 7}, "Ada"):
                    with pytest.raises(InvalidAnswerError) as refused:
                        await run.respond(event.request_id, bad)
                    refusals.append(str(refused.value))
                assert [p.request_id for p in run.pending] == [event.request_id]
                # A key the schema does not declare is not sent to the server.
                await run.respond(event.request_id, {"name": "Ada", "extra": {"x": 1}})
    assert len(refusals) == 4 and all("does not match the schema" in r for r in refusals)
    assert tool_results(run)[0].content == 'ask accept {"name": "Ada"}'
    assert server.effects() == ["ask:start", 'ask:done accept {"name": "Ada"}']


@_combos(("fast", "stdio", "auto"), ("fast", "http", "legacy"))
async def test_every_form_kind_is_checked_before_it_reaches_the_server(server: Target) -> None:
    good = {"email": "ada@example.com", "day": "2024-02-29", "size": "small", "guests": 2}
    bad = [
        {**good, "email": "ada-at-example"},
        {**good, "day": "2024-13-01"},
        {**good, "size": "huge"},
        {**good, "extras": ["wifi", "sauna"]},
        {**good, "guests": 5},
        {**good, "pets": "yes"},
        {k: v for k, v in good.items() if k != "size"},
    ]
    refused = 0
    agent = Agent(
        "A", model=ScriptedModel([tool_call("book"), text("done")]), tools=[server.tools()]
    )
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                assert event.data is not None
                schema = event.data["schema"]
                assert schema["properties"] == render_elicitation_schema(Booking)["properties"]
                for answer in bad:
                    with pytest.raises(InvalidAnswerError):
                        await run.respond(event.request_id, answer)
                    refused += 1
                await run.respond(
                    event.request_id, {**good, "extras": ["wifi", "parking"], "pets": True}
                )
    assert refused == len(bad)
    booked = json.loads(tool_results(run)[0].content.removeprefix("booked "))
    assert booked == {**good, "extras": ["wifi", "parking"], "pets": True}
    assert server.effects() == ["book"]


@_combos(("low", "stdio", "auto"), ("low", "http", "auto"))
async def test_several_input_requests_are_questions_answered_in_any_order(server: Target) -> None:
    waiting: list[ClarificationRequest] = []
    agent = Agent(
        "A", model=ScriptedModel([tool_call("ask_two"), text("done")]), tools=[server.tools()]
    )
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                waiting.append(event)
                if len(waiting) == 2:  # both out before either is answered
                    for question in reversed(waiting):
                        await run.respond(question.request_id, {"name": question.question})
    assert [q.question for q in waiting] == ["Your first?", "Your second?"]
    assert tool_results(run)[0].content == (
        'first=accept {"name": "Your first?"} | second=accept {"name": "Your second?"}'
    )
    assert server.effects() == ["ask_two:start"]  # one retry, once both were answered


@_combos(("low", "stdio", "legacy"), ("low", "http", "auto"))
async def test_a_url_elicitation_is_an_action_question(server: Target) -> None:
    contents: list[str] = []
    for reply in (True, Decline()):
        agent = Agent(
            "A", model=ScriptedModel([tool_call("visit"), text("done")]), tools=[server.tools()]
        )
        run, asked = await drive(agent, lambda e, r=reply: r)
        [question] = asked
        assert question.question_kind == "action"
        assert question.question == "Connect your account"
        assert question.data is not None
        assert question.data["url"] == "https://example.com/connect?x=1"
        contents.append(tool_results(run)[0].content)
    assert contents == ["visit accept", "visit decline"]


@_combos(("low", "stdio", "legacy"), ("low", "http", "auto"))
async def test_a_url_elicitation_to_what_is_not_a_web_page_is_declined_unasked(
    server: Target,
) -> None:
    contents: list[str] = []
    for url in ("javascript:alert(document.cookie)", "file:///etc/passwd", "http://example.com/"):
        agent = Agent(
            "A",
            model=ScriptedModel([tool_call("visit", url=url), text("done")]),
            tools=[server.tools()],
        )
        run, asked = await drive(agent, lambda e: True)  # would accept any link
        assert asked == []
        assert run.result.status == "completed"
        contents.append(tool_results(run)[0].content)
    assert contents == ["visit decline"] * 3  # the server was told, not left waiting


@_combos(("low", "http", "auto"))
async def test_a_request_the_client_does_not_offer_is_an_error_result(server: Target) -> None:
    agent = Agent(
        "A", model=ScriptedModel([tool_call("forms"), text("done")]), tools=[server.tools()]
    )
    result = await agent.run("go")
    [message] = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert message.is_error
    assert "asked for sampling/createMessage, which this client does not offer" in message.content


# -- connections: opened on first use, closed when the root run ends ------------------------------
@_combos(("low", "stdio", "auto"), ("low", "stdio", "legacy"))
async def test_the_server_process_ends_with_the_root_run(server: Target) -> None:
    during: list[int] = []

    def answer(event: ClarificationRequest) -> Any:
        during.extend(stdio_children())
        return {"name": "Ada"}

    assert stdio_children() == []
    root, _ = nested(server.tools(), _ask_call(server))
    await drive(root, answer)
    assert len(during) == 1
    assert stdio_children() == []

    # Also when the run fails (the sub-agent's script runs out after the call).
    failing = Agent("A", model=ScriptedModel([tool_call("add", a=1, b=2)]), tools=[server.tools()])
    with pytest.raises(Exception, match="made request #2"):
        await failing.run("go")
    assert stdio_children() == []

    # And when it is cancelled while the server's question waits.
    agent = Agent("A", model=ScriptedModel([_ask_call(server)]), tools=[server.tools()])
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                assert len(stdio_children()) == 1
                run.cancel()
    assert run.result.status == "cancelled"
    assert stdio_children() == []


@_combos(("low", "stdio", "legacy"), ("low", "http", "legacy"))
async def test_overlapping_legacy_calls_each_get_a_connection(server: Target) -> None:
    # On 2025-11-25 an elicitation does not name its call: two calls at once get two
    # connections (two processes for stdio), so each question is its own call's.
    waiting: list[ClarificationRequest] = []
    agent = Agent(
        "A",
        model=ScriptedModel(
            [
                [tool_call("ask", why="one", _id="c1"), tool_call("ask", why="two", _id="c2")],
                tool_call("add", a=1, b=1),  # later calls reuse an idle connection
                text("done"),
            ]
        ),
        tools=[server.tools()],
    )
    children: list[int] = []
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                waiting.append(event)
                if len(waiting) == 2:
                    children.extend(stdio_children())
                    for question in reversed(waiting):
                        await run.respond(question.request_id, {"name": question.tool_call_id})
    by_call = {q.tool_call_id: q.question for q in waiting}
    assert by_call == {"c1": "What is your name? one", "c2": "What is your name? two"}
    assert [m.content for m in tool_results(run)] == [
        'ask accept {"name": "c1"}',
        'ask accept {"name": "c2"}',
        "2",
    ]
    if server.transport == "stdio":
        assert len(children) == 2
    assert stdio_children() == []


async def test_a_server_that_cannot_start_fails_the_agent_with_a_clear_error(
    tmp_path: Path,
) -> None:
    missing = MCPTools.stdio(str(tmp_path / "no-such-server"))
    agent = Agent("A", model=ScriptedModel([text("never")]), tools=[missing])
    with pytest.raises(MCPServerError, match=r"MCP server .*no-such-server could not be reached"):
        await agent.run("go")
    refused = MCPTools.http("http://127.0.0.1:9/mcp")  # discard port: nothing listens
    agent = Agent("B", model=ScriptedModel([text("never")]), tools=[refused])
    with pytest.raises(MCPServerError, match=r"127.0.0.1:9/mcp could not be reached"):
        await agent.run("go")
    exits_at_once = MCPTools.stdio(sys.executable, ["-c", "pass"])
    agent = Agent("C", model=ScriptedModel([text("never")]), tools=[exits_at_once])
    with pytest.raises(MCPServerError, match="could not be reached"):
        await agent.run("go")
    assert stdio_children() == []


def test_bad_arguments_are_refused_when_built() -> None:
    with pytest.raises(Exception, match="prefix"):
        MCPTools.stdio("x", prefix="has space")
    with pytest.raises(Exception, match="http"):
        MCPTools.http("ftp://example.com")
    with pytest.raises(Exception, match="mode"):
        MCPTools.stdio("x", mode="2025-06-18")  # type: ignore[arg-type]


async def test_an_agent_using_two_servers_and_a_model_that_reads_the_answer(
    tmp_path: Path,
) -> None:
    with (
        target("low", "http", "auto", tmp_path) as low,
        target("fast", "stdio", "legacy", tmp_path) as fast,
    ):

        def step(messages: Any, params: Any) -> Any:
            done = [m for m in messages if isinstance(m, ToolResultMessage)]
            if not done:
                return [tool_call("low_add", a=20, b=22), tool_call("fast_shout", text="hi")]
            return text(" ".join(m.content for m in done))

        agent = Agent("A", model=FunctionModel(step), tools=[low.tools("low"), fast.tools("fast")])
        result = await agent.run("go")
        assert result.output == "42 HI"
        assert low.effects() == ["add"] and fast.effects() == ["shout"]


@_combos(("low", "stdio", "auto"), ("low", "stdio", "legacy"))
async def test_a_server_that_dies_mid_call_fails_that_call_and_the_next_gets_a_new_one(
    server: Target,
) -> None:
    agent = Agent(
        "A",
        model=ScriptedModel([tool_call("crash"), tool_call("add", a=1, b=2), text("done")]),
        tools=[server.tools()],
    )
    result = await agent.run("go")
    crashed, added = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert crashed.is_error
    assert "the connection broke during 'crash'" in crashed.content
    assert (added.content, added.is_error) == ("3", False)
    assert server.effects() == ["crash", "add"]
    assert stdio_children() == []


def test_a_servers_label_keeps_secrets_out() -> None:
    # The label names the server in errors (which the model reads) and in questions.
    stdio = MCPTools.stdio("/usr/bin/npx", ["-y", "@acme/server", "--api-key", "s3cret"])
    assert stdio.label == "MCP server npx @acme/server"
    http = MCPTools.http("https://me:s3cret@mcp.example:8443/mcp?token=s3cret")
    assert http.label == "MCP server https://mcp.example:8443/mcp"
