"""The runs an MCP server drives (``hpd_agent.hosting``), found again by run id, and
their expiry.

A run outlives the ``tools/call`` that started it: on protocol 2026-07-28 the call returns
an ``InputRequiredResult`` while the run waits, and the client's retry (another
``tools/call``, maybe on another connection) finds it by the run id its ``requestState``
names.
"""

from __future__ import annotations

import anyio
import anyio.abc

from ..agent import Agent
from ..events import RequestEvent
from ..hosting import HostedRun, RunHost
from ..run import Run
from ..store import Store

__all__ = ["MCP_CLIENT", "ServedRun", "ServedRuns"]

MCP_CLIENT = "the MCP client"
"""Who a permission is denied by (``hosting.decision_of``)."""


class ServedRun(HostedRun):
    """One run of the served agent (``HostedRun``: ``reason`` says what ended it early,
    the client cancelling, for the tool result), as the MCP server tracks it.

    Attributes:
        asked: The requests sent to the client, by id.
    """

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self.asked: dict[str, RequestEvent] = {}
        self.idle: anyio.CancelScope | None = None
        """The expiry running while it waits for its client's retry."""

    def unpark(self) -> None:
        """A client came back for it: no expiry while it is driven."""
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None

    def ending(self) -> None:
        self.unpark()


class ServedRuns(RunHost[ServedRun]):
    """The runs an MCP server drives, by run id; one waiting for a retry expires.

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
        super().__init__(agent, store, task_group, ServedRun)
        self.idle_ttl = idle_ttl

    def park(self, served: ServedRun) -> None:
        """``served`` waits for its client's retry: cancel it if none comes in time."""
        served.unpark()
        if not served.ended.is_set():
            self._tg.start_soon(self._expire, served)

    async def _expire(self, served: ServedRun) -> None:
        with anyio.CancelScope() as scope:
            served.idle = scope
            await anyio.sleep(self.idle_ttl)
            served.cancel_nowait(f"no answer came within {self.idle_ttl:g} seconds")
