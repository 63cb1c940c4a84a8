"""The thread registry: each AG-UI thread's root runs, its recorded events, its live run.

Every run is owned by the server's task group, not by an HTTP request: a response only
follows the thread's event log (``follow``), so a client that disconnects (a page reload)
leaves the run going, and any number of clients can follow the same thread. Runs get secret
ids (``secrets.token_hex``); request ids are derived from them, so clients cannot guess one.
The runs are started, resumed and driven by ``ThreadRuns`` (``_runs``), a mixin of
``Threads``; a thread's state in memory is ``Thread`` (``_state``).
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
from ag_ui.core import BaseEvent
from anyio.abc import TaskGroup

from ..agent import Agent
from ..store import Store
from ._db import ThreadDB
from ._requests import request_value
from ._runs import ThreadRuns
from ._state import Follower, Mode, Thread
from ._wire import Out, frame

__all__ = ["MAX_BEHIND", "PING_SECONDS", "STARTING", "Follower", "Mode", "Thread", "Threads"]

PING_SECONDS = 10.0
"""Seconds of silence after which a follower gets a keep-alive comment (within a second)."""

STARTING = 4
"""Inputs being started at once (the thread claimed, its run's row written, the first events
recorded, the run created), the others waiting their turn. A start costs the event loop a
millisecond or so, in steps: 200 inputs started in one moment put 200 such steps in every
turn of the loop, ahead of the pieces of the runs already streaming; a few at a time, a few."""

MAX_BEHIND = 8192
"""Events a client may have waiting for it (published while its connection accepted none
of them) before it is told to resync and its stream is closed."""


class Threads(ThreadRuns):
    """Every thread of one server, backed by ``db`` and the agent's ``store``."""

    def __init__(self, agent: Agent, store: Store, db: ThreadDB) -> None:
        self.agent = agent
        self.store = store
        self._db = db
        self._threads: dict[str, Thread] = {}
        self.task_group: TaskGroup | None = None
        self.admission = anyio.Semaphore(STARTING)
        """Held while an input is started (``STARTING`` at once, the others wait in turn)."""

    @property
    def active(self) -> int:
        """Threads held in memory: those with a run going (or an input being started)."""
        return len(self._threads)

    async def _load(self, thread_id: str, *, view: bool = True) -> Thread | None:
        loaded = await self._db.load(thread_id)
        if loaded is None:
            return None
        runs, frames = loaded
        thread = Thread(thread_id, runs=runs)
        thread.frames = frames
        for f in frames if view else ():
            thread.view.fold(json.loads(f[6:]))  # "data: {...}\n\n"
        thread.flushed = thread.published = len(frames)
        if runs[-1].status == "running":
            runs[-1].status = "interrupted"  # the server died under it: resumable
        return thread

    async def get(self, thread_id: str, *, view: bool = True) -> Thread | None:
        """The thread: the one in memory while a run goes, else loaded from the DB (a copy
        nobody keeps, its ``view`` folded only if asked); None if unknown."""
        return self._threads.get(thread_id) or await self._load(thread_id, view=view)

    async def claim(self, thread_id: str) -> Thread:
        """The thread, kept in memory (created empty if unknown) until ``release``."""
        thread = self._threads.get(thread_id)
        if thread is not None:
            return thread
        loaded = await self._load(thread_id) or Thread(thread_id)
        return self._threads.setdefault(thread_id, loaded)  # another claim may have won

    def release(self, thread: Thread) -> None:
        """Forget ``thread`` unless a run goes on it (its state is all in the DB)."""
        if not thread.running and self._threads.get(thread.thread_id) is thread:
            del self._threads[thread.thread_id]

    async def thread_of(self, run_id: str) -> str | None:
        """The thread that started root run ``run_id``, or None."""
        return await self._db.thread_of(run_id)

    # -- the log ---------------------------------------------------------------------------
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
        self._wake(thread)
        for follower in thread.writing:
            if not follower.behind and follower.waiting(published) > MAX_BEHIND:
                follower.fall_behind()

    async def changed(self, thread: Thread) -> None:
        """Wait for the next publish (or the next ``keep_alive`` tick)."""
        event = thread.changed
        if event is None:
            event = thread.changed = anyio.Event()
        await event.wait()

    @staticmethod
    def _wake(thread: Thread) -> None:
        changed = thread.changed
        if changed is not None:
            thread.changed = None
            changed.set()

    async def keep_alive(self) -> None:
        """Wake the followers of every thread once a second, so a stream that had nothing
        to send for ``PING_SECONDS`` sends its keep-alive comment (one timer for the
        server, not one per wait)."""
        while True:
            await anyio.sleep(1)
            for thread in list(self._threads.values()):
                self._wake(thread)

    async def flush(self, thread: Thread, *, run: bool = False) -> None:
        """Write the frames recorded since the last flush (and, with ``run``, the newest
        run's row in the same transaction)."""
        first, frames = thread.flushed, thread.frames[thread.flushed :]
        thread.flushed = len(thread.frames)
        row = thread.run if run else None
        where = None if row is None else (len(thread.runs), row)
        await self._db.add_events(thread.thread_id, first, frames, where)

    async def pending(self, thread: Thread) -> list[dict[str, Any]]:
        """The thread's pending requests, as ``hpd_agent.request`` values, oldest first."""
        out: list[dict[str, Any]] = []
        for row in thread.runs:
            out += [request_value(r) for r in await self.store.list_requests(run_id=row.run_id)]
        return out

    def messages(self, thread: Thread) -> list[Any]:
        """The thread's messages as AG-UI JSON."""
        return [json.loads(m.model_dump_json(by_alias=True)) for m in thread.view.messages]
