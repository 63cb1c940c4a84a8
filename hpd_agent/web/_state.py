"""One AG-UI thread in memory: its runs, its recorded frames and the clients following it.

``Thread`` is what the registry (``_threads.Threads``) holds while a run goes on the thread (or
an input is being started); ``Follower`` is one client reading its log (``_stream``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import anyio

from ..run import Run
from ._db import RunRow
from ._view import ThreadView

__all__ = ["Follower", "Mode", "Thread"]

Mode = Literal["interrupt", "live"]


class Follower:
    """One client following a thread's log (``_stream``): the frames before ``index`` were
    handed to its connection; while a write to it waits for the client to read (it is in
    ``Thread.writing`` then), the run's publisher checks how many events queue up behind it."""

    __slots__ = ("base", "behind", "index", "scope")

    def __init__(self, index: int, base: int) -> None:
        self.index = index
        self.base = base
        """Frames published when it connected: replaying those is not falling behind."""
        self.behind = False
        self.scope: anyio.CancelScope | None = None
        """The stream's scope: cancelled when the client fell behind."""

    def waiting(self, published: int) -> int:
        """Events published for this client and not handed to its connection yet."""
        return published - max(self.index, self.base)

    def fall_behind(self) -> None:
        """Mark it behind and stop the write that waits for it."""
        self.behind = True
        if self.scope is not None:
            self.scope.cancel()


@dataclass(eq=False)
class Thread:
    """One AG-UI thread: its runs (newest last), sent frames, and what its clients saw."""

    thread_id: str
    runs: list[RunRow] = field(default_factory=list[RunRow])
    frames: list[str] = field(default_factory=list[str])
    view: ThreadView = field(default_factory=ThreadView)
    running: bool = False
    live: Run | None = None
    flushed: int = 0
    """Frames written to the thread DB (or being written)."""
    items: int = 0
    """Items those frames are in there (``_db``: one per write)."""
    published: int = 0
    """Frames followers may see: the closing ones wait until they are on disk."""
    changed: anyio.Event | None = None
    """Set at the next publish; made by the first follower that waits for one."""
    ends: list[int] = field(default_factory=list[int])
    """The index of each run's terminal frame (RUN_FINISHED / RUN_ERROR), as recorded here."""
    writing: set[Follower] = field(default_factory=set[Follower])
    """Followers whose write waits for their client to read."""
    flushing: anyio.Event | None = None
    """Set when the write of frames to the thread DB under way ends (``ThreadLog.flush``)."""
    failed: Exception | None = None
    """Why a write behind the run failed (raised to the run at its next flush)."""

    @property
    def run(self) -> RunRow | None:
        """The newest run."""
        return self.runs[-1] if self.runs else None

    def raise_failed(self) -> None:
        """Raise why a write behind the run failed, once."""
        failed, self.failed = self.failed, None
        if failed is not None:
            raise failed

    def owns(self, run_id: str) -> bool:
        """Whether ``run_id`` is one of this thread's runs."""
        return any(r.run_id == run_id for r in self.runs)
