"""Ready-made human-in-the-loop patterns built on the run's request machinery.

- ``Clarifier``: before expensive work, ask focused questions, then agree a plan
  (approve / reject / feedback). Put it in front of an agent with
  ``Agent(..., clarifier=Clarifier(...))``.
- ``clarify_loop``: generate, evaluate, ask the human, regenerate; resumable by its state.
- ``approval_gate``: approve, ``edit: ...`` or reject a produced value.

Every question they ask is a ``ClarificationRequest`` on the root run's stream, so handlers,
``ScriptedHuman`` and stream consumers answer them like any other.
"""

from __future__ import annotations

from ._approval_gate import (
    GATE_APPROVE_WORDS,
    GATE_REJECT_WORDS,
    GateResult,
    GateStatus,
    approval_gate,
)
from ._clarifier import (
    DEFAULT_APPROVE_WORDS,
    DEFAULT_REJECT_WORDS,
    DEFAULT_SKIP_WORDS,
    ClarificationDecision,
    Clarifier,
    ClarifierResult,
    DialogueTurn,
    Plan,
    parse_clarification,
    parse_plan,
)
from ._clarify_loop import (
    ClarifyInterrupted,
    ClarifyResult,
    ClarifyState,
    clarify_loop,
    default_clarify_prompt,
    low_confidence,
)

__all__ = [
    "DEFAULT_APPROVE_WORDS",
    "DEFAULT_REJECT_WORDS",
    "DEFAULT_SKIP_WORDS",
    "GATE_APPROVE_WORDS",
    "GATE_REJECT_WORDS",
    "ClarificationDecision",
    "Clarifier",
    "ClarifierResult",
    "ClarifyInterrupted",
    "ClarifyResult",
    "ClarifyState",
    "DialogueTurn",
    "GateResult",
    "GateStatus",
    "Plan",
    "approval_gate",
    "clarify_loop",
    "default_clarify_prompt",
    "low_confidence",
    "parse_clarification",
    "parse_plan",
]
