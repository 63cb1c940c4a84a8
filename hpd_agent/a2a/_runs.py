"""The runs an A2A server drives (``hpd_agent.hosting``), found again by task id.

A run outlives the message that started it: the message's execution ends once the run has
settled (``TASK_STATE_INPUT_REQUIRED``), and the next user message in the task finds the
run by its id, which is the task's id.
"""

from __future__ import annotations

import anyio.abc

from ..agent import Agent
from ..hosting import Activity, EventSink, HostedRun, RunHost
from ..run import Run
from ..store import Store

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
        super().__init__(agent, store, task_group, ServedRun)
        self.activity = activity
        self._cancelled: set[str] = set()

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
