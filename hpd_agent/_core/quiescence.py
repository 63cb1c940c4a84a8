"""When a run is quiescent: the count of live, parked and waiting calls (``Quiescence``)."""

from __future__ import annotations

import anyio

__all__ = ["Quiescence"]


class Quiescence:
    """When a run may end at an interrupt, and when it has settled (waits for a human alone).

    Quiescent means every live model call and tool call has finished or is parked on a
    request nobody here can answer; a sibling about to finish its side effect gets to
    finish (and be journaled) instead of being cut off. Settled means the same of requests
    anyone can answer: at least one call waits on an open request, and every live call does
    (``Run.settled``). A waiter stops counting the moment its request ends, not when its
    task next runs, so an answer given a moment ago never looks settled.
    """

    __slots__ = ("busy", "interrupted", "parked", "scope", "waiting", "watch")

    def __init__(self) -> None:
        self.busy = 0
        self.parked = 0
        self.waiting = 0
        """Calls waiting on an open request (any request: parked or answerable)."""
        self.interrupted = False
        self.scope: anyio.CancelScope | None = None
        self.watch: anyio.Event | None = None
        """Set when the run may have settled; None while nobody asks (``Run.settled``)."""

    def enter(self, n: int = 1) -> None:
        """``n`` live model calls or tool calls start (a batch's calls count from the start)."""
        self.busy += n

    def leave(self) -> None:
        """A live model call or tool call ended (or handed over to a nested agent)."""
        self.busy -= 1
        if self.parked and self.parked >= self.busy:
            self.interrupt()
        if self.watch is not None and self.settled:
            self.watch.set()

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

    def wait_begins(self) -> None:
        """A call starts waiting on an open request."""
        self.waiting += 1
        if self.watch is not None and self.settled:
            self.watch.set()

    def wait_ends(self, n: int = 1) -> None:
        """``n`` calls stopped waiting (their request ended, or their wait was cut short)."""
        self.waiting -= n

    @property
    def settled(self) -> bool:
        """Whether something waits on a request and nothing else is live."""
        return self.waiting > 0 and self.waiting >= self.busy

    def check(self) -> None:
        """Interrupt if something is parked and nothing else is live."""
        if self.parked and self.parked >= self.busy:
            self.interrupt()

    def interrupt(self) -> None:
        """End the run now (cancel the root agent's scope)."""
        self.interrupted = True
        if self.scope is not None:
            self.scope.cancel()
