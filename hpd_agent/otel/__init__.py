"""OpenTelemetry traces and metrics of every run, in the GenAI semantic conventions.

Every root run is one trace: an ``invoke_agent`` span per agent run (a nested agent's under
the ``execute_tool`` span that ran it), ``chat`` spans for model requests, ``execute_tool``
spans for tool calls and ``await_human`` spans for the time a human took to answer.

By default the spans and metrics go to the global tracer and meter providers: an application
that installs an OpenTelemetry SDK (``trace.set_tracer_provider`` or
``metrics.set_meter_provider``) sees them with no other call, and until it does a run costs
what it costs without tracing (a factory registered with ``hooks.add_hook_factory`` looks,
once per root run and without importing anything, whether an SDK is set). ``instrument()``
picks other providers or turns content capture on; ``uninstrument()`` turns tracing off, the
default included, until ``instrument()`` or ``restore_default()`` is called. Importing this
package is light: the OpenTelemetry API is loaded only once a run is traced or
``instrument()`` is called. See docs/observability.md.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..hooks import Hook, add_hook_factory, install, uninstall
from ._probe import sdk_installed

if TYPE_CHECKING:
    from opentelemetry import metrics, trace

    from ._hook import OtelHook

__all__ = ["instrument", "restore_default", "uninstrument"]

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_explicit: OtelHook | None = None
"""The hook ``instrument()`` installed (the default then stays out)."""
_default: OtelHook | None = None
"""The default hook: global providers, capture from the environment (made on first use)."""
_off = False
"""``uninstrument()`` was called (and ``instrument()`` not since)."""


def _capture_from_env() -> bool:
    return os.environ.get(CONTENT_ENV, "").strip().lower() == "true"


def _default_hook() -> Hook | None:
    """The hook a root run starting now gets by default: None unless an SDK is set globally
    and neither ``instrument()`` nor ``uninstrument()`` has decided otherwise."""
    global _default
    if _explicit is not None or _off or not sdk_installed():
        return None
    if _default is None:
        from ._hook import OtelHook, Telemetry

        _default = OtelHook(Telemetry(None, None, _capture_from_env()))
    return _default


add_hook_factory(_default_hook)


def instrument(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    capture_content: bool | None = None,
) -> None:
    """Trace every root run started from now on in this process this way; call again to
    change how.

    Not needed to trace with the global providers and capture off: that is the default as
    soon as the application sets an SDK's provider globally.

    Args:
        tracer_provider: Where spans go; None: the global provider (a no-op until the
            application sets an SDK's with ``trace.set_tracer_provider``).
        meter_provider: Where metrics go; None: the global provider.
        capture_content: Record content (instructions, messages, tool arguments and
            results, questions, answers, names of tools that do not exist) on spans. None
            follows the environment variable
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true`` turns it on);
            off by default. An explicit False wins over the variable.
    """
    global _explicit, _off
    from ._hook import OtelHook, Telemetry

    capture = _capture_from_env() if capture_content is None else capture_content
    telemetry = Telemetry(tracer_provider, meter_provider, capture)
    _off = False
    if _explicit is None:
        _explicit = OtelHook(telemetry)
        install(_explicit)
    else:
        _explicit.telemetry = telemetry


def uninstrument() -> None:
    """Stop tracing runs started from now on, the default tracing to the global providers
    included, until ``instrument()`` or ``restore_default()`` is called (runs already
    started keep their spans)."""
    global _off
    _off = True
    _drop_explicit()


def restore_default() -> None:
    """Undo ``instrument()`` and ``uninstrument()``: runs started from now on get the default
    (the global providers once an SDK is set, capture as the environment variable says), as
    in a process that called neither."""
    global _off
    _off = False
    _drop_explicit()


def _drop_explicit() -> None:
    global _explicit
    if _explicit is not None:
        uninstall(_explicit)
        _explicit = None
