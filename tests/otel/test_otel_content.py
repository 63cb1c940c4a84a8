"""OpenTelemetry: content only when capture is on (argument, environment variable), and a
hook that stays out of runs while no SDK is set."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import pytest
from _otel import Telemetry, otel, providers

import hpd_agent
from hpd_agent import Agent, Deny, ask_user, tool
from hpd_agent.events import ClarificationRequest, PermissionRequest
from hpd_agent.hooks import HookSet, installed
from hpd_agent.messages import Message
from hpd_agent.models import ModelRequestParams
from hpd_agent.otel import instrument, restore_default, uninstrument
from hpd_agent.testing import FunctionModel, ScriptedHuman, ScriptedModel, Step, text, tool_call

__all__ = ["otel"]  # the fixture, imported for pytest

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


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
    tracer_provider, meter_provider, telemetry = providers()
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
    tracer_provider, meter_provider, by_env = providers()
    instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    await _run_secret(by_env)
    wait = by_env.one("await_human text").attributes
    assert wait is not None and wait["hpd_agent.request.answer"] == "ANSWER-BLORB"

    tracer_provider, meter_provider, explicit = providers()
    instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=False
    )
    await _run_secret(explicit)
    assert [(s, v) for v in _every_recorded_value(explicit) for s in SECRETS if s in v] == []

    monkeypatch.setenv(CONTENT_ENV, "false")
    tracer_provider, meter_provider, off = providers()
    instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    await _run_secret(off)
    assert [(s, v) for v in _every_recorded_value(off) for s in SECRETS if s in v] == []


@tool(requires_approval=True)
def write_file(path: str) -> str:
    """Write a file.

    Args:
        path: Which file.
    """
    return f"wrote {path}"


# -- free when off -----------------------------------------------------------------------------
def test_without_an_sdk_the_hook_stays_out_of_runs() -> None:
    instrument()  # the global providers: the API's no-ops, no SDK set in this process
    try:
        assert any(type(h).__name__ == "OtelHook" for h in installed())
        assert HookSet(installed()).hooks == ()
        tracer_provider, meter_provider, _ = providers()
        instrument(tracer_provider=tracer_provider)
        assert len(HookSet(installed()).hooks) == 1
        instrument(meter_provider=meter_provider)
        assert len(HookSet(installed()).hooks) == 1
    finally:
        uninstrument()
        assert installed() == ()
        restore_default()
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


SDK_LATER = """
import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import hpd_agent
from hpd_agent.testing import ScriptedModel, text

hpd_agent.instrument()  # before the application sets its SDK
agent = hpd_agent.Agent("A", model=ScriptedModel([text("one"), text("two")]))
anyio.run(agent.run, "before")
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
anyio.run(agent.run, "after")
print(sorted(s.name for s in exporter.get_finished_spans()))
"""


def test_instrument_before_the_sdk_is_set_traces_runs_from_then_on() -> None:
    # The global provider can be set once per process: this runs in its own.
    out = subprocess.run(
        [sys.executable, "-c", SDK_LATER], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "['chat scripted', 'invoke_agent A']"
