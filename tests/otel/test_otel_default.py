"""OpenTelemetry by default: an application that sets an SDK globally sees the spans with no
``instrument()`` call, one without an SDK pays nothing and loads nothing; and names (tool,
agent, model) reach spans bounded, a tool the agent does not have only with capture on."""

from __future__ import annotations

import json
import subprocess
import sys

from _otel import Telemetry, otel, providers

from hpd_agent import Agent, tool
from hpd_agent.hooks import process_hooks
from hpd_agent.otel import _attributes as a
from hpd_agent.otel import instrument
from hpd_agent.testing import FunctionModel, ScriptedModel, text, tool_call

__all__ = ["otel"]  # the fixture, imported for pytest


def _python(code: str) -> str:
    # The global providers can be set once per process: each scenario runs in its own.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


SDK_GLOBAL = """
import anyio, json
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import hpd_agent
from hpd_agent.otel import instrument, restore_default, uninstrument
from hpd_agent.testing import ScriptedModel, text, tool_call

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

@hpd_agent.tool
def lookup(key: str) -> str:
    '''Look up.

    Args:
        key: The key.
    '''
    return "RESULT-" + key

def agent():
    model = ScriptedModel([tool_call("lookup", key="ARG"), text("done")], name="m")
    return hpd_agent.Agent("A", model=model, tools=[lookup])

def names():
    found = sorted(s.name for s in exporter.get_finished_spans())
    exporter.clear()
    return found

def values():
    return [str(v) for s in exporter.get_finished_spans() for v in (s.attributes or {}).values()]

report = {}
anyio.run(agent().run, "go")  # no instrument() call
report["default"] = names()
data = reader.get_metrics_data()
report["metrics"] = sorted(
    m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
)
uninstrument()
anyio.run(agent().run, "go")
report["uninstrumented"] = names()
restore_default()
anyio.run(agent().run, "go")
report["restored"] = names()
instrument(capture_content=True)  # replaces the default: no span twice
anyio.run(agent().run, "go")
report["capture"] = "RESULT-ARG" in values()
report["instrumented"] = names()
print(json.dumps(report))
"""

A_RUN = ["chat m", "chat m", "execute_tool lookup", "invoke_agent A"]


def test_a_global_sdk_sees_the_spans_with_no_instrument_call() -> None:
    report = json.loads(_python(SDK_GLOBAL))
    assert report["default"] == A_RUN
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"} <= set(
        report["metrics"]
    )
    # uninstrument() turns the default off too; restore_default() brings it back
    assert report["uninstrumented"] == []
    assert report["restored"] == A_RUN
    # instrument() still chooses (content capture here), in place of the default
    assert report["instrumented"] == A_RUN
    assert report["capture"] is True


NO_SDK = """
import anyio, sys
import hpd_agent
from hpd_agent.hooks import process_hooks
from hpd_agent.testing import ScriptedModel, text
agent = hpd_agent.Agent("A", model=ScriptedModel([text("done")]))
result = anyio.run(agent.run, "go")
loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry", "hpd_agent.otel._")))
print(result.output, process_hooks(), loaded)
"""


def test_without_an_sdk_nothing_is_loaded_nor_recorded() -> None:
    assert _python(NO_SDK) == "done [] ['hpd_agent.otel._probe']"


async def test_with_the_api_loaded_and_no_sdk_runs_get_no_hook() -> None:
    # This process has the API (and the SDK's modules) loaded, and no global provider set.
    assert process_hooks() == []
    result = await Agent("A", model=ScriptedModel([text("done")])).run("go")
    assert result.output == "done"


# -- names ---------------------------------------------------------------------------------
CARD = "4111111111111111"
HOSTILE = f"charge card {CARD} exp 12/29 " + "x" * 2000


def _caller() -> Agent:
    @tool
    def lookup(key: str) -> str:
        """Look up.

        Args:
            key: The key.
        """
        return key

    model = ScriptedModel([tool_call(HOSTILE, key="k"), text("done")], name="m")
    return Agent("A", model=model, tools=[lookup])


async def test_an_unknown_tool_name_is_content(otel: Telemetry) -> None:
    assert (await _caller().run("go")).output == "done"
    assert [v for v in otel.recorded_values() if CARD in v] == []
    attributes = otel.one("execute_tool unknown_tool").attributes
    assert attributes is not None
    assert attributes["gen_ai.tool.name"] == "unknown_tool"
    assert attributes["error.type"] == "unknown_tool"


async def test_an_unknown_tool_name_with_capture_on_is_bounded(otel: Telemetry) -> None:
    tracer_provider, meter_provider, telemetry = providers()
    instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True)
    assert (await _caller().run("go")).output == "done"
    (span,) = [s for s in telemetry.spans if s.name.startswith("execute_tool")]
    assert span.attributes is not None
    name = str(span.attributes["gen_ai.tool.name"])
    assert CARD in name and len(name) == a.NAME_LIMIT and name.endswith("…")
    assert span.name == f"execute_tool {name}"
    for s in telemetry.spans:  # no name anywhere is longer than the limit
        assert len(s.name) <= len("execute_tool ") + a.NAME_LIMIT


async def test_agent_and_model_names_are_bounded_and_printable(otel: Telemetry) -> None:
    long_name = "Agent" + "y" * 1000
    model = FunctionModel(lambda messages, info: text("ok"), name="model\x1b[31m" + "z" * 500)
    assert (await Agent(long_name, model=model).run("go")).output == "ok"
    agent_span = otel.one(f"invoke_agent {long_name[: a.NAME_LIMIT - 1]}…")
    assert agent_span.attributes is not None
    assert agent_span.attributes["gen_ai.agent.name"] == f"{long_name[: a.NAME_LIMIT - 1]}…"
    assert agent_span.attributes["hpd_agent.agent.path"] == (f"{long_name[: a.NAME_LIMIT - 1]}…",)
    (chat,) = [s for s in otel.spans if s.name.startswith("chat ")]
    assert chat.attributes is not None
    model_name = str(chat.attributes["gen_ai.request.model"])
    assert model_name.startswith("model\\x1b[31m") and len(model_name) == a.NAME_LIMIT
    assert "\x1b" not in chat.name and chat.name == f"chat {model_name}"
    assert all(len(str(v)) <= a.NAME_LIMIT for v in chat.attributes.values())


def test_name_keeps_ordinary_names_and_bounds_the_rest() -> None:
    assert a.name("lookup") == "lookup"
    assert a.name("x" * a.NAME_LIMIT) == "x" * a.NAME_LIMIT
    assert a.name("x" * (a.NAME_LIMIT + 1)) == "x" * (a.NAME_LIMIT - 1) + "…"
    assert a.name("smile \ud83d") == "smile \\ud83d"  # an exporter cannot encode it
    assert a.name("a\nb") == "a\\nb"
