"""Whether an OpenTelemetry SDK records anything: asked at the start of every root run, so it
costs next to nothing and imports nothing.

An application that installed an SDK has imported the API, so while neither
``opentelemetry.trace`` nor ``opentelemetry.metrics`` is in ``sys.modules`` the answer is no
for the price of two dict lookups. Otherwise the API's globals are read directly (its getters
look the environment up on every call). The API sets each global provider at most once, so
a yes, once seen, is kept.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["global_metrics", "global_tracing", "records", "sdk_installed"]

_TRACE = "opentelemetry.trace"
_METRICS = "opentelemetry.metrics._internal"  # where the meter provider global lives
_UNSET = object()

# The API's stand-ins for a provider (the meter's proxy has no public name).
_NO_OP_NAMES = (
    (_TRACE, "ProxyTracerProvider"),
    (_TRACE, "NoOpTracerProvider"),
    (_METRICS, "NoOpMeterProvider"),
    (_METRICS, "_ProxyMeterProvider"),
)

_seen = False


def records(provider: object) -> bool:
    """Whether ``provider`` (a tracer or meter provider, or None) is anything but the API's
    no-op or proxy stand-in."""
    if provider is None:
        return False
    for module_name, class_name in _NO_OP_NAMES:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(cls, type) and isinstance(provider, cls):
            return False
    return True


def _global(module_name: str, name: str, getter: str) -> Any:
    """The API's global provider (None while unset), or its getter's answer should the API
    ever keep it elsewhere; None while the API is not even loaded."""
    module = sys.modules.get(module_name)
    if module is None:
        return None
    found = getattr(module, name, _UNSET)
    return getattr(module, getter)() if found is _UNSET else found


def global_tracing() -> bool:
    """Whether the global tracer provider is a real one (an SDK's)."""
    return records(_global(_TRACE, "_TRACER_PROVIDER", "get_tracer_provider"))


def global_metrics() -> bool:
    """Whether the global meter provider is a real one (an SDK's)."""
    return records(_global(_METRICS, "_METER_PROVIDER", "get_meter_provider"))


def sdk_installed() -> bool:
    """Whether the application has set a real tracer or meter provider globally."""
    global _seen
    if not _seen:
        if _unset(_TRACE, "_TRACER_PROVIDER") and _unset(_METRICS, "_METER_PROVIDER"):
            return False  # every root run asks: the usual answer costs no more than this
        _seen = global_tracing() or global_metrics()
    return _seen


def _unset(module_name: str, name: str) -> bool:
    """Whether the API is not loaded or holds no global provider ``name`` yet."""
    module = sys.modules.get(module_name)
    return module is None or getattr(module, name, _UNSET) is None
