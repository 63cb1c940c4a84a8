"""A thread's event log: each AG-UI event recorded once, published to the thread's
followers, written to the thread DB (``ThreadLog``).

The run driving a thread (``_runs``) appends; each client's stream (``_stream``) follows the
log and writes whatever is published. No client ever holds the run back: the run only
appends, and a follower whose client has ``MAX_BEHIND`` events waiting while a write to it
waits is told to resync.
"""

from __future__ import annotations

import time

import anyio
from ag_ui.core import BaseEvent
from anyio.abc import TaskGroup

from ._db import ThreadDB
from ._state import Thread
from ._wire import Out, frame

__all__ = ["MAX_BEHIND", "ThreadLog"]

MAX_BEHIND = 8192
"""Events a client may have waiting for it (published while its connection accepted none
of them) before it is told to resync and its stream is closed."""


class ThreadLog:
    """The event log of every thread of one server, backed by ``db``."""

    def __init__(self, db: ThreadDB) -> None:
        self.db = db

    def append(self, thread: Thread, event: Out, *, publish: bool = True) -> None:
        """Record one event on the thread, encoded once; publish it (and any held back)
        unless told not to."""
        now = int(time.time() * 1000)
        if isinstance(event, BaseEvent):
            event.timestamp = now
        else:
            event["timestamp"] = now
        thread.view.fold(event)
        thread.frames.append(frame(event))
        if publish:
            self.publish(thread)

    def publish(self, thread: Thread) -> None:
        """Let followers see every frame recorded so far; a follower whose client has
        ``MAX_BEHIND`` events waiting is told to resync (``_stream``)."""
        published = thread.published = len(thread.frames)
        self.wake(thread)
        for follower in thread.writing:
            if not follower.behind and follower.waiting(published) > MAX_BEHIND:
                follower.fall_behind()

    @staticmethod
    async def changed(thread: Thread) -> None:
        """Wait for the thread's next publish (or the next keep-alive tick)."""
        event = thread.changed
        if event is None:
            event = thread.changed = anyio.Event()
        await event.wait()

    @staticmethod
    def wake(thread: Thread) -> None:
        """Wake whoever waits in ``changed``."""
        changed = thread.changed
        if changed is not None:
            thread.changed = None
            changed.set()

    async def flush(self, thread: Thread, *, run: bool = False) -> None:
        """Write the frames recorded since the last flush (and, with ``run``, the newest
        run's row in the same transaction), after the write under way (``write_behind``),
        if any; a write behind that failed fails this one."""
        while thread.flushing is not None:
            await thread.flushing.wait()
        thread.flushing = anyio.Event()
        await self._write(thread, run=run)

    def write_behind(self, thread: Thread, task_group: TaskGroup) -> None:
        """Write the frames recorded so far in ``task_group``, the run going on meanwhile
        (unless a write is under way: the next one takes them). A write that failed is
        raised here, to the run, as an awaited ``flush`` raises it."""
        thread.raise_failed()
        if thread.flushing is None:
            thread.flushing = anyio.Event()  # claimed now: one write at a time, in order
            task_group.start_soon(self._behind, thread)

    async def _behind(self, thread: Thread) -> None:
        try:
            await self._write(thread, run=False)
        except Exception as e:  # the run is told (``write_behind``, ``flush``); not the server
            thread.failed = e

    async def _write(self, thread: Thread, *, run: bool) -> None:
        """``flush``'s write, ``thread.flushing`` claimed for it (set when it ends)."""
        done = thread.flushing
        assert done is not None
        try:
            thread.raise_failed()
            item, frames = thread.items, thread.frames[thread.flushed :]
            thread.flushed = len(thread.frames)
            thread.items += 1 if frames else 0
            row = thread.run if run else None
            where = None if row is None else (len(thread.runs), row)
            await self.db.add_events(thread.thread_id, item, frames, where)
        finally:
            thread.flushing = None
            done.set()
