"""Test doubles for offline runs: scripted models, a scripted human, a guard.

Public, for your tests as much as ours:

- ``ScriptedModel(steps)``: plays ``text(...)`` / ``tool_call(...)`` turns in order, records
  what it was sent, ``assert_complete()``.
- ``FunctionModel(fn)``: computes each turn from the conversation.
- ``ScriptedHuman``: a handler that answers questions and permission requests by rules.
- ``forbid_model_requests()``: makes any real LLM request raise (use it in your conftest).
"""

from __future__ import annotations

from ..models._base import set_allow_model_requests
from ._human import ScriptedHuman, UnexpectedRequestError
from ._models import FunctionModel, ScriptedModel, Step, text, tool_call

__all__ = [
    "FunctionModel",
    "ScriptedHuman",
    "ScriptedModel",
    "Step",
    "UnexpectedRequestError",
    "forbid_model_requests",
    "text",
    "tool_call",
]


def forbid_model_requests() -> None:
    """Make every request to a real LLM provider raise ``ModelError`` from now on."""
    set_allow_model_requests(False)
