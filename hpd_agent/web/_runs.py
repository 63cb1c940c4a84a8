"""A thread's root runs started, resumed and driven: ``ThreadRuns``, an object the thread
registry (``_threads``) holds.

An input opens an AG-UI run on the thread (RUN_STARTED), starts or resumes its root run, and
the run is driven in the server's task group by ``hosting.drive``, the driver every adapter
shares, with a sink of this thread's (``RunFrames``: each event translated and recorded in
the thread's log, a live question announced), then closed with its terminal events from its
``hosting.Outcome``, written before anyone sees them. A refused input's frames are made here
too.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from ag_ui.core import BaseEvent, CustomEvent, RunErrorEvent, RunStartedEvent
from ag_ui.core.version import PROTOCOL_VERSION
from anyio.abc import TaskGroup

from ..agent import Agent
from ..events import Event, RequestEvent, TextDelta
from ..hosting import Activity, EventSink, Outcome, drive
from ..messages import Message
from ..run import Run
from ..store import RequestRecord, Store
from ._db import RunRow, ThreadDB
from ._finish import finish_events
from ._log import ThreadLog
from ._requests import request_value
from ._state import Mode, Thread
from ._translate import Translator
from ._wire import frame

__all__ = ["RunFrames", "ThreadRuns"]

_FLUSH_EVERY = 1024
"""Recorded events kept in memory only before they are written to the thread DB (behind the
run: it goes on while they are written)."""


class ThreadRuns:
    """Starts, resumes and drives the threads' root runs.

    Args:
        agent: The agent whose runs the threads hold.
        store: Where the runs are kept.
        db: The threads' runs and events.
        log: The threads' event log.
        release: Forgets a thread whose run has ended (the registry's).
        activity: The server's activity log, told of each run (None: no log).

    Attributes:
        task_group: The server's task group, which owns every run (set by the app's lifespan).
    """

    def __init__(
        self,
        agent: Agent,
        store: Store,
        db: ThreadDB,
        log: ThreadLog,
        release: Callable[[Thread], None],
        activity: Activity | None = None,
    ) -> None:
        self.agent = agent
        self.store = store
        self.db = db
        self.log = log
        self.release = release
        self.activity = activity
        self.task_group: TaskGroup | None = None

    def begin(self, thread: Thread, agui_run_id: str) -> int:
        """Open an AG-UI run on the thread (RUN_STARTED); returns its first frame's index."""
        thread.running = True
        start = len(thread.frames)
        self.log.append(
            thread,
            RunStartedEvent(
                thread_id=thread.thread_id, run_id=agui_run_id, protocol_version=PROTOCOL_VERSION
            ),
        )
        return start

    @staticmethod
    def refusal(thread: Thread, agui_run_id: str, message: str, code: str) -> list[str]:
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
        await self.db.put_run(thread.thread_id, len(thread.runs), row)
        start = self.begin(thread, agui_run_id)
        self.log.append(thread, snapshot)
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
        await self.db.put_run(thread.thread_id, len(thread.runs), row)
        start = self.begin(thread, agui_run_id)
        self.log.append(thread, thread.view.snapshot())
        run = self.agent.resume_stream(
            row.run_id, store=self.store, on_unhandled="interrupt", answers=answers, wait=True
        )
        self._spawn(thread, run, agui_run_id, "interrupt", resumed=True)
        return start

    def _spawn(
        self, thread: Thread, run: Run, agui_run_id: str, mode: Mode, *, resumed: bool = False
    ) -> None:
        assert self.task_group is not None, "the app's lifespan has not started"
        frames = RunFrames(self, thread, run, agui_run_id, mode)
        sink: EventSink = frames
        if self.activity is not None:
            where = f"thread {thread.thread_id}, {mode}"
            sink = self.activity.watch(frames, run.run_id, where, resumed=resumed)
        # Interrupt mode: nobody answers mid-run, a question ends the run with an interrupt.
        driving = partial(drive, run, sink, listening=mode == "live", entered=frames.entered)
        self.task_group.start_soon(driving)

    async def row_status(self, run_id: str, status: str) -> str:
        """The thread's record of how its run ended: a run that did not end in the store
        (refused by another holder's lease, a failed attempt) stays resumable."""
        if status in ("completed", "interrupted", "cancelled"):
            return status
        record = await self.store.get_run(run_id)
        if record is not None and record.status in ("running", "interrupted"):
            return "interrupted"
        return "failed"


class RunFrames:
    """One run of a thread as AG-UI frames: the ``hosting.EventSink`` it is driven with.

    Args:
        runs: The registry's runs (store, log, release).
        thread: The thread.
        run: Its root run.
        agui_run_id: The AG-UI run the frames belong to.
        mode: ``"live"``: a question is announced as it comes; ``"interrupt"``: it ends the
            run.
    """

    __slots__ = ("agui_run_id", "live", "log", "run", "runs", "thread", "translator")

    def __init__(
        self, runs: ThreadRuns, thread: Thread, run: Run, agui_run_id: str, mode: Mode
    ) -> None:
        row = thread.run
        assert row is not None
        self.runs = runs
        self.log = runs.log
        self.thread = thread
        self.run = run
        self.agui_run_id = agui_run_id
        self.live = mode == "live"
        self.translator = Translator(row.run_id, thread.view)

    def entered(self) -> None:
        """The run has started: answers reach it live from now on."""
        self.thread.live = self.run

    def take(self, event: Event) -> Awaitable[None] | None:
        """Translate one event into frames, recorded and published."""
        thread, log = self.thread, self.log
        if type(event) is TextDelta and self.translator.piece(event, thread.frames):
            # The hot path (a piece of an open message, recorded): published in line, the
            # publisher called only when someone waits for it or a write waits for a client.
            published = thread.published = len(thread.frames)
            if thread.changed is not None or thread.writing:
                log.publish(thread)
        else:
            outs = self.translator.translate(event)
            if outs:
                for out in outs:
                    log.append(thread, out, publish=False)
                log.publish(thread)
            if self.live and isinstance(event, RequestEvent) and not event.replayed:
                return self._announce(event)  # written at once (a flush)
            published = len(thread.frames)
        if published - thread.flushed >= _FLUSH_EVERY and thread.flushing is None:
            task_group = self.runs.task_group
            assert task_group is not None
            log.write_behind(thread, task_group)
        return None

    async def _announce(self, event: RequestEvent) -> None:
        store = self.runs.store
        record = await store.get_request(event.request_id) or RequestRecord.from_event(event)
        value = request_value(record)
        custom = CustomEvent(name="hpd_agent.request", value=value)
        custom.subagent_run_id = value["subagentRunId"]
        self.log.append(self.thread, custom)
        await self.log.flush(self.thread)

    async def close(self, outcome: Outcome, raised: Exception | None) -> None:
        """The closing frames (snapshots, then RUN_FINISHED or RUN_ERROR), written before
        anyone sees them: a client that saw RUN_FINISHED may kill the server at once and
        still find the thread as it saw it."""
        thread, log = self.thread, self.log
        row = thread.run
        assert row is not None
        row.status = await self.runs.row_status(row.run_id, outcome.status)
        pending = await self.runs.store.list_requests(run_id=row.run_id)
        for out in self.translator.close():
            log.append(thread, out, publish=False)
        result = outcome.result  # its output as the run gave it (a structured one too)
        output = outcome.output if result is None else result.output
        snapshot = thread.view.snapshot()
        for out in finish_events(
            thread.thread_id,
            snapshot,
            self.agui_run_id,
            outcome.status,
            output,
            outcome.error,
            pending,
        ):
            log.append(thread, out, publish=False)
        thread.ends.append(len(thread.frames) - 1)
        await log.flush(thread, run=True)
        thread.running = False
        thread.live = None
        log.publish(thread)
        self.runs.release(thread)  # followers keep their reference; the registry forgets it
