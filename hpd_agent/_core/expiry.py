"""Expiry that people see coming: a request's deadline on its event, and its warning.

A request asked with ``timeout=`` carries ``expires_at`` (seconds since the epoch); asked with
``warn_before=`` too, it is announced as expiring (``RequestExpiring`` on the stream, every
hook's ``request_expiring``) ``warn_before`` seconds before that, if it is still pending.
The warning goes out from the asker's own wait (no task of its own) and once: a durable
run's backend, when it is a ``RequestMemory``, writes that it went out before it does, so
a resumed run re-arms it from the kept deadline only when no earlier life sent it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import anyio

from ..backend import RequestBackend, RequestMemory
from ..events import RequestEvent
from ..exceptions import UserError
from .requests import Asker, PendingRequest, RequestSpec, RequestTable

__all__ = ["RequestHost", "arm", "check_warning", "reopen", "request_event", "warn_when_due"]


class RequestHost(Protocol):
    """Where a run's requests are (its coordinator)."""

    @property
    def requests(self) -> RequestTable: ...
    @property
    def backend(self) -> RequestBackend: ...


_H = TypeVar("_H", bound=RequestHost)


def check_warning(warn_before: float, timeout: float | None) -> None:
    """Refuse a ``warn_before`` that cannot be honoured (``UserError`` saying why)."""
    if timeout is None:
        raise UserError("warn_before needs a timeout: a request without one never expires")
    if isinstance(warn_before, bool) or not isinstance(warn_before, int | float):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(
            f"warn_before must be a number of seconds, got {type(warn_before).__name__}"
        )
    if not (0 < warn_before < math.inf):
        raise UserError(f"warn_before must be a positive number of seconds, got {warn_before!r}")


def request_event(
    spec: RequestSpec, request_id: str, asker: Asker, timeout: float | None
) -> RequestEvent:
    """The event of ``spec`` asked by ``asker``, with its deadline when it has a ``timeout``."""
    event = spec.build(request_id=request_id, asker=asker)
    if timeout is not None:
        # Set on the event just built, before anyone sees it, as a frozen dataclass's own
        # __init__ does: a copy (dataclasses.replace) would cost every timed question ~5 us.
        object.__setattr__(event, "expires_at", time.time() + timeout)
    return event


def arm(pending: PendingRequest, warn_before: float | None) -> None:
    """Make ``pending``'s warning due ``warn_before`` seconds before its deadline."""
    if pending.event.expires_at is not None:
        pending.warn_before = warn_before


def reopen(backend: RequestBackend, pending: PendingRequest, warn_before: float | None) -> bool:
    """After a durable backend's ``open`` left ``pending`` waiting: the deadline an earlier
    life gave it, and its warning armed unless that life sent it. True when it was
    opened by an earlier life (hooks are then told it again, as replayed)."""
    memory = backend if isinstance(backend, RequestMemory) else None
    earlier = None if memory is None else memory.reopened(pending.request_id)
    if earlier is None:
        arm(pending, warn_before)
        return False
    pending.event = dataclasses.replace(pending.event, expires_at=earlier.expires_at)
    if not earlier.warned:
        arm(pending, warn_before)
    return True


async def warn_when_due(
    host: _H,
    pending: PendingRequest,
    asker: Asker,
    wait: Callable[[_H, PendingRequest, Asker], Awaitable[None]],
    timeout: float,
) -> None:
    """``wait(host, pending, asker)`` for ``pending`` to end until its warning is due, with
    ``timeout`` seconds left before it expires; then, if it has not ended, warn (once: the
    backend remembers it first when it can). The caller waits on after.

    The delay counts from the wait's own timeout, not the wall clock: the event loop's
    clock times both (a workflow engine's replay sees the same timers)."""
    assert pending.warn_before is not None
    if timeout <= 0:
        return  # a resumed run's request that expired meanwhile: nothing left to warn of
    delay = timeout - pending.warn_before
    if delay > 0:
        with anyio.move_on_after(delay):
            await wait(host, pending, asker)
    if pending.status != "pending":
        return
    pending.warn_before = None
    backend = host.backend
    if backend.durable and isinstance(backend, RequestMemory):
        await backend.record_warning(pending.request_id)
        if pending.status != "pending":
            return
    host.requests.expiring(pending)
