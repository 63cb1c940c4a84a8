"""A journaled step that failed: what the journal keeps of the error, and the error a
replay raises again (see ``StepFailed``)."""

from __future__ import annotations

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
    ``StepFailed`` carrying the recorded type and message (``StepFailed.revive``)."""
    return StepFailed.revive(step, str(error.get("type", "")), str(error.get("message", "")))
