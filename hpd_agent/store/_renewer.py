"""One thread per store object renews every lease that store object holds (see ``_lease``).

A run registers its lease (a ``Hold``) when it starts and unregisters it when it ends: two
dict operations, no task and no statement of its own. The store's ``LeaseRenewer`` runs a
daemon thread, started by the first registration, that renews all registered leases every
third of the store's ``lease_ttl`` through a ``RenewIO`` of its own (its own database
connection where the store has one, so a renewal never queues behind the run's statements),
in one statement or transaction for all of them.

A lease the renewal finds held by another holder, or that could not be renewed before it
expired (the store unreachable), is lost: the thread marks its ``Hold`` and cancels the
run's scope in the run's event loop (``anyio.from_thread.run_sync`` with the loop's token,
on asyncio and trio alike). It does so from a short-lived thread of its own, so the renewer
never waits for an event loop. The thread is a daemon (it never keeps the interpreter
alive), ends after a ``lease_ttl`` with no lease to renew (the next run starts another),
and stops when the store is closed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from ..exceptions import RunLeasedError
from ._base import Lease

__all__ = ["Hold", "LeaseRenewer", "RenewIO", "taken_over", "unreachable"]

_IDLE_ROUNDS = 3
"""Renewal rounds with no lease to renew after which the thread ends (and closes its
connection): a store object that drives no run holds no thread."""

_JOIN_TIMEOUT = 5.0
"""Seconds ``aclose`` waits for the renewer thread to finish its current renewal."""


class RenewIO:
    """The renewer thread's way to the store: blocking calls, made from that thread only."""

    def renew(self, leases: Sequence[tuple[str, str]], ttl: float) -> set[tuple[str, str]]:
        """Extend each (run_id, holder) lease to ``ttl`` seconds from now; the ones kept.

        Raises:
            Exception: The store could not be reached (nothing is known to be renewed).
        """
        raise NotImplementedError

    def current(self, run_id: str) -> Lease | None:
        """The run's lease as stored now, or None."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the renewals used (called from the renewer thread)."""


class Hold:
    """One lease a run of this process holds, registered with its store's renewer.

    Attributes:
        lease: The lease as last taken or renewed.
        scope: The run's cancel scope: cancelled if the lease is lost.
        token: The run's event loop (to cancel ``scope`` from the renewer's thread).
        lost: Why the run lost its lease, once it did.
        closing: The run is writing its end and giving the lease up: a renewal that finds
            it gone is no loss.
        active: Whether the run is still inside ``scope`` (only the run's loop changes it).
    """

    __slots__ = ("active", "closing", "lease", "lost", "scope", "token")

    def __init__(self, lease: Lease, scope: anyio.CancelScope) -> None:
        self.lease = lease
        self.scope = scope
        self.token = _loop_token()
        self.lost: RunLeasedError | None = None
        self.closing = False
        self.active = True

    def cancel(self) -> None:
        """On the run's event loop: cancel the run if it still runs."""
        if self.active:
            self.scope.cancel()


_LOOP_TOKEN: anyio.lowlevel.RunVar[anyio.lowlevel.EventLoopToken] = anyio.lowlevel.RunVar(
    "hpd_agent_loop_token"
)
"""The running event loop's token, made once per loop (``current_token`` makes an object of
its own at each call, which every hold would keep)."""


def _loop_token() -> anyio.lowlevel.EventLoopToken:
    token = _LOOP_TOKEN.get(None)
    if token is None:
        token = anyio.lowlevel.current_token()
        _LOOP_TOKEN.set(token)
    return token


class LeaseRenewer:
    """The renewer of one store object (module doc).

    Args:
        connect: Makes the thread's ``RenewIO`` (called in the thread, again after a
            failure).
        ttl: Seconds each renewal extends a lease by; the thread renews every third of it.
        name: The thread's name.
    """

    def __init__(self, connect: Callable[[], RenewIO], ttl: float, name: str) -> None:
        self._connect = connect
        self.ttl = ttl
        self._name = name
        # The holds themselves (by identity), not keyed by (run_id, holder): a key tuple
        # is 56 bytes more per run in flight.
        self._holds: set[Hold] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def register(self, hold: Hold) -> None:
        """Renew ``hold``'s lease from now on (starts the thread the first time)."""
        with self._lock:
            self._holds.add(hold)
            thread = self._thread
            # Started once; again in a forked child (which inherits no threads).
            if (thread is None or not thread.is_alive()) and not self._stop.is_set():
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def unregister(self, hold: Hold) -> None:
        """Renew ``hold``'s lease no more."""
        with self._lock:
            self._holds.discard(hold)

    def closing(self, hold: Hold) -> bool:
        """``hold``'s run is giving its lease up with its final write: a renewal that finds
        the lease gone is no loss from now on. False if the lease is lost already."""
        with self._lock:
            if hold.lost is not None:
                return False
            hold.closing = True
            return True

    def lose_here(self, hold: Hold, error: RunLeasedError) -> bool:
        """On the run's event loop: mark ``hold`` lost (unless it is closing or lost
        already) and renew it no more; True if it was marked (the caller cancels the run)."""
        with self._lock:
            if hold.lost is not None or hold.closing:
                return False
            self._holds.discard(hold)
            hold.lost = error
            return True

    async def aclose(self) -> None:
        """Stop the thread (it closes its connection); waits for its current renewal."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            await anyio.to_thread.run_sync(thread.join, _JOIN_TIMEOUT)

    # -- the thread ------------------------------------------------------------------------
    def _loop(self) -> None:
        io: RenewIO | None = None
        idle = 0
        try:
            while not self._stop.wait(self.ttl / 3):
                with self._lock:
                    holds = list(self._holds)
                    idle = 0 if holds else idle + 1
                    if idle >= _IDLE_ROUNDS:  # the next ``register`` starts a new thread
                        self._thread = None
                        return
                if holds:
                    try:
                        io = self._renew(io, holds)
                    except Exception:  # never let one pass end the renewals of all runs
                        _close(io)
                        io = None
        finally:
            _close(io)

    def _renew(self, io: RenewIO | None, holds: list[Hold]) -> RenewIO | None:
        """One renewal of ``holds``; the ``RenewIO`` to use next time."""
        started = time.time()
        try:
            if io is None:
                io = self._connect()
            kept = io.renew([(h.lease.run_id, h.lease.holder) for h in holds], self.ttl)
        except Exception as e:  # unreachable: retry at the next renewal, until the lease lapses
            _close(io)
            now = time.time()
            for hold in holds:
                if now >= hold.lease.expires_at and not hold.closing:
                    self._lose(hold, unreachable(hold.lease, e))
            return None
        for hold in holds:
            lease = hold.lease
            if (lease.run_id, lease.holder) in kept:
                hold.lease = Lease(
                    run_id=lease.run_id,
                    holder=lease.holder,
                    expires_at=started + self.ttl,
                    fence=lease.fence,
                )
            elif not hold.closing:
                self._lose(hold, taken_over(lease, _current(io, lease.run_id)))
        return io

    def _lose(self, hold: Hold, error: RunLeasedError) -> None:
        with self._lock:
            # Unregistered meanwhile: the run ended and gave its lease up itself.
            if hold not in self._holds or hold.closing:
                return
            self._holds.remove(hold)
            hold.lost = error
        # From a thread of its own: the renewer must not wait for the run's event loop.
        threading.Thread(target=_cancel, args=(hold,), name=self._name, daemon=True).start()


def _close(io: RenewIO | None) -> None:
    if io is not None:
        with contextlib.suppress(Exception):
            io.close()


def _cancel(hold: Hold) -> None:
    with contextlib.suppress(Exception):  # the loop has ended: nothing is left to cancel
        anyio.from_thread.run_sync(hold.cancel, token=hold.token)


def _current(io: RenewIO, run_id: str) -> Lease | None:
    try:
        return io.current(run_id)
    except Exception:
        return None


def taken_over(lease: Lease, now: Lease | None) -> RunLeasedError:
    """The error of a run whose ``lease`` is now ``now`` (another holder's, or none)."""
    other = "nobody" if now is None else now.holder
    return RunLeasedError(
        f"run {lease.run_id!r}: this process lost its lease (now held by {other}) and stopped "
        "driving the run; the new holder continues it",
        run_id=lease.run_id,
        holder=other,
        expires_at=0.0 if now is None else now.expires_at,
        lost=True,
    )


def unreachable(lease: Lease, error: Exception) -> RunLeasedError:
    """The error of a run that could not renew ``lease`` (``error``) before it expired."""
    return RunLeasedError(
        f"run {lease.run_id!r}: this process could not renew its lease before it expired "
        f"({type(error).__name__}: {error}); it stopped driving the run",
        run_id=lease.run_id,
        holder=lease.holder,
        expires_at=lease.expires_at,
        lost=True,
    )
