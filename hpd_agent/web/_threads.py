"""The thread registry: each AG-UI thread's root runs, its recorded events, its live run.

Every run is owned by the server's task group, not by an HTTP request: a response only
follows the thread's event log (``follow``), so a client that disconnects (a page reload)
leaves the run going, and any number of clients can follow the same thread. Runs get secret
ids (``secrets.token_hex``); request ids are derived from them, so clients cannot guess one.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from ag_ui.core import BaseEvent, CustomEvent, RunErrorEvent, RunStartedEvent
from ag_ui.core.version import PROTOCOL_VERSION
from anyio.abc import TaskGroup

from ..agent import Agent
from ..events import RequestEvent
from ..messages import Message
from ..run import Run
from ..store import RequestRecord, Store
from ._db import RunRow, ThreadDB
from ._finish import finish_events, public_error
from ._requests import request_value
from ._translate import Translator
from ._view import ThreadView
from ._wire import Out, frame

__all__ = ["MAX_BEHIND", "PING_SECONDS", "STARTING", "Follower", "Mode", "Thread", "Threads"]

Mode = Literal["interrupt", "live"]

PING_SECONDS = 10.0
"""Seconds of silence after which a follower gets a keep-alive comment (within a second)."""

_FLUSH_EVERY = 256
"""Recorded events kept in memory only before they are written to the thread DB."""

STARTING = 4
"""Inputs being started at once (the thread claimed, its run's row written, the first events
recorded, the run created), the others waiting their turn. A start costs the event loop a
millisecond or so, in steps: 200 inputs started in one moment put 200 such steps in every
turn of the loop, ahead of the pieces of the runs already streaming; a few at a time, a few."""

MAX_BEHIND = 8192
"""Events a client may have waiting for it (published while its connection accepted none
of them) before it is told to resync and its stream is closed."""


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
    published: int = 0
    """Frames followers may see: the closing ones wait until they are on disk."""
    changed: anyio.Event | None = None
    """Set at the next publish; made by the first follower that waits for one."""
    ends: list[int] = field(default_factory=list[int])
    """The index of each run's terminal frame (RUN_FINISHED / RUN_ERROR), as recorded here."""
    writing: set[Follower] = field(default_factory=set[Follower])
    """Followers whose write waits for their client to read."""

    @property
    def run(self) -> RunRow | None:
        """The newest run."""
        return self.runs[-1] if self.runs else None

    def owns(self, run_id: str) -> bool:
        """Whether ``run_id`` is one of this thread's runs."""
        return any(r.run_id == run_id for r in self.runs)


class Threads:
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

    # -- runs ------------------------------------------------------------------------------
    async def begin(self, thread: Thread, agui_run_id: str) -> int:
        """Open an AG-UI run on the thread (RUN_STARTED); returns its first frame's index."""
        thread.running = True
        start = len(thread.frames)
        self.append(
            thread,
            RunStartedEvent(
                thread_id=thread.thread_id, run_id=agui_run_id, protocol_version=PROTOCOL_VERSION
            ),
        )
        return start

    def refusal(self, thread: Thread, agui_run_id: str, message: str, code: str) -> list[str]:
        """The frames of a refused input: RUN_STARTED then RUN_ERROR, recorded nowhere (the
        thread's own run, if any, goes on untouched)."""
        now = int(time.time() * 1000)
        started = RunStartedEvent(
            thread_id=thread.thread_id,
            run_id=agui_run_id,
            protocol_version=PROTOCOL_VERSION,
            timestamp=now,
        )
        error = RunErrorEvent(message=message, code=code, timestamp=now)
        return [frame(started), frame(error)]

    async def _end(self, thread: Thread) -> None:
        # The closing frames (and how the run ended) are written before anyone sees them:
        # a client that saw RUN_FINISHED may kill the server at once and still find the
        # thread as it saw it.
        await self.flush(thread, run=True)
        thread.running = False
        thread.live = None
        self.publish(thread)
        self.release(thread)  # followers keep their reference; the registry forgets it

    async def start(
        self,
        thread: Thread,
        agui_run_id: str,
        *,
        prompt: str,
        history: Sequence[Message],
        mode: Mode,
        snapshot: BaseEvent,
    ) -> int:
        """Start a new root run on the thread; returns the index of its RUN_STARTED."""
        run_id = "run_" + secrets.token_hex(16)
        row = RunRow(run_id=run_id, mode=mode, status="running")
        thread.runs.append(row)
        await self._db.put_run(thread.thread_id, len(thread.runs), row)
        start = await self.begin(thread, agui_run_id)
        self.append(thread, snapshot)
        run = self.agent.stream(
            prompt, history=history, run_id=run_id, store=self.store, on_unhandled="interrupt"
        )
        self._spawn(thread, run, agui_run_id, mode)
        return start

    async def resume(self, thread: Thread, agui_run_id: str, answers: dict[str, Any]) -> int:
        """Continue the thread's interrupted run, giving it ``answers`` (checked; written by
        the run once it holds the lease). Another process's live lease is waited out until
        it expires (a crashed holder on this machine is taken over at once)."""
        row = thread.run
        assert row is not None
        row.status = "running"
        await self._db.put_run(thread.thread_id, len(thread.runs), row)
        start = await self.begin(thread, agui_run_id)
        self.append(thread, thread.view.snapshot())
        run = self.agent.resume_stream(
            row.run_id, store=self.store, on_unhandled="interrupt", answers=answers, wait=True
        )
        self._spawn(thread, run, agui_run_id, "interrupt")
        return start

    def _spawn(self, thread: Thread, run: Run, agui_run_id: str, mode: Mode) -> None:
        assert self.task_group is not None, "the app's lifespan has not started"
        row = thread.run
        assert row is not None
        translator = Translator(row.run_id, thread.view)
        self.task_group.start_soon(self._drive, thread, run, translator, agui_run_id, mode)

    async def _drive(
        self, thread: Thread, run: Run, translator: Translator, agui_run_id: str, mode: Mode
    ) -> None:
        row = thread.run
        assert row is not None
        status, error, output = "failed", None, None
        try:
            async with run:
                thread.live = run
                if mode == "interrupt":
                    # Nobody answers mid-run: a question ends the run with an interrupt.
                    run.coordinator.stop_listening()
                async for event in run:
                    outs = translator.translate(event)
                    if outs:
                        for out in outs:
                            self.append(thread, out, publish=False)
                        self.publish(thread)
                    if mode == "live" and isinstance(event, RequestEvent) and not event.replayed:
                        await self._announce(thread, event)
                    if len(thread.frames) - thread.flushed >= _FLUSH_EVERY:
                        await self.flush(thread)
            result = run.result
            status, output = result.status, result.output
            error = None if result.error is None else public_error(result.error, row.run_id)
        except Exception as e:  # the run failed: the client gets RUN_ERROR, never a hang
            error = public_error(e, row.run_id)
        finally:
            with anyio.CancelScope(shield=True):
                row.status = await self._row_status(row.run_id, status)
                pending = await self.store.list_requests(run_id=row.run_id)
                for out in translator.close():
                    self.append(thread, out, publish=False)
                snapshot = thread.view.snapshot()
                for out in finish_events(
                    thread.thread_id,
                    snapshot,
                    agui_run_id,
                    status,
                    output,
                    error,
                    pending,
                ):
                    self.append(thread, out, publish=False)
                thread.ends.append(len(thread.frames) - 1)
                await self._end(thread)

    async def _row_status(self, run_id: str, status: str) -> str:
        """The thread's record of how its run ended: a run that did not end in the store
        (refused by another holder's lease, a failed attempt) stays resumable."""
        if status in ("completed", "interrupted", "cancelled"):
            return status
        record = await self.store.get_run(run_id)
        if record is not None and record.status in ("running", "interrupted"):
            return "interrupted"
        return "failed"

    async def _announce(self, thread: Thread, event: RequestEvent) -> None:
        record = await self.store.get_request(event.request_id) or RequestRecord.from_event(event)
        value = request_value(record)
        custom = CustomEvent(name="hpd_agent.request", value=value)
        custom.subagent_run_id = value["subagentRunId"]
        self.append(thread, custom)
        await self.flush(thread)

    async def pending(self, thread: Thread) -> list[dict[str, Any]]:
        """The thread's pending requests, as ``hpd_agent.request`` values, oldest first."""
        out: list[dict[str, Any]] = []
        for row in thread.runs:
            out += [request_value(r) for r in await self.store.list_requests(run_id=row.run_id)]
        return out

    def messages(self, thread: Thread) -> list[Any]:
        """The thread's messages as AG-UI JSON."""
        return [json.loads(m.model_dump_json(by_alias=True)) for m in thread.view.messages]
