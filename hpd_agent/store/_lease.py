"""One process drives a run at a time: the run's lease in the store.

``open_session`` / ``resume_session`` take the run's lease (``Store.take_lease``) before they
write anything, under a holder id made for the session (``host:pid:random``). While the run
runs, ``StoreSession.held()`` renews it every third of ``lease_ttl``, and gives it up at the
end (shielded, so a cancelled run releases it too). Another ``resume`` of the run meanwhile
fails at once with ``RunLeasedError`` naming the holder and when its lease expires; a holder
that died (SIGKILL, a lost machine) stops renewing, and its lease is taken over once it has
expired.

If a renewal finds the lease gone to another holder (this process was stalled for longer
than ``lease_ttl``, e.g. suspended, or could not reach the store), the run's work is
cancelled and the run raises ``RunLeasedError``: it writes nothing more to the store (no
run status either), since the new holder now drives the run. A store that cannot be
reached is retried at each renewal until the lease would expire, then treated the same.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import socket
import time
from collections.abc import AsyncGenerator

import anyio

from ..exceptions import RunLeasedError, UserError
from ._base import Lease, Store

__all__ = ["DEFAULT_LEASE_TTL", "LeaseKeeper", "check_ttl", "leased", "new_holder"]

DEFAULT_LEASE_TTL = 10.0
"""Seconds a lease lasts unless renewed: how long a run whose process died stays locked."""

_RELEASE_TIMEOUT = 5.0
"""Seconds the shielded release may take (an unreachable store must not hang a shutdown)."""


def check_ttl(ttl: float) -> float:
    """``ttl`` if it is a usable lease duration.

    Raises:
        UserError: It is not a positive, finite number of seconds.
    """
    if not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"lease_ttl must be a positive number of seconds, not {ttl!r}")
    return float(ttl)


def new_holder() -> str:
    """A holder id for one session: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def leased(lease: Lease, *, now: float | None = None) -> RunLeasedError:
    """The error refusing to drive ``lease``'s run while ``lease`` is live."""
    clock = time.time() if now is None else now
    until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(lease.expires_at))
    return RunLeasedError(
        f"run {lease.run_id!r} is being driven by another process: its lease is held by "
        f"{lease.holder} until {until} (in {max(0.0, lease.expires_at - clock):.1f} s unless "
        "renewed). Wait for that run to end, or, if its process died, resume after the "
        "lease expires",
        run_id=lease.run_id,
        holder=lease.holder,
        expires_at=lease.expires_at,
    )


class LeaseKeeper:
    """A session's hold on its run's lease: renewed while ``held()``, released after.

    Args:
        store: The store holding the lease.
        lease: The lease as taken.
        ttl: Seconds each renewal extends it by.
    """

    def __init__(self, store: Store, lease: Lease, ttl: float) -> None:
        self.store = store
        self.lease = lease
        self.ttl = ttl
        self.lost: RunLeasedError | None = None

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncGenerator[None]:
        """Keep the lease alive around the run; cancel the run if it is lost (module doc)."""
        failure: BaseException | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._keep_alive, tg.cancel_scope)
                try:
                    yield
                except anyio.get_cancelled_exc_class():
                    raise
                except BaseException as e:
                    # Raised after the task group, so it is not wrapped in an exception group.
                    failure = e
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_RELEASE_TIMEOUT):
                await self._release()
        if self.lost is not None:
            raise self.lost
        if failure is not None:
            raise failure

    async def _keep_alive(self, run_scope: anyio.CancelScope) -> None:
        run_id, holder = self.lease.run_id, self.lease.holder
        while True:
            await anyio.sleep(self.ttl / 3)
            try:
                kept = await self.store.renew_lease(run_id, holder, self.ttl)
            except Exception as e:  # the store is unreachable: retry until the lease lapses
                if time.time() < self.lease.expires_at:
                    continue
                self.lost = RunLeasedError(
                    f"run {run_id!r}: this process could not renew its lease before it "
                    f"expired ({type(e).__name__}: {e}); it stopped driving the run",
                    run_id=run_id,
                    holder=holder,
                    expires_at=self.lease.expires_at,
                )
                run_scope.cancel()
                return
            if not kept:
                self.lost = await self._taken_over()
                run_scope.cancel()
                return
            self.lease = Lease(run_id=run_id, holder=holder, expires_at=time.time() + self.ttl)

    async def _taken_over(self) -> RunLeasedError:
        run_id = self.lease.run_id
        now = await self.store.get_lease(run_id)
        other = "nobody" if now is None else now.holder
        return RunLeasedError(
            f"run {run_id!r}: this process lost its lease (now held by {other}) and stopped "
            "driving the run; the new holder continues it",
            run_id=run_id,
            holder=other,
            expires_at=0.0 if now is None else now.expires_at,
        )

    async def _release(self) -> None:
        with contextlib.suppress(Exception):  # the lease then lapses at its expiry
            await self.store.release_lease(self.lease.run_id, self.lease.holder)
