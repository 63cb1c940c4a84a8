"""OpenTelemetry: the span tree of a run, its attributes and metrics, read with the SDK's
in-memory exporter and metric reader (a fresh provider pair per test)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import hpd_agent
from hpd_agent import Agent, Deny, ask_user, tool
from hpd_agent.events import ClarificationRequest, PermissionRequest
from hpd_agent.hooks import HookSet, installed
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.otel import instrument, uninstrument
from hpd_agent.store.sqlite import SQLiteStore
from hpd_agent.testing import FunctionModel, ScriptedHuman, ScriptedModel, Step, text, tool_call

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@dataclass
class Telemetry:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span

    def tree(self) -> list[tuple[str, list[Any]]]:
        """Every root span with its descendants: ``(name, [children...])``, children in
        start order (siblings that start together in name order)."""
        spans = self.spans
        ids = {s.context.span_id for s in spans}

        def children(parent: int | None) -> list[tuple[str, list[Any]]]:
            found = [
                s
                for s in spans
                if (s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None)
                == parent
            ]
            found.sort(key=lambda s: (s.start_time or 0, s.name))
            return [(s.name, children(s.context.span_id)) for s in found]

        return children(None)

    def metrics(self) -> dict[str, list[Any]]:
        """Data points by metric name."""
        data = self.reader.get_metrics_data()
        out: dict[str, list[Any]] = {}
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    out.setdefault(metric.name, []).extend(metric.data.data_points)
        return out


def _providers() -> tuple[TracerProvider, MeterProvider, Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    return tracer_provider, MeterProvider(metric_readers=[reader]), Telemetry(exporter, reader)


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    tracer_provider, meter_provider, telemetry = _providers()
    instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=False
    )
    yield telemetry
    uninstrument()


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
    assert dict(root.attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "Manager",
        "gen_ai.conversation.id": result.run_id,
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
        "hpd_agent.request.outcome": "answered",
    }
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
    assert root.attributes["gen_ai.conversation.id"] == first.run_id
    nested = otel.one("invoke_agent Coder")
    assert nested.attributes is not None and "hpd_agent.resumed" not in nested.attributes


# -- content -----------------------------------------------------------------------------------
SECRETS = (
    "PROMPT-XYZZY",
    "INSTR-PLUGH",
    "ARG-FROTZ",
    "RESULT-GRUE",
    "QUESTION-ZORK",
    "ANSWER-BLORB",
    "OUTPUT-QUUX",
    "FAIL-WUMPUS",
)


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value RESULT-GRUE for {key}"


def _secret_agent() -> Agent:
    def helper(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        raise RuntimeError("FAIL-WUMPUS while reading PROMPT-XYZZY")

    helper_agent = Agent("Helper", model=FunctionModel(helper, name="h"))
    model = ScriptedModel(
        [
            [
                tool_call("lookup", key="ARG-FROTZ"),
                tool_call("ask_user", question="QUESTION-ZORK?"),
                tool_call("Helper", query="ARG-FROTZ please"),
                tool_call("wipe", path="ARG-FROTZ"),
            ],
            text("OUTPUT-QUUX"),
        ],
        name="m",
    )

    @tool(requires_approval=True)
    def wipe(path: str) -> str:
        """Wipe.

        Args:
            path: What.
        """
        return "wiped"

    return Agent(
        "Keeper",
        model=model,
        instructions="INSTR-PLUGH",
        tools=[lookup, ask_user(), helper_agent.as_tool(), wipe],
    )


def _every_recorded_value(otel: Telemetry) -> list[str]:
    values: list[str] = []
    for span in otel.spans:
        values.append(span.name)
        values.append(span.status.description or "")
        values.extend(str(v) for v in (span.attributes or {}).values())
        for event in span.events:
            values.append(event.name)
            values.extend(str(v) for v in (event.attributes or {}).values())
    for points in otel.metrics().values():
        for p in points:
            values.extend(str(v) for v in p.attributes.values())
    return values


async def _run_secret(otel: Telemetry) -> None:
    human = ScriptedHuman(
        {"QUESTION-ZORK": "ANSWER-BLORB"}, permissions={"wipe": Deny(reason="ANSWER-BLORB")}
    )
    result = await _secret_agent().run("PROMPT-XYZZY", handler=human)
    assert result.output == "OUTPUT-QUUX"
    assert len(otel.named("await_human text")) == 1
    assert len(otel.named("await_human permission")) == 1


async def test_capture_off_records_no_content_anywhere(otel: Telemetry) -> None:
    await _run_secret(otel)
    values = _every_recorded_value(otel)
    assert len(values) > 50
    leaked = [(s, v) for v in values for s in SECRETS if s in v]
    assert leaked == []
    # the failure is still there, by class
    helper_chat = otel.one("chat h")
    assert helper_chat.attributes is not None
    assert helper_chat.attributes["error.type"] == "RuntimeError"


async def test_capture_on_records_messages_questions_and_answers(
    otel: Telemetry,
) -> None:
    tracer_provider, meter_provider, telemetry = _providers()
    instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True)
    await _run_secret(telemetry)
    first, last = sorted(telemetry.named("chat m"), key=lambda s: s.start_time or 0)
    assert first.attributes is not None and last.attributes is not None
    sent = json.loads(str(first.attributes["gen_ai.input.messages"]))
    assert sent == [
        {"role": "system", "parts": [{"type": "text", "content": "INSTR-PLUGH"}]},
        {"role": "user", "parts": [{"type": "text", "content": "PROMPT-XYZZY"}]},
    ]
    calls = json.loads(str(first.attributes["gen_ai.output.messages"]))
    assert calls[0]["role"] == "assistant" and calls[0]["finish_reason"] == "tool_calls"
    assert calls[0]["parts"][0] == {
        "type": "tool_call",
        "id": "call_1",
        "name": "lookup",
        "arguments": {"key": "ARG-FROTZ"},
    }
    back = json.loads(str(last.attributes["gen_ai.input.messages"]))
    responses = [p for m in back if m["role"] == "tool" for p in m["parts"]]
    assert {
        "type": "tool_call_response",
        "id": "call_1",
        "response": "value RESULT-GRUE for ARG-FROTZ",
    } in responses
    final = json.loads(str(last.attributes["gen_ai.output.messages"]))
    assert final == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "OUTPUT-QUUX"}],
            "finish_reason": "stop",
        }
    ]
    question = telemetry.one("await_human text").attributes
    assert question is not None
    assert question["hpd_agent.request.question"] == "QUESTION-ZORK?"
    assert question["hpd_agent.request.answer"] == "ANSWER-BLORB"
    permission = telemetry.one("await_human permission").attributes
    assert permission is not None
    assert json.loads(str(permission["hpd_agent.request.question"])) == {
        "tool": "wipe",
        "arguments": {"path": "ARG-FROTZ"},
    }
    assert "ANSWER-BLORB" in str(permission["hpd_agent.request.answer"])
    lookup_call = telemetry.one("execute_tool lookup").attributes
    assert lookup_call is not None
    assert lookup_call["gen_ai.tool.call.arguments"] == '{"key": "ARG-FROTZ"}'
    assert lookup_call["gen_ai.tool.call.result"] == "value RESULT-GRUE for ARG-FROTZ"
    # instrument() again replaced the providers: the fixture's saw nothing of this run
    assert otel.spans == []


async def test_env_var_turns_capture_on_and_explicit_false_wins(
    otel: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTENT_ENV, "true")
    tracer_provider, meter_provider, by_env = _providers()
    instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    await _run_secret(by_env)
    wait = by_env.one("await_human text").attributes
    assert wait is not None and wait["hpd_agent.request.answer"] == "ANSWER-BLORB"

    tracer_provider, meter_provider, explicit = _providers()
    instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=False
    )
    await _run_secret(explicit)
    assert [(s, v) for v in _every_recorded_value(explicit) for s in SECRETS if s in v] == []

    monkeypatch.setenv(CONTENT_ENV, "false")
    tracer_provider, meter_provider, off = _providers()
    instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    await _run_secret(off)
    assert [(s, v) for v in _every_recorded_value(off) for s in SECRETS if s in v] == []


# -- free when off -----------------------------------------------------------------------------
def test_without_an_sdk_the_hook_stays_out_of_runs() -> None:
    instrument()  # the global providers: the API's no-ops, no SDK set in this process
    try:
        assert any(type(h).__name__ == "OtelHook" for h in installed())
        assert HookSet(installed()).hooks == ()
        tracer_provider, meter_provider, _ = _providers()
        instrument(tracer_provider=tracer_provider)
        assert len(HookSet(installed()).hooks) == 1
        instrument(meter_provider=meter_provider)
        assert len(HookSet(installed()).hooks) == 1
    finally:
        uninstrument()
    assert installed() == ()


def test_instrument_is_on_the_package_face_and_import_stays_light() -> None:
    assert hpd_agent.instrument is instrument
    assert "instrument" in hpd_agent.__all__
    code = "import sys, hpd_agent; print('opentelemetry' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_request_events_match_the_wait_spans(otel: Telemetry) -> None:
    """Ids on the wait spans are the ids the stream carries (a backend can join them)."""
    human = ScriptedHuman({"language": "Go"}, permissions={"write_file": True})
    model = ScriptedModel(
        [
            [tool_call("ask_user", question="Which language?"), tool_call("write_file", path="x")],
            text("ok"),
        ],
        name="m",
    )
    await Agent("A", model=model, tools=[ask_user(), write_file]).run("go", handler=human)
    ids = {r.request_id for r in human.asked}
    assert {
        str((s.attributes or {})["hpd_agent.request.id"])
        for s in otel.spans
        if s.name.startswith("await_human")
    } == ids
    assert {type(r) for r in human.asked} == {ClarificationRequest, PermissionRequest}
