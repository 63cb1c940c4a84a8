"""``Outlet``: where a root run's events go, shared by its coordinator and request table."""

from __future__ import annotations

from collections.abc import Callable

from ..events import Event

__all__ = ["Outlet"]


class Outlet:
    """The run's sink (None: nobody watches, events are dropped).

    The coordinator and its request table both emit through it, so the table never points
    back at the coordinator: a cycle there would keep every finished run's objects alive
    until the next full collection of the cyclic GC.
    """

    __slots__ = ("sink",)

    def __init__(self, sink: Callable[[Event], None] | None) -> None:
        self.sink = sink

    def emit(self, event: Event) -> None:
        """Put ``event`` on the run's stream (dropped when nobody is watching)."""
        sink = self.sink
        if sink is not None:
            sink(event)
