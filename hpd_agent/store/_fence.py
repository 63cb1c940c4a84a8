"""The lease as a fence: a run's writes land only while its lease holds their token.

Each take of a run's lease gets a fencing token, a number that only grows (``Lease.fence``;
0 from a store that keeps none). While a session drives its run, ``fencing`` makes the
session's ``Fence`` current (a context variable, so it reaches every task of the run and
nothing else); the built-in stores then write a journal entry, a request or the run's
record of that run only if the stored lease still has that token, checked in the same
statement or transaction as the write. A holder stalled past its lease (suspended, paused)
whose lease was taken over meanwhile finds its write refused: nothing is written, the
write raises ``RunLeasedError`` and the fence is marked lost, so the run is cancelled
before its next tool function or step (``LeaseKeeper.guard``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar, Token

from ..exceptions import RunLeasedError

__all__ = ["Fence", "current_fence", "fencing", "swap_fence"]


class Fence:
    """A session's fencing token for its run.

    Attributes:
        run_id: The run.
        token: The token of the lease the session took.
        lost: Set when a write was refused: the lease is another holder's now.
    """

    __slots__ = ("lost", "run_id", "token")

    def __init__(self, run_id: str, token: int) -> None:
        self.run_id = run_id
        self.token = token
        self.lost: RunLeasedError | None = None

    def refuse(self) -> RunLeasedError:
        """Mark the fence lost; returns the error a refused write raises."""
        error = RunLeasedError(
            f"run {self.run_id!r}: this process's lease was taken over by another process "
            "(it was stalled past its lease); its write was refused and it stops driving the "
            "run, which the new holder continues",
            run_id=self.run_id,
            holder="",
            expires_at=0.0,
            lost=True,
        )
        if self.lost is None:
            self.lost = error
        return error


_CURRENT: ContextVar[Fence | None] = ContextVar("hpd_agent_fence", default=None)


def current_fence(run_id: str) -> Fence | None:
    """The fence a write of ``run_id`` made here must pass, or None (not fenced).

    A store checks it in the same statement or transaction as each write of a run (a
    journal entry, a request, the run's record): if the run's stored lease no longer has
    ``fence.token``, it writes nothing and raises ``fence.refuse()``.

    Args:
        run_id: The run the write belongs to.

    Returns:
        The session's ``Fence`` while one drives ``run_id`` in this context; else None.
    """
    fence = _CURRENT.get()
    if fence is None or fence.run_id != run_id or not fence.token:
        return None
    return fence


class _Fencing:
    """``fencing``'s context manager: a class, not a generator, since it is entered around
    every run and its end (a generator context manager costs a few microseconds more)."""

    __slots__ = ("_fence", "_token")

    def __init__(self, fence: Fence | None) -> None:
        self._fence = fence
        self._token: Token[Fence | None] | None = None

    def __enter__(self) -> None:
        if self._fence is not None:
            self._token = _CURRENT.set(self._fence)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None


def fencing(fence: Fence | None) -> AbstractContextManager[None]:
    """Make ``fence`` current for the writes inside (None: leave things as they are)."""
    return _Fencing(fence)


def swap_fence(fence: Fence | None) -> Fence | None:
    """Make ``fence`` current; the one current before, to swap back with at the end (a
    hold around a whole run keeps that, not the ``Token`` that ``fencing`` keeps)."""
    before = _CURRENT.get()
    _CURRENT.set(fence)
    return before
