"""The runs side of the thread registry: a thread's root runs started, resumed and driven.

``ThreadRuns`` is a mixin of ``Threads`` (``_threads``): an input opens an AG-UI run on the
thread (RUN_STARTED), starts or resumes its root run, and the run is driven in the server's
task group (each event translated and recorded, a live question announced), then closed with
its terminal events, written before anyone sees them. A refused input's frames are made here
too. A mixin rather than an object the registry holds: a run's events pay no call more.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
from ._state import Mode, Thread
from ._translate import Translator
from ._wire import Out, frame

__all__ = ["ThreadRuns"]

_FLUSH_EVERY = 256
"""Recorded events kept in memory only before they are written to the thread DB."""


class ThreadRuns:
    """The methods of ``Threads`` that start, resume and drive a thread's root runs.

    Attributes:
        agent: The agent whose runs the threads hold.
        store: Where the runs are kept.
        task_group: The server's task group, which owns every run (set by the app's lifespan).
    """

    # Set by Threads.__init__; declared here so that the methods below are typed.
    agent: Agent
    store: Store
    _db: ThreadDB
    task_group: TaskGroup | None

    if TYPE_CHECKING:
        # Threads defines these (the registry and the log).
        def append(self, thread: Thread, event: Out, *, publish: bool = True) -> None: ...
        def publish(self, thread: Thread) -> None: ...
        async def flush(self, thread: Thread, *, run: bool = False) -> None: ...
        def release(self, thread: Thread) -> None: ...

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
