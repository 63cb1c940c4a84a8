"""When an interrupt may end a run: the count of live and parked calls (``Quiescence``)."""

from __future__ import annotations

import anyio

__all__ = ["Quiescence"]


class Quiescence:
    """When an interrupt may end the run: once it is quiescent.

    Quiescent means every live model call and tool call has finished or is parked on a
    request nobody here can answer; a sibling about to finish its side effect gets to
    finish (and be journaled) instead of being cut off.
    """

    __slots__ = ("busy", "interrupted", "parked", "scope")

    def __init__(self) -> None:
        self.busy = 0
        self.parked = 0
        self.interrupted = False
        self.scope: anyio.CancelScope | None = None

    def enter(self, n: int = 1) -> None:
        """``n`` live model calls or tool calls start (a batch's calls count from the start)."""
        self.busy += n

    def leave(self) -> None:
        """A live model call or tool call ended (or handed over to a nested agent)."""
        self.busy -= 1
        if self.parked and self.parked >= self.busy:
            self.interrupt()

    def hand_over(self) -> None:
        """A live call ended by handing over to more work of its own agent (a model call to
        the tool calls it made, a tool call to the nested agent it runs): no interrupt
        check here, the work it hands over to counts from the moment it starts."""
        self.busy -= 1

    def park(self, delta: int) -> None:
        """A waiter parks (+1) on a request nobody here can answer, or stops (-1)."""
        self.parked += delta
        if delta > 0:
            self.check()

    def check(self) -> None:
        """Interrupt if something is parked and nothing else is live."""
        if self.parked and self.parked >= self.busy:
            self.interrupt()

    def interrupt(self) -> None:
        """End the run now (cancel the root agent's scope)."""
        self.interrupted = True
        if self.scope is not None:
            self.scope.cancel()
