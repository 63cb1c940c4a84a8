"""What the OpenTelemetry tests share: fresh SDK providers per test (in-memory span exporter
and metric reader), reading the span tree and the metric points back."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hpd_agent.otel import instrument, restore_default


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

    def recorded_values(self) -> list[str]:
        """Every span name, status description, attribute and event value, and metric
        attribute value, as text."""
        values: list[str] = []
        for span in self.spans:
            values += [span.name, span.status.description or ""]
            values += [str(v) for v in (span.attributes or {}).values()]
            for event in span.events:
                values.append(event.name)
                values += [str(v) for v in (event.attributes or {}).values()]
        for points in self.metrics().values():
            for p in points:
                values += [str(v) for v in p.attributes.values()]
        return values

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


def providers() -> tuple[TracerProvider, MeterProvider, Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    return tracer_provider, MeterProvider(metric_readers=[reader]), Telemetry(exporter, reader)


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    tracer_provider, meter_provider, telemetry = providers()
    instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=False
    )
    yield telemetry
    restore_default()
