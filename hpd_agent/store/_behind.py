"""Mode ``"async"``'s writer: one thread per store object commits its runs' facts behind them.

A run in mode ``"async"`` (docs/guarantees.md, "Durability modes") hands each fact to its
``Behind``: a list append under a lock, no task and no await of its own. The store's
``BehindWriter`` runs a daemon thread, started by the first fact it is handed, that gathers
for ``GATHER`` seconds, then commits every run's facts handed over so far in one
transaction on a connection of its own (``BehindIO``), each run's rows fenced by its own
token: a run whose lease was taken over has its rows refused alone, and a run whose write
failed fails at its next fact or at its end. The thread ends after ``IDLE`` seconds with
nothing to write (the next fact starts another) and when the store is closed.

At a question or at its end a run takes back what the writer has not taken yet
(``Behind.settle``, then ``Behind.take``: written with the request or the final record)
and waits only for a batch of its own in flight: what it commits then comes after every
fact the writer committed for it, so its facts are committed in the order it made them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable, Sequence

import anyio.to_thread

from ._base import JournalEntry
from ._facts import Held, entry_of
from ._fence import Fence

__all__ = ["GATHER", "IDLE", "Behind", "BehindIO", "BehindWriter"]

GATHER = 0.002
"""Seconds the writer waits after the first fact of a batch for more (its runs go on)."""

IDLE = 1.0
"""Seconds with nothing to write after which the writer thread ends."""

_LOOP_WAIT = 0.001
"""Seconds a run's end waits on its event loop for a batch of its own in flight (a short
commit, as its own would be) before it waits in a worker thread instead (a thread hop
costs more than most batches' commits; a longer wait would stall the other runs)."""


class BehindIO:
    """The writer thread's way to the store: blocking calls, from that thread only."""

    def commit(
        self, batch: Sequence[tuple[str, Fence | None, list[JournalEntry]]]
    ) -> list[BaseException | None]:
        """Commit every ``(run_id, fence, entries)`` in one transaction; for each, the
        error that refused it alone (a stale fence), or None.

        Raises:
            Exception: The transaction as a whole failed (nothing of it was written).
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release what the writes used (called from the writer thread)."""


class Behind:
    """One run's facts on their way to the store's writer (``BehindWriter.behind``)."""

    __slots__ = ("_writer", "claimed", "failure", "fence", "flying", "held", "queued", "run_id")

    def __init__(self, writer: BehindWriter, run_id: str, fence: Fence | None) -> None:
        self._writer = writer
        self.run_id = run_id
        self.fence = fence
        self.held: list[JournalEntry | Held] = []
        """Facts the writer has not taken yet (as they are: ``_facts``)."""
        self.claimed: list[JournalEntry | Held] = []
        """Facts the run took back to commit itself (``settle``)."""
        self.flying: threading.Event | None = None
        """Set when the writer's batch holding facts of this run is committed."""
        self.failure: BaseException | None = None
        self.queued = False

    def add(self, entry: JournalEntry | Held) -> None:
        """Hand ``entry`` to the writer; raise the error a write of this run failed with."""
        if self.failure is not None:
            raise self.failure
        writer = self._writer
        with writer.lock:
            self.held.append(entry)
            if self.queued:
                return
            self.queued = True
            writer.queue.append(self)
        writer.wake()

    def settle_now(self) -> Awaitable[None] | None:
        """``settle``, done at once when no batch of this run is in flight: None; else
        what to await."""
        with self._writer.lock:
            if self.held:
                self.claimed += self.held
                self.held = []
            flying = self.flying
        if flying is not None:
            return self.settle()
        if self.failure is not None:
            raise self.failure
        return None

    async def settle(self) -> None:
        """Take back what the writer has not taken and wait for a batch of this run in
        flight (its facts go first); raise the error a write of this run failed with."""
        while True:
            with self._writer.lock:
                if self.held:
                    self.claimed += self.held
                    self.held = []
                flying = self.flying
            if flying is None:
                break
            if not flying.wait(_LOOP_WAIT):
                await anyio.to_thread.run_sync(flying.wait)
        if self.failure is not None:
            raise self.failure

    def take(self) -> list[JournalEntry]:
        """The facts taken back (``settle``) and any handed over since, for the caller to
        commit (cleared here)."""
        with self._writer.lock:
            taken = self.claimed + self.held if self.held else self.claimed
            self.claimed, self.held = [], []
        return list(map(entry_of, taken))


class BehindWriter:
    """The writer thread of one store object (module doc).

    Args:
        connect: Makes the thread's ``BehindIO`` (called in the thread when it starts).
        name: The thread's name.
    """

    def __init__(self, connect: Callable[[], BehindIO], name: str) -> None:
        self._connect = connect
        self._name = name
        self.lock = threading.Lock()
        self.queue: list[Behind] = []
        self._wanted = threading.Event()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.batches = 0
        """Batches committed so far (for tests and benchmarks)."""

    def behind(self, run_id: str, fence: Fence | None) -> Behind:
        """A run's way to the writer."""
        return Behind(self, run_id, fence)

    def wake(self) -> None:
        """A run was queued: start the thread if it is not running, and wake it."""
        if self._thread is None:
            with self.lock:
                if self._thread is None and not self._stopping:
                    self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                    self._thread.start()
        self._wanted.set()

    def _loop(self) -> None:
        io: BehindIO | None = None
        try:
            io = self._connect()
            while self._next(io):
                pass
        finally:
            with self.lock:
                self._thread = None
                again = bool(self.queue) and not self._stopping
            if io is not None:
                with contextlib.suppress(Exception):
                    io.close()
            if again:  # a run queued while the thread was ending
                self.wake()

    def _next(self, io: BehindIO) -> bool:
        """Wait for facts, then commit one batch; False when the thread should end."""
        if not self._wanted.wait(IDLE):
            with self.lock:
                return bool(self.queue) and not self._stopping
        self._wanted.clear()
        self._halt.wait(GATHER)  # more facts come meanwhile (``stop`` cuts it short)
        self._commit(io)
        return not self._stopping

    def _commit(self, io: BehindIO) -> None:
        done = threading.Event()
        with self.lock:
            batch = [(b, b.held) for b in self.queue if b.held]
            for b in self.queue:
                b.queued = False
                if b.held:
                    b.held = []
                    b.flying = done
            self.queue = []
        if not batch:
            return
        try:
            # Made into entries here, in the writer's thread, not on the runs' event loop.
            commits = [(b.run_id, b.fence, list(map(entry_of, held))) for b, held in batch]
            errors = io.commit(commits)
        except Exception as e:
            errors = [e] * len(batch)
        with self.lock:
            for (b, _), error in zip(batch, errors, strict=True):
                if error is not None and b.failure is None:
                    b.failure = error
                if b.flying is done:
                    b.flying = None
            self.batches += 1
        done.set()

    def stop(self) -> threading.Thread | None:
        """Stop the thread after it commits what it was handed; the thread to join."""
        with self.lock:
            self._stopping = True
            thread = self._thread
        self._halt.set()
        self._wanted.set()
        return thread
