"""The core's side of a durable run's journal: what it calls at each model request, tool
call and step (``RunJournal``), directly rather than through the generic hook path.
``hpd_agent.sessions`` exports it; a store's session implements it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Literal, Protocol

from ..exceptions import UserError
from ..hooks import CallNext, StepCall
from ..models._base import ModelResponse

__all__ = ["DURABILITY_MODES", "Durability", "RunJournal", "check_durability"]

Durability = Literal["sync", "async", "exit"]
"""When a durable run's facts are committed (docs/guarantees.md, "Durability modes"):
``"sync"`` each before anything acts on it, ``"async"`` behind the run without it waiting,
``"exit"`` when the run asks a human or ends."""

DURABILITY_MODES: tuple[Durability, ...] = ("sync", "async", "exit")


def check_durability(mode: object) -> Durability:
    """``mode`` if it is one of ``DURABILITY_MODES``.

    Raises:
        UserError: It is not.
    """
    if mode not in DURABILITY_MODES:
        raise UserError(
            f"durability={mode!r}: expected one of {', '.join(map(repr, DURABILITY_MODES))}"
        )
    return mode  # type: ignore[return-value]


class RunJournal(Protocol):
    """A run's journal, called by the core at each model request, tool call and step.

    A session that has one gives it as its ``journal`` attribute (an optional member of
    ``RunSession``: a session without it runs unjournaled, or journals through its hooks).
    The core calls it directly, before any hook, so a replayed call reaches no hook: this
    is the generic hook path's work (a call object and a chain link per call) left out of
    the durable run's hot path.

    Each method that may have to wait returns what to await, or None when it is done
    already (a write made at once on the event loop costs no coroutine).
    """

    def recorded_response(self, key: str) -> ModelResponse | None:
        """The response recorded for the model request ``key`` (``scope_path@turn``) by an
        earlier life of the run, or None: then the request is made."""
        ...

    def before_model(self) -> Awaitable[None] | None:
        """Before a model request is made (it is paid for): cancel the run if it may no
        longer be driven here (its lease is lost)."""
        ...

    def record_response(self, key: str, response: ModelResponse) -> Awaitable[None] | None:
        """Record a model response before anything outside the framework acts on it."""
        ...

    def recorded_outcome(self, key: str) -> tuple[str, bool] | None:
        """The (result text, is_error) recorded for the tool call ``key`` (its call path),
        or None: then the tool runs."""
        ...

    def before_tool(self, side_effects: bool) -> Awaitable[None] | None:
        """Before a tool runs: make what it may act on durable (a tool with
        ``side_effects``), and cancel the run if its lease is lost."""
        ...

    def record_outcome(
        self, key: str, text: str, is_error: bool, side_effects: bool
    ) -> Awaitable[None] | None:
        """Record a tool call's outcome: the moment it exists for a tool with
        ``side_effects``, else with the next fact written."""
        ...

    def wrap_step(self, step: StepCall, call_next: CallNext[StepCall, Any]) -> Awaitable[Any]:
        """Replay a recorded step, or run it (``call_next``) and record what it gave."""
        ...
