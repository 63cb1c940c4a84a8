"""A tool's or turn's deadline that stops while a human is being waited for (``Deadline``),
and the waits that stop the asker's deadlines (``deadlines_paused``, ``paused_wait``)."""

from __future__ import annotations

import math
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import anyio

__all__ = ["Deadline", "deadlines_paused", "paused_wait"]


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


async def paused_wait(done: anyio.Event, asker: object) -> None:
    """Wait for ``done`` with the asker's enclosing deadlines stopped."""
    with deadlines_paused(asker):
        await done.wait()


@contextmanager
def deadlines_paused(asker: object) -> Generator[None]:
    """The asker's enclosing deadlines (its ``deadlines``, if any) stopped: waiting for a
    human does not count."""
    deadlines: tuple[Any, ...] = getattr(asker, "deadlines", ())
    for d in deadlines:
        d.pause()
    try:
        yield
    finally:
        for d in deadlines:
            d.resume()
