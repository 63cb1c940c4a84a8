"""The thread registry: each AG-UI thread's root runs, its recorded events, its live run.

Every run is owned by the server's task group, not by an HTTP request: a response only
follows the thread's event log (``follow``), so a client that disconnects (a page reload)
leaves the run going, and any number of clients can follow the same thread. Runs get secret
ids (``secrets.token_hex``); request ids are derived from them, so clients cannot guess one.
The registry holds two objects: the threads' event log (``ThreadLog``, ``_log``: each event
recorded once, published to followers, written to the DB) and their runs (``ThreadRuns``,
``_runs``: started, resumed and driven by ``hosting.drive``); a thread's state in memory is
``Thread`` (``_state``).
"""

from __future__ import annotations

import json
from typing import Any

import anyio

from ..agent import Agent
from ..hosting import Activity
from ..store import Store
from ._db import ThreadDB
from ._log import MAX_BEHIND, ThreadLog
from ._requests import request_value
from ._runs import ThreadRuns
from ._state import Follower, Mode, Thread

__all__ = ["MAX_BEHIND", "PING_SECONDS", "STARTING", "Follower", "Mode", "Thread", "Threads"]

PING_SECONDS = 10.0
"""Seconds of silence after which a follower gets a keep-alive comment (within a second)."""

STARTING = 4
"""Inputs being started at once (the thread claimed, its run's row written, the first events
recorded, the run created), the others waiting their turn. A start costs the event loop a
millisecond or so, in steps: 200 inputs started in one moment put 200 such steps in every
turn of the loop, ahead of the pieces of the runs already streaming; a few at a time, a few."""


class Threads:
    """Every thread of one server, backed by ``db`` and the agent's ``store``.

    Attributes:
        log: The threads' event log.
        runs: Their root runs (its ``task_group`` set by the app's lifespan).
        activity: The server's activity log, if it keeps one.
    """

    def __init__(
        self, agent: Agent, store: Store, db: ThreadDB, activity: Activity | None = None
    ) -> None:
        self.agent = agent
        self.store = store
        self._db = db
        self._threads: dict[str, Thread] = {}
        self.log = ThreadLog(db)
        self.activity = activity
        self.runs = ThreadRuns(agent, store, db, self.log, self.release, activity)
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
        runs, frames = loaded.runs, loaded.frames
        thread = Thread(thread_id, runs=runs)
        thread.frames = frames
        for f in frames if view else ():
            thread.view.fold(json.loads(f[6:]))  # "data: {...}\n\n"
        thread.flushed = thread.published = len(frames)
        thread.items = loaded.items
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

    async def keep_alive(self) -> None:
        """Wake the followers of every thread once a second, so a stream that had nothing
        to send for ``PING_SECONDS`` sends its keep-alive comment (one timer for the
        server, not one per wait)."""
        while True:
            await anyio.sleep(1)
            for thread in list(self._threads.values()):
                ThreadLog.wake(thread)

    async def pending(self, thread: Thread) -> list[dict[str, Any]]:
        """The thread's pending requests, as ``hpd_agent.request`` values, oldest first."""
        out: list[dict[str, Any]] = []
        for row in thread.runs:
            out += [request_value(r) for r in await self.store.list_requests(run_id=row.run_id)]
        return out

    def messages(self, thread: Thread) -> list[Any]:
        """The thread's messages as AG-UI JSON."""
        return [json.loads(m.model_dump_json(by_alias=True)) for m in thread.view.messages]
