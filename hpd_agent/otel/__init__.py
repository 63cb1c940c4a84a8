"""OpenTelemetry traces and metrics of every run, in the GenAI semantic conventions.

``instrument()`` once at startup, and every root run from then on is one trace: an
``invoke_agent`` span per agent run (a nested agent's under the ``execute_tool`` span that
ran it), ``chat`` spans for model requests, ``execute_tool`` spans for tool calls and
``await_human`` spans for the time a human took to answer. Only the OpenTelemetry API is
used: nothing is recorded until the application installs an SDK, and until then a run costs
what it costs uninstrumented. See docs/observability.md.
"""

from __future__ import annotations

import os

from opentelemetry import metrics, trace

from ..hooks import install, uninstall
from ._attributes import CONTENT_ENV
from ._hook import OtelHook, Telemetry

__all__ = ["instrument", "uninstrument"]

_hook: OtelHook | None = None


def _capture_from_env() -> bool:
    return os.environ.get(CONTENT_ENV, "").strip().lower() == "true"


def instrument(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    capture_content: bool | None = None,
) -> None:
    """Trace every root run started from now on in this process; call again to change how.

    Args:
        tracer_provider: Where spans go; None: the global provider (a no-op until the
            application sets an SDK's with ``trace.set_tracer_provider``).
        meter_provider: Where metrics go; None: the global provider.
        capture_content: Record content (instructions, messages, tool arguments and
            results, questions, answers) on spans. None follows the environment variable
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true`` turns it on);
            off by default. An explicit False wins over the variable.
    """
    global _hook
    capture = _capture_from_env() if capture_content is None else capture_content
    telemetry = Telemetry(tracer_provider, meter_provider, capture)
    if _hook is None:
        _hook = OtelHook(telemetry)
        install(_hook)
    else:
        _hook.telemetry = telemetry


def uninstrument() -> None:
    """Stop tracing runs started from now on (runs already started keep their spans)."""
    global _hook
    if _hook is not None:
        uninstall(_hook)
        _hook = None
