"""One process drives a run at a time: the run's lease in the store.

``open_session`` / ``resume_session`` take the run's lease (``Store.take_lease``, or, for a
new run, ``RunLeases.open_run``: the lease and the run record in one transaction) before
they write anything, under a holder id made for the session (``host:pid:random``). While
the run runs, the lease is renewed every third of ``lease_ttl``: by the store's renewer
thread (``_renewer``: one per store object, for all its runs) when the store declares
``RunLeases`` (``Store.capabilities``), else by a task of the run's own. At the end the run
gives it up: in the same transaction as its final run record (``close_run``) where the
store declares that, else shielded after the run, so a cancelled run releases it too.
Another ``resume`` of the run meanwhile fails at once with ``RunLeasedError`` naming the
holder and when its lease expires; a holder that died (SIGKILL, a lost machine) stops
renewing, and its lease is taken over once it has expired.

If a renewal finds the lease gone to another holder (this process was stalled for longer
than ``lease_ttl``, e.g. suspended, or could not reach the store), the run's work is
cancelled and the run raises ``RunLeasedError``: it writes nothing more to the store (no
run status either), since the new holder now drives the run. A store that cannot be
reached is retried at each renewal until the lease would expire, then treated the same.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncGenerator, Awaitable, Sequence
from types import TracebackType

import anyio
import anyio.lowlevel

from ..exceptions import RunLeasedError, UserError
from ._base import JournalEntry, Lease, RunRecord
from ._fence import Fence, fencing, swap_fence
from ._holder import new_holder
from ._protocol import RunLeases, Store
from ._renewer import Hold, LeaseRenewer, taken_over, unreachable

__all__ = [
    "DEFAULT_LEASE_TTL",
    "LeaseKeeper",
    "check_lease_ttl",
    "lease_refusal",
    "new_holder",
]

DEFAULT_LEASE_TTL = 10.0
"""Seconds a lease lasts unless renewed: how long a run whose process died stays locked."""

_RELEASE_TIMEOUT = 5.0
"""Seconds the shielded release may take (an unreachable store must not hang a shutdown)."""


def check_lease_ttl(ttl: float) -> float:
    """``ttl`` if it is a usable lease duration (a store checks its ``lease_ttl`` with it).

    Args:
        ttl: Seconds.

    Returns:
        ``ttl`` as a float.

    Raises:
        UserError: It is not a positive, finite number of seconds.
    """
    if not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"lease_ttl must be a positive number of seconds, not {ttl!r}")
    return float(ttl)


def lease_refusal(lease: Lease, *, now: float | None = None) -> RunLeasedError:
    """The error ``Store.take_lease`` raises while another holder's ``lease`` is live.

    Args:
        lease: The live lease, as stored.
        now: The clock the lease was compared with (default: now).

    Returns:
        A ``RunLeasedError`` naming the holder and when its lease expires.
    """
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
        leases: What the store declared as its ``RunLeases`` (``Store.capabilities``), or
            None: then a task of the run's own renews the lease, and the run's end is
            written and the lease released one after the other.
    """

    __slots__ = (
        "_hold",
        "_lease",
        "_renewer",
        "_scope",
        "fence",
        "leases",
        "lost",
        "released",
        "store",
        "ttl",
    )

    def __init__(self, store: Store, lease: Lease, ttl: float, *, leases: RunLeases | None) -> None:
        self.store = store
        self.leases = leases
        self._lease: Lease | None = lease
        self.ttl = ttl
        self.lost: RunLeasedError | None = None
        self.released = False
        self._hold: Hold | None = None
        self._renewer: LeaseRenewer | None = None
        self._scope: anyio.CancelScope | None = None
        self.fence = Fence(lease.run_id, lease.fence) if lease.fence else None
        """The session's fencing token (``_fence``); None from a store that keeps none."""

    @property
    def lease(self) -> Lease:
        """The lease as last taken or renewed (while the store's renewer renews it, its
        ``Hold``'s: the keeper keeps no stale copy of its own)."""
        lease = self._lease
        if lease is None:
            assert self._hold is not None
            return self._hold.lease
        return lease

    @lease.setter
    def lease(self, lease: Lease) -> None:
        self._lease = lease

    def held(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Keep the lease alive around the run; cancel the run if it is lost (module doc).
        The run's writes are fenced meanwhile (``_fence``)."""
        if self.leases is None:
            return self._held_by_task()
        return _RenewedHold(self, self.leases.lease_renewer())

    def _raise_if_fenced_out(self) -> None:
        """After the run: ``RunLeasedError`` if a write of it was refused, though the run
        got to its end."""
        if self.fence is not None and self.fence.lost is not None:
            self.lost = self.fence.lost
            raise self.lost

    def guard_due(self) -> Awaitable[None] | None:
        """``guard``, or None when it has nothing to do (no write refused, the lease not
        lost and renewed within a third of the TTL): the common case costs no coroutine."""
        hold, fence = self._hold, self.fence
        if (
            self.lost is None
            and (fence is None or fence.lost is None)
            and (hold is None or hold.lost is None)
        ):
            lease = self.lease if hold is None else hold.lease
            if time.time() - (lease.expires_at - self.ttl) <= self.ttl / 3:
                return None
        return self.guard()

    async def guard(self, *, now: bool = False) -> None:
        """Before a tool function or a journaled step starts: cancel the run if its lease
        is lost. A write refused by the fence tells so; else, when the last renewal is older
        than a third of the TTL (the renewer may not have run yet after a stall), or
        ``now`` (a question of the run ended cancelled: maybe by a process that took the
        run over to cancel it, ``cancel_run``), the lease is renewed here first, which fails
        if another holder has it."""
        fence = self.fence
        if fence is not None and fence.lost is not None:
            self._lose(fence.lost)
        elif self._hold is None or self._hold.lost is None:
            lease = self._hold.lease if self._hold is not None else self.lease
            if now or time.time() - (lease.expires_at - self.ttl) > self.ttl / 3:
                await self._check(lease)
        hold = self._hold
        if hold is not None and hold.lost is not None:
            # The renewer thread marks the hold lost first and cancels the run's scope a
            # moment later, through the loop: cancel it here, so nothing starts meanwhile.
            hold.scope.cancel()
        if self.lost is not None or (hold is not None and hold.lost is not None):
            await anyio.lowlevel.checkpoint()  # raises: the run was cancelled here

    async def _check(self, lease: Lease) -> None:
        run_id, holder = lease.run_id, lease.holder
        started = time.time()
        with anyio.CancelScope(shield=True):
            kept = await self.store.renew_lease(run_id, holder, self.ttl)
            if not kept:
                self._lose(taken_over(lease, await self.store.get_lease(run_id)))
                return
        renewed = Lease(
            run_id=run_id, holder=holder, expires_at=started + self.ttl, fence=lease.fence
        )
        if self._hold is not None:
            self._hold.lease = renewed
        else:
            self.lease = renewed

    def _lose(self, error: RunLeasedError) -> None:
        """On the run's loop: the lease is lost; cancel the run (once)."""
        hold, renewer = self._hold, self._renewer
        if hold is not None and renewer is not None:
            if renewer.lose_here(hold, error):
                hold.scope.cancel()
        elif self._scope is not None and self.lost is None:
            self.lost = error
            self._scope.cancel()

    async def close(self, record: RunRecord, journal: Sequence[JournalEntry] = ()) -> bool:
        """End the run in the store: write ``journal``, its final ``record`` and give the
        lease up in one step, if the store can (``RunLeases.close_run``). False if it cannot
        (nothing was written); True also when the lease was lost, and then nothing is
        written: the new holder drives the run."""
        hold, renewer, leases = self._hold, self._renewer, self.leases
        if hold is None or renewer is None or leases is None or self.released:
            return False
        if not renewer.closing(hold):
            return True  # lost: ``held()`` raises ``RunLeasedError``
        try:
            await leases.close_run(record, self.lease.holder, journal)
        except BaseException:
            hold.closing = False
            raise
        self.released = True
        renewer.unregister(hold)
        return True

    async def _end_hold(self, hold: Hold) -> None:
        """After the run (``_RenewedHold``): renew the lease no more and give it up, if the
        run's end did not (shielded: a cancelled run gives it up too)."""
        hold.active = False
        if self._renewer is not None and not self.released:  # else ``close`` did
            self._renewer.unregister(hold)
        self.lease = hold.lease
        if not self.released:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_RELEASE_TIMEOUT):
                await self._release()
            self.released = True  # a later ``close`` (a cancelled run's end) only writes

    @contextlib.asynccontextmanager
    async def _held_by_task(self) -> AsyncGenerator[None]:
        failure: BaseException | None = None
        try:
            async with anyio.create_task_group() as tg:
                self._scope = tg.cancel_scope
                tg.start_soon(self._keep_alive, tg.cancel_scope)
                try:
                    with fencing(self.fence):
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
        self._raise_if_fenced_out()

    async def _keep_alive(self, run_scope: anyio.CancelScope) -> None:
        run_id, holder = self.lease.run_id, self.lease.holder
        while True:
            await anyio.sleep(self.ttl / 3)
            try:
                kept = await self.store.renew_lease(run_id, holder, self.ttl)
            except Exception as e:  # the store is unreachable: retry until the lease lapses
                if time.time() < self.lease.expires_at:
                    continue
                self.lost = unreachable(self.lease, e)
                run_scope.cancel()
                return
            if not kept:
                self.lost = taken_over(self.lease, await self.store.get_lease(run_id))
                run_scope.cancel()
                return
            self.lease = Lease(
                run_id=run_id,
                holder=holder,
                expires_at=time.time() + self.ttl,
                fence=self.lease.fence,
            )

    async def _release(self) -> None:
        with contextlib.suppress(Exception):  # the lease then lapses at its expiry
            await self.store.release_lease(self.lease.run_id, self.lease.holder)


class _RenewedHold(Hold):
    """``LeaseKeeper.held`` where the store's renewer thread renews the lease: the run's
    ``Hold`` itself, entered around the run, with its fence current meanwhile.

    One object rather than a generator context manager, a hold and a fencing context
    manager: it is alive for the whole run of every run in flight, and a generator would
    keep its frame, its wrapper and the bound exits of the two blocks it is suspended in.
    """

    __slots__ = ("_fence_before", "_keeper", "_renewer")

    def __init__(self, keeper: LeaseKeeper, renewer: LeaseRenewer) -> None:
        super().__init__(keeper.lease, anyio.CancelScope())
        self._keeper = keeper
        self._renewer = renewer
        self._fence_before: Fence | None = None

    async def __aenter__(self) -> None:
        keeper = self._keeper
        keeper._hold = self  # pyright: ignore[reportPrivateUsage]
        keeper._lease = None  # pyright: ignore[reportPrivateUsage] (the hold's from now on)
        keeper._renewer = self._renewer  # pyright: ignore[reportPrivateUsage]
        self._renewer.register(self)
        if keeper.fence is not None:
            self._fence_before = swap_fence(keeper.fence)
        self.scope.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        keeper = self._keeper
        del self._keeper  # the keeper holds this hold: no cycle left for the cyclic GC
        error = exc
        try:
            if self.scope.__exit__(exc_type, exc, tb):
                error = None  # the scope's own cancel: the lease was lost
        except BaseException as e:
            error = e
        finally:
            if keeper.fence is not None:
                swap_fence(self._fence_before)
                self._fence_before = None
        await keeper._end_hold(self)  # pyright: ignore[reportPrivateUsage]
        # A lost lease is the run's outcome, whatever its work raised while it was being
        # cancelled; a cancellation from outside goes on as it is.
        if error is not None and (
            self.lost is None or isinstance(error, anyio.get_cancelled_exc_class())
        ):
            if error is exc:
                return False
            raise error
        if self.lost is not None:
            keeper.lost = self.lost
            raise self.lost
        keeper._raise_if_fenced_out()  # pyright: ignore[reportPrivateUsage]
        return error is None and exc is not None
