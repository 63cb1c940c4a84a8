"""Tracing: the span tree of a nested clarification, printed to the terminal.

Manager -> Architect -> Engineer; the Engineer asks the human which language to use. With an
OpenTelemetry SDK installed, the run is one trace: an
``invoke_agent`` span per agent, ``chat`` spans for model calls, ``execute_tool`` spans for
tool calls (a sub-agent's span hangs under the call that ran it) and an ``await_human`` span
for the time the human took. Here the spans go to an in-memory exporter and are drawn as a
tree; in production you would send them to Jaeger, Tempo, Honeycomb, Langfuse, ... instead.

    pip install opentelemetry-sdk
    python examples/tracing.py
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import anyio

try:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
except ImportError:
    sys.exit("This example needs the OpenTelemetry SDK: pip install opentelemetry-sdk")

from hpd_agent import Agent, ask_user, instrument
from hpd_agent.events import format_path
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, ScriptedHuman, Step, text, tool_call


def results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def engineer(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = results(messages)
    if not got:
        return tool_call("ask_user", question="Which language should the service use?")
    return text(f"Service scaffolded in {got[-1]}.", input_tokens=120, output_tokens=9)


def delegate(to: str, query: str, name: str) -> FunctionModel:
    def fn(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        got = results(messages)
        if not got:
            return tool_call(to, query=query)
        return text(f"{info.agent_name} reports: {got[-1]}", input_tokens=200, output_tokens=15)

    return FunctionModel(fn, name=name)


engineer_agent = Agent(
    "Engineer", model=FunctionModel(engineer, name="engineer-model"), tools=[ask_user()]
)
architect = Agent(
    "Architect",
    model=delegate("Engineer", "Scaffold the service", "architect-model"),
    tools=[engineer_agent.as_tool()],
)
manager = Agent(
    "Manager",
    model=delegate("Architect", "Design the service", "manager-model"),
    tools=[architect.as_tool()],
)

# What each kind of span shows on its line: (label, attribute).
SHOWN = {
    "invoke_agent": (
        ("path", "hpd_agent.agent.path"),
        ("tokens in", "gen_ai.usage.input_tokens"),
        ("out", "gen_ai.usage.output_tokens"),
    ),
    "chat": (
        ("provider", "gen_ai.provider.name"),
        ("finish", "gen_ai.response.finish_reasons"),
    ),
    "execute_tool": (("call", "gen_ai.tool.call.id"),),
    "await_human": (("outcome", "hpd_agent.request.outcome"),),
}


def describe(span: ReadableSpan) -> str:
    attributes = span.attributes or {}
    fields = []
    for label, key in SHOWN.get(span.name.split(" ")[0], ()):
        value = attributes.get(key)
        if isinstance(value, tuple):
            names = map(str, value)
            value = format_path(names) if key == "hpd_agent.agent.path" else ", ".join(names)
        fields.append(f"{label}={value}")
    ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
    return f"{span.name}  ({', '.join(fields)})  {ms:.2f} ms"


def print_tree(spans: Sequence[ReadableSpan]) -> None:
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)

    def walk(parent: int | None, prefix: str) -> None:
        kids = sorted(children.get(parent, []), key=lambda s: s.start_time or 0)
        for i, span in enumerate(kids):
            last = i == len(kids) - 1
            print(prefix + ("└─ " if last else "├─ ") + describe(span))
            walk(span.context.span_id, prefix + ("   " if last else "│  "))

    walk(None, "")


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # In an application: trace.set_tracer_provider(provider) once, and nothing else (runs
    # trace to the global providers by default). Here the provider is passed instead, so
    # the example leaves the process's global alone.
    instrument(tracer_provider=provider)

    human = ScriptedHuman({"language": "Rust"})
    result = await manager.run("Build the billing service", handler=human)
    print("Result:", result.output)
    spans = exporter.get_finished_spans()
    print(f"Trace {spans[0].context.trace_id:032x}: {len(spans)} spans")
    print_tree(spans)


if __name__ == "__main__":
    anyio.run(main)
