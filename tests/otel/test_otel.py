"""OpenTelemetry: the span tree of a run, its attributes and metrics, read with the SDK's
in-memory exporter and metric reader (a fresh provider pair per test). Content capture and
the cost when off: test_otel_content.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from _otel import Telemetry, otel
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from hpd_agent import Agent, Deny, ask_user, tool
from hpd_agent.events import ClarificationRequest, invocation_id
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store.sqlite import SQLiteStore
from hpd_agent.testing import FunctionModel, ScriptedHuman, ScriptedModel, Step, text, tool_call

__all__ = ["otel"]  # the fixture, imported for pytest


def _results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def _delegate(to: str, name: str) -> FunctionModel:
    def fn(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        got = _results(messages)
        if not got:
            return tool_call(to, query=f"work for {to}")
        return text(f"{info.agent_name}: {got[-1]}", input_tokens=10, output_tokens=3)

    return FunctionModel(fn, name=name)


def _engineer(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = _results(messages)
    if not got:
        return tool_call("ask_user", question="Which language?", options=["Go", "Rust"])
    return text(f"scaffolded in {got[-1]}", input_tokens=7, output_tokens=2)


def depth3_tree() -> Agent:
    """Manager -> Architect -> Lead -> Engineer; the Engineer (depth 3) asks the human."""
    engineer = Agent(
        "Engineer", model=FunctionModel(_engineer, name="engineer-model"), tools=[ask_user()]
    )
    lead = Agent("Lead", model=_delegate("Engineer", "lead-model"), tools=[engineer.as_tool()])
    architect = Agent(
        "Architect", model=_delegate("Lead", "architect-model"), tools=[lead.as_tool()]
    )
    return Agent(
        "Manager", model=_delegate("Architect", "manager-model"), tools=[architect.as_tool()]
    )


def _agent_level(name: str, model: str, inner: list[Any]) -> tuple[str, list[Any]]:
    return (
        f"invoke_agent {name}",
        [(f"chat {model}", []), *inner, (f"chat {model}", [])],
    )


async def test_depth3_question_tree_attributes_and_metrics(otel: Telemetry) -> None:
    human = ScriptedHuman({"language": "Rust"})
    result = await depth3_tree().run("Build the service", handler=human)
    assert result.output == "Manager: Architect: Lead: scaffolded in Rust"
    (request, _answer) = human.answered[0]
    assert request.depth == 3

    engineer = _agent_level(
        "Engineer",
        "engineer-model",
        [("execute_tool ask_user", [("await_human text", [])])],
    )
    lead = _agent_level("Lead", "lead-model", [("execute_tool Engineer", [engineer])])
    architect = _agent_level("Architect", "architect-model", [("execute_tool Lead", [lead])])
    manager = _agent_level("Manager", "manager-model", [("execute_tool Architect", [architect])])
    assert otel.tree() == [manager]
    assert len({s.context.trace_id for s in otel.spans}) == 1, "one trace per root run"

    root = otel.one("invoke_agent Manager")
    assert root.kind is SpanKind.INTERNAL
    assert root.attributes is not None
    root_invocation = root.attributes["hpd_agent.invocation_id"]
    assert isinstance(root_invocation, str) and root_invocation.startswith("inv_")
    assert dict(root.attributes) == {
        "hpd_agent.invocation_id": root_invocation,
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "Manager",
        "gen_ai.conversation.id": invocation_id(result.run_id),
        "hpd_agent.agent.path": ("Manager",),
        "gen_ai.request.model": "manager-model",
        # its own two model calls only: the sub-agents report theirs on their own spans
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 3,
    }
    deepest = otel.one("invoke_agent Engineer").attributes
    assert deepest is not None
    assert deepest["hpd_agent.agent.path"] == ("Manager", "Architect", "Lead", "Engineer")
    assert deepest["gen_ai.usage.input_tokens"] == 7

    chats = otel.named("chat engineer-model")
    assert [c.kind for c in chats] == [SpanKind.CLIENT, SpanKind.CLIENT]
    first, last = sorted(chats, key=lambda s: s.start_time or 0)
    assert first.attributes is not None and last.attributes is not None
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "hpd_agent.scripted"
    assert first.attributes["gen_ai.request.model"] == "engineer-model"
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert last.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert (
        last.attributes["gen_ai.usage.input_tokens"],
        last.attributes["gen_ai.usage.output_tokens"],
    ) == (7, 2)

    call = otel.one("execute_tool ask_user")
    assert call.attributes is not None
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"
    assert call.attributes["gen_ai.tool.name"] == "ask_user"
    assert isinstance(call.attributes["gen_ai.tool.call.id"], str)

    wait = otel.one("await_human text")
    assert wait.attributes is not None
    assert dict(wait.attributes) == {
        "hpd_agent.request.id": request.request_id,
        "hpd_agent.request.kind": "text",
        "hpd_agent.agent.path": ("Manager", "Architect", "Lead", "Engineer"),
        "hpd_agent.invocation_id": request.invocation_id,
        "hpd_agent.request.outcome": "answered",
        "hpd_agent.channel": "api",  # a ScriptedHuman's answer, naming nobody
    }
    assert deepest["hpd_agent.invocation_id"] == request.invocation_id
    assert all(s.status.status_code is StatusCode.UNSET for s in otel.spans)

    points = otel.metrics()
    tokens = {
        p.attributes["gen_ai.token.type"]: p
        for p in points["gen_ai.client.token.usage"]
        if p.attributes["gen_ai.request.model"] == "manager-model"
    }
    assert (tokens["input"].sum, tokens["output"].sum) == (10, 3)
    durations = points["gen_ai.client.operation.duration"]
    assert sum(p.count for p in durations) == 8  # two model calls per agent
    (waited,) = points["hpd_agent.human.wait.duration"]
    assert waited.count == 1
    assert dict(waited.attributes) == {
        "hpd_agent.request.kind": "text",
        "hpd_agent.request.outcome": "answered",
    }
    (pending,) = points["hpd_agent.requests.pending"]
    assert pending.value == 0


@tool
async def fetch(source: str) -> str:
    """Fetch from a source.

    Args:
        source: Where from.
    """
    await anyio.lowlevel.checkpoint()
    return f"data from {source}"


async def test_parallel_calls_are_siblings_each_with_its_own_wait(otel: Telemetry) -> None:
    model = ScriptedModel(
        [
            [
                tool_call("ask_user", question="Frontend framework?"),
                tool_call("ask_user", question="Backend framework?"),
                tool_call("fetch", source="docs"),
            ],
            text("done"),
        ],
        name="m",
    )
    agent = Agent("Planner", model=model, tools=[ask_user(), fetch])
    seen: list[str] = []

    async with agent.stream("plan") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                seen.append(event.request_id)
                if len(seen) == 2:  # both wait at once: answer them now
                    await run.respond(seen[1], "FastAPI")
                    await run.respond(seen[0], "React")
    assert run.result is not None and run.result.output == "done"

    assert otel.tree() == [
        (
            "invoke_agent Planner",
            [
                ("chat m", []),
                ("execute_tool ask_user", [("await_human text", [])]),
                ("execute_tool ask_user", [("await_human text", [])]),
                ("execute_tool fetch", []),
                ("chat m", []),
            ],
        )
    ]
    asks = otel.named("execute_tool ask_user")
    root = otel.one("invoke_agent Planner")
    assert {s.parent.span_id for s in asks if s.parent} == {root.context.span_id}
    first, second = sorted(asks, key=lambda s: s.start_time or 0)
    assert second.start_time is not None and first.end_time is not None
    assert second.start_time < first.end_time, "the two calls ran at the same time"
    # each wait hangs under the call that asked it
    for ask in asks:
        (wait,) = [
            w
            for w in otel.named("await_human text")
            if w.parent and w.parent.span_id == ask.context.span_id
        ]
        assert wait.attributes is not None
        assert wait.attributes["hpd_agent.request.outcome"] == "answered"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: Which file.
    """
    return f"deleted {path}"


@tool(requires_approval=True)
def write_file(path: str) -> str:
    """Write a file.

    Args:
        path: Which file.
    """
    return f"wrote {path}"


async def test_permission_denied_and_approved(otel: Telemetry) -> None:
    model = ScriptedModel(
        [
            [tool_call("delete_file", path="README.md"), tool_call("write_file", path="a.txt")],
            text("ok"),
        ],
        name="m",
    )
    agent = Agent("Cleaner", model=model, tools=[delete_file, write_file])
    human = ScriptedHuman(permissions={"delete_file": Deny(reason="keep it"), "write_file": True})
    result = await agent.run("clean up", handler=human)
    assert result.status == "completed"

    def wait_under(tool_name: str) -> ReadableSpan:
        call = otel.one(f"execute_tool {tool_name}")
        (wait,) = [
            w
            for w in otel.named("await_human permission")
            if w.parent and w.parent.span_id == call.context.span_id
        ]
        return wait

    denied = wait_under("delete_file")
    assert denied.attributes is not None
    assert denied.attributes["hpd_agent.request.kind"] == "permission"
    assert denied.attributes["hpd_agent.request.outcome"] == "denied"
    assert denied.status.status_code is StatusCode.UNSET
    approved = wait_under("write_file")
    assert approved.attributes is not None
    assert approved.attributes["hpd_agent.request.outcome"] == "approved"
    # A denial is the human's decision, not a failure of the tool call.
    assert otel.one("execute_tool delete_file").status.status_code is StatusCode.UNSET
    outcomes = {
        p.attributes["hpd_agent.request.outcome"]
        for p in otel.metrics()["hpd_agent.human.wait.duration"]
    }
    assert outcomes == {"denied", "approved"}


async def test_question_timeout_is_an_error_of_type_timeout(otel: Telemetry) -> None:
    model = ScriptedModel(
        [tool_call("ask_user", question="Anyone there?"), text("gave up")], name="m"
    )
    agent = Agent("Asker", model=model, tools=[ask_user(timeout=0.05)])
    async with agent.stream("go") as run:
        async for _ in run:
            pass  # listening, never answering: the question expires
    assert run.result is not None and run.result.output == "gave up"

    wait = otel.one("await_human text")
    assert wait.attributes is not None
    assert wait.attributes["hpd_agent.request.outcome"] == "timeout"
    assert wait.attributes["error.type"] == "timeout"
    assert wait.status.status_code is StatusCode.ERROR
    assert wait.end_time is not None and wait.start_time is not None
    assert wait.end_time - wait.start_time >= 40_000_000, "its duration is the wait"
    (point,) = otel.metrics()["hpd_agent.human.wait.duration"]
    assert point.attributes["hpd_agent.request.outcome"] == "timeout"


async def test_a_declined_question_is_recorded_as_declined_not_an_error(otel: Telemetry) -> None:
    model = ScriptedModel([tool_call("ask_user", question="Your age?"), text("skipped")], name="m")
    agent = Agent("Asker", model=model, tools=[ask_user()])
    await agent.run("go", handler=ScriptedHuman().decline("age"))
    wait = otel.one("await_human text")
    assert wait.attributes is not None
    assert wait.attributes["hpd_agent.request.outcome"] == "declined"
    assert "error.type" not in wait.attributes
    assert wait.status.status_code is StatusCode.UNSET
    (point,) = otel.metrics()["hpd_agent.human.wait.duration"]
    assert point.attributes["hpd_agent.request.outcome"] == "declined"


async def test_tool_timeout_is_an_error_of_type_timeout(otel: Telemetry) -> None:
    never = anyio.Event()

    @tool(timeout=0.05)
    async def hang() -> str:
        """Wait for something that never happens."""
        await never.wait()
        return "unreachable"

    model = ScriptedModel([tool_call("hang"), text("moved on")], name="m")
    result = await Agent("Waiter", model=model, tools=[hang]).run("go")
    assert result.output == "moved on"
    span = otel.one("execute_tool hang")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "timeout"


async def test_failing_model_marks_its_spans_with_the_exception_class(otel: Telemetry) -> None:
    def broken(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        raise ConnectionResetError("provider went away")

    worker = Agent("Worker", model=FunctionModel(broken, name="broken-model"))
    boss = Agent(
        "Boss",
        model=ScriptedModel([tool_call("Worker", query="do it"), text("worker failed")], name="b"),
        tools=[worker.as_tool()],
    )
    result = await boss.run("go")
    assert result.output == "worker failed"
    for name in ("chat broken-model", "invoke_agent Worker", "execute_tool Worker"):
        span = otel.one(name)
        assert span.status.status_code is StatusCode.ERROR, name
        assert span.attributes is not None
        assert span.attributes["error.type"] == "ConnectionResetError", name
    assert otel.one("invoke_agent Boss").status.status_code is StatusCode.UNSET
    failed = [
        p
        for p in otel.metrics()["gen_ai.client.operation.duration"]
        if p.attributes.get("error.type") == "ConnectionResetError"
    ]
    assert [p.count for p in failed] == [1]

    # At the root, the run fails and so does its root span.
    with pytest.raises(ConnectionResetError):
        await Agent("Solo", model=FunctionModel(broken, name="x")).run("go")
    solo = otel.one("invoke_agent Solo")
    assert solo.status.status_code is StatusCode.ERROR
    assert solo.attributes is not None and solo.attributes["error.type"] == "ConnectionResetError"


def _durable_tree(calls: list[str]) -> Agent:
    def coder(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        calls.append(f"coder@{info.turn}")
        if info.turn == 0:
            return [
                tool_call("fetch", _id="f", source="spec"),
                tool_call("ask_user", _id="ask", question="Which framework?"),
            ]
        return text("built with " + _results(messages)[-1])

    def orchestrator(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        calls.append(f"orchestrator@{info.turn}")
        if info.turn == 0:
            return tool_call("Coder", _id="delegate", query="Build the API")
        return text("Orchestrator: " + _results(messages)[-1])

    coder_agent = Agent(
        "Coder", model=FunctionModel(coder, name="coder"), tools=[fetch, ask_user()]
    )
    return Agent(
        "Orchestrator",
        model=FunctionModel(orchestrator, name="orchestrator"),
        tools=[coder_agent.as_tool()],
    )


async def test_resumed_run_has_spans_only_for_real_work(otel: Telemetry, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    calls: list[str] = []
    try:
        first = await _durable_tree(calls).run("go", store=store, on_unhandled="interrupt")
        assert first.status == "interrupted"
        (pending,) = first.pending
        wait = otel.one("await_human text")
        assert wait.attributes is not None
        assert wait.attributes["hpd_agent.request.outcome"] == "interrupted"
        assert otel.metrics()["hpd_agent.requests.pending"][0].value == 0
        first_root = otel.one("invoke_agent Orchestrator")
        assert first_root.attributes is not None
        assert "hpd_agent.resumed" not in first_root.attributes
        otel.exporter.clear()

        resumed = await _durable_tree(calls).resume(
            first.run_id, store=store, answers={pending.request_id: "FastAPI"}
        )
    finally:
        await store.aclose()
    assert resumed.output == "Orchestrator: built with FastAPI"
    assert calls == ["orchestrator@0", "coder@0", "coder@1", "orchestrator@1"]
    # Replayed: orchestrator@0, coder@0, the fetch result, the stored answer. Live again:
    # the unfinished delegation and question calls, and the two model calls after them.
    assert otel.tree() == [
        (
            "invoke_agent Orchestrator",
            [
                (
                    "execute_tool Coder",
                    [("invoke_agent Coder", [("execute_tool ask_user", []), ("chat coder", [])])],
                ),
                ("chat orchestrator", []),
            ],
        )
    ]
    root = otel.one("invoke_agent Orchestrator")
    assert root.attributes is not None and root.attributes["hpd_agent.resumed"] is True
    assert root.attributes["gen_ai.conversation.id"] == invocation_id(first.run_id)
    nested = otel.one("invoke_agent Coder")
    assert nested.attributes is not None and "hpd_agent.resumed" not in nested.attributes


async def test_parallel_calls_of_one_agent_each_have_their_span_and_invocation_id(
    otel: Telemetry,
) -> None:
    from _trees import asking_writer as _asking_writer
    from _trees import writers_root as _root

    from hpd_agent.events import AgentStarted

    started: dict[str, str] = {}  # query -> invocation_id
    asked: dict[str, ClarificationRequest] = {}  # invocation_id -> its question
    async with _root(_asking_writer()).stream("go") as run:
        root_id = ""
        async for event in run:
            root_id = root_id or event.invocation_id
            if isinstance(event, AgentStarted) and event.depth == 1:
                started[event.input] = event.invocation_id
            if isinstance(event, ClarificationRequest):
                asked[event.invocation_id] = event
                if len(asked) == 2:
                    for request in reversed(list(asked.values())):
                        await run.respond(request.request_id, "ok")
    assert run.result is not None and run.result.status == "completed"

    def attrs(span: ReadableSpan) -> dict[str, Any]:
        return dict(span.attributes or {})

    by_id = {s.context.span_id: s for s in otel.spans}
    root = otel.one("invoke_agent Root")
    assert attrs(root)["hpd_agent.invocation_id"] == root_id
    assert "hpd_agent.parent_invocation_id" not in attrs(root)
    writers = otel.named("invoke_agent Writer")
    assert len(writers) == 2
    assert {attrs(w)["hpd_agent.invocation_id"] for w in writers} == set(started.values())
    for writer in writers:
        inv = attrs(writer)["hpd_agent.invocation_id"]
        assert attrs(writer)["hpd_agent.parent_invocation_id"] == root_id
        # Each call hangs under its own execute_tool span of the Root.
        assert writer.parent is not None
        call = by_id[writer.parent.span_id]
        assert call.name == "execute_tool Writer"
        assert attrs(call)["hpd_agent.invocation_id"] == root_id
        assert call.parent is not None and call.parent.span_id == root.context.span_id
        # Its own children, all carrying its invocation id.
        children = sorted(
            (s for s in otel.spans if s.parent and s.parent.span_id == writer.context.span_id),
            key=lambda s: s.start_time or 0,
        )
        assert [s.name for s in children] == ["chat reply", "execute_tool ask_user", "chat reply"]
        assert {attrs(s)["hpd_agent.invocation_id"] for s in children} == {inv}
        (wait,) = [
            s for s in otel.spans if s.parent and s.parent.span_id == children[1].context.span_id
        ]
        assert wait.name == "await_human text"
        assert attrs(wait)["hpd_agent.invocation_id"] == inv
        assert attrs(wait)["hpd_agent.request.id"] == asked[inv].request_id


async def test_await_human_names_who_answered_on_which_channel(otel: Telemetry) -> None:
    model = ScriptedModel([tool_call("ask_user", question="Colour?"), text("done")], name="m")
    agent = Agent("Asker", model=model, tools=[ask_user()])
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                await run.respond(event.request_id, "red", by="alice", channel="web")
    wait = otel.one("await_human text")
    assert wait.attributes is not None
    assert wait.attributes["hpd_agent.answered_by"] == "alice"
    assert wait.attributes["hpd_agent.channel"] == "web"
    # Who answered is not a metric label (names are unbounded).
    (point,) = otel.metrics()["hpd_agent.human.wait.duration"]
    assert "hpd_agent.answered_by" not in point.attributes


async def test_await_human_names_an_author_who_answered_through_the_store(
    otel: Telemetry, tmp_path: Path
) -> None:
    from hpd_agent.store import respond

    store = SQLiteStore(tmp_path / "runs.db")
    model = ScriptedModel([tool_call("ask_user", question="Colour?"), text("done")], name="m")
    agent = Agent("Asker", model=model, tools=[ask_user()])
    try:
        async with agent.stream("go", store=store) as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    await respond(store, event.request_id, "red", by="bob", channel="cli")
    finally:
        await store.aclose()
    wait = otel.one("await_human text")
    assert wait.attributes is not None
    assert wait.attributes["hpd_agent.answered_by"] == "bob"
    assert wait.attributes["hpd_agent.channel"] == "cli"


async def test_await_human_of_a_call_a_grant_approved_names_the_grant(otel: Telemetry) -> None:
    from hpd_agent import Approve, PermissionRequest
    from hpd_agent.permissions import PROCESS_GRANTS

    @tool(requires_approval=True)
    def deploy(env: str) -> str:
        """Deploy."""
        return f"deployed {env}"

    PROCESS_GRANTS.clear()
    try:
        for answer in (Approve(scope="always"), None):  # the second run is nobody's to answer
            model = ScriptedModel([tool_call("deploy", env="staging"), text("done")], name="m")
            async with Agent("Deployer", model=model, tools=[deploy]).stream("go") as run:
                async for event in run:
                    if isinstance(event, PermissionRequest) and answer is not None:
                        await run.respond(event.request_id, answer, by="alice", channel="cli")
        [grant] = await PROCESS_GRANTS.list_grants()
    finally:
        PROCESS_GRANTS.clear()
    authors = [
        (w.attributes["hpd_agent.answered_by"], w.attributes["hpd_agent.channel"])
        for w in otel.named("await_human permission")
        if w.attributes is not None
    ]
    assert authors == [("alice", "cli"), (f"grant:{grant.grant_id}", "grant")]
