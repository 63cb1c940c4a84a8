"""The runs an MCP server drives: each in the server's task group, found again by run id.

A run outlives the ``tools/call`` that started it: on protocol 2026-07-28 the call returns
an ``InputRequiredResult`` while the run waits, and the client's retry (another
``tools/call``, maybe on another connection) finds it here by the run id its
``requestState`` names. With a store, a run this process does not hold (the server was
restarted) is resumed from the store: the journal replays it to where it waited, nothing
runs twice.
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
        lock: Held by the ``tools/call`` driving it (one at a time).
        notes: Why the last answer to a request was refused, by request id (said with the
            question when it is asked again).
        asked: The requests sent to the client, by id.
        why: What ended it early (the client cancelled), for the tool result.
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.lock = anyio.Lock()
        self.ended = anyio.Event()
        self.notes: dict[str, str] = {}
        self.asked: dict[str, RequestEvent] = {}
        self.why: str | None = None
        self.idle: anyio.CancelScope | None = None
        """The expiry running while it waits for its client's retry."""

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.run.run_id

    async def stop(self) -> list[RequestEvent] | RunResult:
        """Wait until the run waits for answers (its pending requests) or has ended."""
        pending = await self.run.settled()
        if pending:
            return pending
        await self.ended.wait()
        return self.run.result

    def cancel_now(self, why: str) -> None:
        """Cancel the run on purpose (its stored requests end cancelled); ``why`` is what
        the tool result will say."""
        if self.why is None:
            self.why = why
        self.run.cancel()

    async def cancel(self, why: str) -> RunResult:
        """``cancel_now``, then wait for the run to end."""
        self.cancel_now(why)
        await self.ended.wait()
        return self.run.result

    def unpark(self) -> None:
        """A client came back for it: no expiry while it is driven."""
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None


class ServedRuns:
    """The runs a server drives, by run id.

    Args:
        agent: The served agent.
        store: Where runs are journaled, or None (they live in this process only).
        task_group: The server's: runs live in it, not in the call that started them.
        idle_ttl: Seconds a run waiting for a client's retry is kept; then it is cancelled
            (its ``requestState`` has expired by then, nobody can continue it).
    """

    def __init__(
        self,
        agent: Agent,
        store: Store | None,
        task_group: anyio.abc.TaskGroup,
        idle_ttl: float,
    ) -> None:
        self.agent = agent
        self.store = store
        self.idle_ttl = idle_ttl
        self._tg = task_group
        self._live: dict[str, ServedRun] = {}
        self._reopening = anyio.Lock()

    async def start(self, query: str) -> ServedRun:
        """A new run of the agent on ``query``."""
        return await self._serve(self.agent.stream(query, store=self.store))

    async def reopen(self, run_id: str) -> ServedRun | RunRecord:
        """The run ``run_id``: live here, or resumed from the store; the store's record of
        it if it has ended.

        Raises:
            UnknownRun: Not a run of this server's agent that this process or its store has.
        """
        async with self._reopening:  # two retries of one stored run resume it once
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

    def park(self, served: ServedRun) -> None:
        """``served`` waits for its client's retry: cancel it if none comes in time."""
        served.unpark()
        if not served.ended.is_set():
            self._tg.start_soon(self._expire, served)

    async def _expire(self, served: ServedRun) -> None:
        with anyio.CancelScope() as scope:
            served.idle = scope
            await anyio.sleep(self.idle_ttl)
            served.why = f"no answer came within {self.idle_ttl:g} seconds"
            served.run.cancel()

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
                    pass  # the events are not sent anywhere: draining keeps the run listening
        except Exception:
            pass  # a failed run: its result holds the error, the tool result says it
        finally:
            self._live.pop(served.run_id, None)
            served.unpark()
            served.ended.set()
