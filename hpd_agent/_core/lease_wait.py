"""``resume(wait=...)``: wait out another holder's live lease on a run (see the store's
``_lease``: a holder known to be gone is taken over at once by the store itself)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ..exceptions import RunLeasedError

__all__ = ["wait_for_lease"]

T = TypeVar("T")


_WAIT_MARGIN = 0.05
"""Seconds waited past a lease's expiry before taking it again (clocks tick unevenly)."""


async def wait_for_lease(
    reopen: Callable[[], Awaitable[T]], wait: bool | float, ttl: float | None = None
) -> T:
    """``reopen()`` (which takes a run's lease), waiting out a live lease first if asked.

    Args:
        reopen: Takes the lease, or raises ``RunLeasedError`` having written nothing.
        wait: False: refuse at once. True: wait until the refusing lease expires, then
            take it; if its holder renewed it meanwhile (it is alive), or another holder
            took it, refuse. A number: keep waiting, across renewals, at most that many
            seconds.
        ttl: How late an expiry may come (clock steps) before ``wait=True`` gives up;
            defaults to the refusing lease's remaining time.

    Raises:
        RunLeasedError: The lease stayed live (see ``wait``).
    """
    if wait is False:
        return await reopen()
    deadline = None if wait is True else time.monotonic() + max(0.0, float(wait))
    first: RunLeasedError | None = None
    while True:
        try:
            return await reopen()
        except RunLeasedError as e:
            if e.lost:
                raise  # it drove the run and lost it: not a refusal to wait out
            if first is None:
                first = e
                if deadline is None:
                    margin = ttl if ttl is not None else e.expires_at - time.time()
                    deadline = time.monotonic() + max(0.0, e.expires_at - time.time()) + margin
            elif wait is True and (e.holder, e.expires_at) != (first.holder, first.expires_at):
                raise  # renewed by a live holder, or taken by another: not ours to wait out
            left = (deadline or 0.0) - time.monotonic()
            if left <= 0:
                raise
            await anyio.sleep(min(left, max(0.0, e.expires_at - time.time()) + _WAIT_MARGIN))
