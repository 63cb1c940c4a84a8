"""The runs an A2A server drives: each in the server's task group, found again by task id.

A run outlives the message that started it: the message's execution ends once the run has
settled (``TASK_STATE_INPUT_REQUIRED``), and the next user message in the task (maybe on
another connection, maybe after a restart) finds the run here by its id, which is the
task's id. With a store, a run this process does not hold (the server was restarted) is
resumed from the store: the journal replays it to where it waited, nothing runs twice.
"""

from __future__ import annotations

import anyio
import anyio.abc

from ..agent import Agent
from ..events import RequestEvent
from ..run import Run, RunResult
from ..store import RunRecord, Store

__all__ = ["ServedRun", "ServedRuns", "UnknownRun"]


class UnknownRun(Exception):
    """No run of this server has that id (finished without a store, or another's)."""


class ServedRun:
    """One run of the served agent, driven in the server's task group.

    Attributes:
        run: The run.
        lock: Held by the execution giving it an answer (one at a time).
        notes: Why the last answer to a request was refused, by request id (said with the
            question when it is asked again).
        answered: Ids of the requests answered through this server.
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.lock = anyio.Lock()
        self.ended = anyio.Event()
        self.notes: dict[str, str] = {}
        self.answered: set[str] = set()

    @property
    def run_id(self) -> str:
        """The run's id (the task's)."""
        return self.run.run_id

    async def stop(self) -> list[RequestEvent] | RunResult:
        """Wait until the run waits for answers (its pending requests) or has ended."""
        pending = await self.run.settled()
        if pending:
            return pending
        # settled() returns [] once the run's result is final (and stored): not waiting for
        # the driving task to leave the run saves the report a few event-loop hops.
        return self.run.result


class ServedRuns:
    """The runs a server drives, by run id (= task id).

    Args:
        agent: The served agent.
        store: Where runs are journaled, or None (they live in this process only).
        task_group: The server's: runs live in it, not in the execution that started them.
    """

    def __init__(self, agent: Agent, store: Store | None, task_group: anyio.abc.TaskGroup) -> None:
        self.agent = agent
        self.store = store
        self._tg = task_group
        self._live: dict[str, ServedRun] = {}
        self._reopening = anyio.Lock()
        self._cancelled: set[str] = set()

    async def start(self, query: str, run_id: str) -> ServedRun:
        """A new run of the agent on ``query``, with the task's id."""
        return await self._serve(self.agent.stream(query, run_id=run_id, store=self.store))

    async def reopen(self, run_id: str) -> ServedRun | RunRecord:
        """The run ``run_id``: live here, or resumed from the store; the store's record of
        it if it has ended.

        Raises:
            UnknownRun: Not a run of this server's agent that this process or its store has.
        """
        async with self._reopening:  # two messages for one stored run resume it once
            live = self._live.get(run_id)
            if live is not None:
                return live
            store = self.store
            record = None if store is None else await store.get_run(run_id)
            if store is None or record is None or record.agent_name != self.agent.name:
                raise UnknownRun(run_id)
            if record.status in ("completed", "failed", "cancelled"):
                return record
            return await self._serve(self.agent.resume_stream(run_id, store=store))

    async def cancel(self, run_id: str) -> None:
        """The task was canceled: its run goes no further. Returns once it has ended (a
        stored run this process does not hold is resumed to be cancelled, so its stored
        requests end too)."""
        self._cancelled.add(run_id)
        live = self._live.get(run_id)
        if live is None and self.store is not None:
            try:
                found = await self.reopen(run_id)
            except UnknownRun:
                return
            live = found if isinstance(found, ServedRun) else None
            if live is not None:
                await live.run.settled()  # replayed to where it waited: its store learns
        if live is not None:
            live.run.cancel()
            await live.ended.wait()

    def was_cancelled(self, run_id: str) -> bool:
        """Whether the task of ``run_id`` was canceled."""
        return run_id in self._cancelled

    async def _serve(self, run: Run) -> ServedRun:
        served = ServedRun(run)
        self._live[served.run_id] = served
        try:
            await self._tg.start(self._drive, served)
        except BaseException:
            self._live.pop(served.run_id, None)
            raise
        return served

    async def _drive(
        self,
        served: ServedRun,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            async with served.run as run:
                task_status.started()
                async for _ in run:
                    pass  # the events go nowhere: draining keeps the run listening
        except Exception:
            pass  # a failed run: its result holds the error, the task's status says it
        finally:
            self._live.pop(served.run_id, None)
            served.ended.set()
