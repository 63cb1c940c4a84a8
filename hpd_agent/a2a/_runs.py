"""The runs an A2A server drives (``hpd_agent.hosting``), found again by task id.

A run outlives the message that started it: the message's execution ends once the run has
settled (``TASK_STATE_INPUT_REQUIRED``), and the next user message in the task finds the
run by its id, which is the task's id. Each run is a turn of its task's context
(``_contexts``): one at a time per context.
"""

from __future__ import annotations

import anyio.abc

from ..agent import Agent
from ..hosting import Activity, EventSink, HostedRun, RunHost
from ..run import Run
from ..store import RunRecord, Store
from ._contexts import Contexts, busy

__all__ = ["CHANNEL", "ServedRun", "ServedRuns"]

CHANNEL = "A2A"
"""How the activity log names where this server's runs and questions are."""


class ServedRun(HostedRun):
    """One run of the served agent (``HostedRun``) and the requests answered through the
    server (``answered``, by id)."""

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self.answered: set[str] = set()


class ServedRuns(RunHost[ServedRun]):
    """The runs an A2A server drives, by run id (= task id), and the tasks canceled.

    Args:
        agent: The served agent.
        store: Where runs are journaled, or None (they live in this process only).
        task_group: The server's: runs live in it, not in the execution that started them.
        activity: The server's activity log, told of each run (None: no log).
    """

    def __init__(
        self,
        agent: Agent,
        store: Store | None,
        task_group: anyio.abc.TaskGroup,
        activity: Activity | None = None,
    ) -> None:
        contexts = Contexts(store)
        super().__init__(agent, store, task_group, ServedRun, histories=contexts.histories)
        self.activity = activity
        self.contexts = contexts
        self._cancelled: set[str] = set()
        self._starting: dict[str, str] = {}  # conversation -> the task starting its turn

    async def start_turn(self, query: str, *, conversation: str, run_id: str) -> ServedRun:
        """The run of a new task (``run_id``): the next turn of ``conversation``.

        Raises:
            UnsupportedOperationError: The conversation's last task is still working or
                waits for input (here, or as the store keeps it).
        """
        holder = self._starting.get(conversation) or self.turn(conversation)
        if holder is not None:  # taken before any await: two at once, one goes
            raise busy(holder if isinstance(holder, str) else holder.run_id)
        self._starting[conversation] = run_id
        try:
            await self.contexts.claim(conversation, run_id)
            return await self.start(query, conversation=conversation, run_id=run_id)
        finally:
            del self._starting[conversation]

    async def reopen(
        self, run_id: str, *, conversation: str | None = None
    ) -> ServedRun | RunRecord:
        """The run ``run_id`` (``RunHost.reopen``); one resumed from the store is a turn of
        its task's context (kept with the store's thread tables) unless told otherwise."""
        if conversation is None and self.live(run_id) is None:
            conversation = await self.contexts.of_task(run_id)
        return await super().reopen(run_id, conversation=conversation)

    def sink(self, hosted: ServedRun, *, resumed: bool) -> EventSink:
        """The run, watched by the activity log when the server keeps one."""
        if self.activity is None:
            return hosted
        return self.activity.watch(hosted, hosted.run_id, CHANNEL, resumed=resumed)

    async def cancel(self, run_id: str) -> None:
        """The task was canceled: its run goes no further, wherever it is driven
        (``RunHost.cancel``). Returns once it has ended."""
        self._cancelled.add(run_id)
        await super().cancel(run_id)

    def was_cancelled(self, run_id: str) -> bool:
        """Whether the task of ``run_id`` was canceled."""
        return run_id in self._cancelled
