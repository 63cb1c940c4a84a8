"""Runs a server hosts: each in the server's task group, found again by id (``RunHost``).

A server that carries an agent's questions across a protocol (MCP, A2A) answers a request
while the run waits: the run outlives the request that started it, and the next request
(maybe on another connection, maybe after a restart) finds it by its run id. With a store,
a run this process does not hold (the server was restarted) is resumed from the store: the
journal replays it to where it waited, nothing runs twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic

import anyio
import anyio.abc
from typing_extensions import TypeVar

from ..agent import Agent
from ..events import RequestEvent
from ..exceptions import InvalidAnswerError, RequestError, UnknownRunError
from ..run import Run, RunResult
from ..store import RunRecord, Store

__all__ = ["HostedRun", "RunHost", "UnknownRunError"]


class HostedRun:
    """One run a server hosts, driven in the server's task group.

    Attributes:
        run: The run.
        lock: Held by the request driving it (one at a time).
        ended: Set once the run has ended.
        notes: Why the last answer to a request was refused, by request id (said with the
            question when it is asked again).
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.lock = anyio.Lock()
        self.ended = anyio.Event()
        self.notes: dict[str, str] = {}

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.run.run_id

    async def answer(self, request_id: str, read: Callable[[], Any]) -> str | None:
        """Answer ``request_id`` with what ``read`` gives (the protocol's reply read as the
        request's answer): None when the run took it, else why not (``read`` or the run
        refused it). A request that ended meanwhile (expired, cancelled) takes nothing and
        the run goes on without it: None too.
        """
        try:
            await self.run.respond(request_id, read())
        except (ValueError, TypeError) as e:
            return str(e)
        except InvalidAnswerError as e:
            return str(e).removeprefix(f"invalid answer for request {request_id}: ")
        except RequestError:
            pass
        return None

    async def stop(self) -> list[RequestEvent] | RunResult:
        """Wait until the run waits for answers (its pending requests) or has ended."""
        pending = await self.run.settled()
        if pending:
            return pending
        await self.ended.wait()
        return self.run.result

    def ending(self) -> None:
        """Called as the run ends, before ``ended`` is set (override to let go of what
        waits on it)."""


H = TypeVar("H", bound=HostedRun, default=HostedRun)


class RunHost(Generic[H]):
    """The runs a server hosts, by run id.

    Args:
        agent: The served agent.
        store: Where runs are journaled, or None (they live in this process only).
        task_group: The server's: runs live in it, not in the request that started them.
        hosted: Makes the ``HostedRun`` (or subclass) kept for each run.
    """

    def __init__(
        self,
        agent: Agent,
        store: Store | None,
        task_group: anyio.abc.TaskGroup,
        hosted: Callable[[Run], H],
    ) -> None:
        self.agent = agent
        self.store = store
        self._tg = task_group
        self._hosted = hosted
        self._live: dict[str, H] = {}
        self._reopening = anyio.Lock()

    async def start(self, query: str, run_id: str | None = None) -> H:
        """A new run of the agent on ``query`` (with ``run_id`` when given)."""
        return await self._serve(self.agent.stream(query, run_id=run_id, store=self.store))

    def live(self, run_id: str) -> H | None:
        """The run ``run_id`` if this process drives it."""
        return self._live.get(run_id)

    async def reopen(self, run_id: str) -> H | RunRecord:
        """The run ``run_id``: live here, or resumed from the store; the store's record of
        it if it has ended.

        Raises:
            UnknownRunError: Not a run of this agent that this process or its store has.
        """
        async with self._reopening:  # two requests for one stored run resume it once
            live = self._live.get(run_id)
            if live is not None:
                return live
            store = self.store
            record = None if store is None else await store.get_run(run_id)
            if store is None or record is None or record.agent_name != self.agent.name:
                raise UnknownRunError(f"no run {run_id!r} of agent {self.agent.name!r} here")
            if record.status in ("completed", "failed", "cancelled"):
                return record
            return await self._serve(self.agent.resume_stream(run_id, store=store))

    async def _serve(self, run: Run) -> H:
        hosted = self._hosted(run)
        self._live[hosted.run_id] = hosted
        try:
            await self._tg.start(self._drive, hosted)
        except BaseException:
            self._live.pop(hosted.run_id, None)
            raise
        return hosted

    async def _drive(
        self,
        hosted: H,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            async with hosted.run as run:
                task_status.started()
                async for _ in run:
                    pass  # the events go nowhere: draining keeps the run listening
        except Exception:
            pass  # a failed run: its result holds the error, the server reports it
        finally:
            self._live.pop(hosted.run_id, None)
            hosted.ending()
            hosted.ended.set()
