"""A journaled step that failed: what the journal keeps of the error, and the error a
replay raises again (see ``StepFailed``)."""

from __future__ import annotations

import sys
from typing import Any

from ..exceptions import StepFailed
from ..text import bounded

__all__ = ["failure_value", "replayed_failure"]


def failure_value(error: Exception) -> dict[str, Any]:
    """The journal value of a step whose function raised ``error``."""
    cls = type(error)
    try:
        message = str(error)
    except Exception as e:  # a hostile __str__ must not hide the real failure
        message = f"<unprintable message: {type(e).__name__}>"
    return {"error": {"type": f"{cls.__module__}.{cls.__qualname__}", "message": bounded(message)}}


def replayed_failure(step: str, error: dict[str, Any]) -> Exception:
    """The error a replayed step raises: of the recorded type where it can be, else
    ``StepFailed`` carrying the recorded type and message."""
    kind, message = str(error.get("type", "")), str(error.get("message", ""))
    cls = _loaded_class(kind)
    if cls is not None:
        try:
            # The recorded failure, not a new one: no __init__ (its signature is unknown).
            replayed = cls.__new__(cls, message)
            replayed.args = (message,)
            str(replayed)  # its __str__ may need what __init__ would have set
            return replayed
        except Exception:  # a type that cannot be made this way: StepFailed says it
            pass
    return StepFailed(
        f"step {step!r} failed when the run first did it: {kind}: {message}",
        step=step,
        error_type=kind,
        error_message=message,
    )


def _loaded_class(qualified: str) -> type[Exception] | None:
    """The exception class named ``module.Qualname``, if its module is already imported
    (a journal never makes the process import anything)."""
    module_name, _, qualname = qualified.rpartition(".")
    obj: Any = sys.modules.get(module_name)
    # A nested class has dots in its qualname: try each split of the name.
    while obj is None and "." in module_name:
        module_name, _, outer = module_name.rpartition(".")
        qualname = f"{outer}.{qualname}"
        obj = sys.modules.get(module_name)
    if obj is None or "<" in qualname:
        return None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if isinstance(obj, type) and issubclass(obj, Exception):
        return obj
    return None
