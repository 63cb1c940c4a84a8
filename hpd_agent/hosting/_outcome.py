"""How a hosted run ended, as every adapter tells its client: ``Outcome``.

One mapping for a run that ended here (``RunResult``), one stored by any process of the
store (``RunRecord``), and one whose block raised (``failed``): the same status words, the
final answer as text, and the error as ``public_error`` words it (``"TypeName: message"``,
no run id, no lease holder). Each adapter then says it in its protocol: an MCP tool result,
an A2A task state, an AG-UI RUN_FINISHED / RUN_ERROR, an ACP stop reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..run import RunResult, finished_event
from ..store import RunRecord
from ._errors import public_error

__all__ = ["Outcome", "outcome_of"]

_TYPE_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):")
"""The class name a stored error text starts with (``error_text``: ``TypeName: message``)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended, as a client may read it.

    Attributes:
        status: ``"completed"``, ``"failed"``, ``"cancelled"``, ``"interrupted"`` (ended with
            requests pending in its store) or ``"rejected"`` (the plan was rejected); a
            stored run not ended yet reads ``"running"``.
        output: The final answer as text (a structured one as its JSON) when completed.
        error: Why it did not complete, as a client may read it (``public_error``); None
            when completed, cancelled or interrupted.
        error_type: The class name of the error that failed it (``"MaxTurnsExceededError"``),
            when there is one.
        result: The run's ``RunResult`` when it ended in this process (its messages, usage,
            structured output); None for a stored run or a run whose block raised.
    """

    status: str
    output: str | None = None
    error: str | None = None
    error_type: str | None = None
    result: RunResult | None = None

    @classmethod
    def failed(cls, error: BaseException, run_id: str) -> Outcome:
        """A run whose block raised ``error`` (its failure, or the lease it lost)."""
        return cls("failed", error=public_error(error, run_id), error_type=type(error).__name__)


def outcome_of(ended: RunResult | RunRecord) -> Outcome:
    """The ``Outcome`` of a run's result, or of its record in a store."""
    if isinstance(ended, RunRecord):
        text = ended.error
        if text is None:
            return Outcome(ended.status, output=ended.output)
        named = _TYPE_NAME.match(text)
        error = public_error(text, ended.run_id)
        return Outcome(ended.status, ended.output, error, named and named.group(1))
    finished = finished_event(ended, "")
    error = ended.error
    if error is not None:
        text = public_error(error, ended.run_id)
        return Outcome(ended.status, finished.output, text, type(error).__name__, ended)
    return Outcome(ended.status, finished.output, finished.error, result=ended)
