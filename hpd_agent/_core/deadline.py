"""A tool's or turn's deadline that stops while a human is being waited for (``Deadline``)."""

from __future__ import annotations

import math

import anyio

__all__ = ["Deadline"]


class Deadline:
    """A cancel scope's deadline that stops running while a human is being waited for.

    Several questions may wait under one deadline at once (parallel sub-agents), so pauses
    are counted and the clock restarts only when the last one ends.
    """

    __slots__ = ("_pauses", "_remaining", "scope")

    def __init__(self, scope: anyio.CancelScope) -> None:
        self.scope = scope
        self._pauses = 0
        self._remaining = math.inf

    def pause(self) -> None:
        """Stop the clock (nested pauses are counted)."""
        if self._pauses == 0:
            self._remaining = self.scope.deadline - anyio.current_time()
            self.scope.deadline = math.inf
        self._pauses += 1

    def resume(self) -> None:
        """Restart the clock with the time that was left when it stopped."""
        self._pauses -= 1
        if self._pauses == 0:
            self.scope.deadline = anyio.current_time() + self._remaining
