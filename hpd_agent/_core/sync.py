"""``Agent.run_sync``: a root run from synchronous code (scripts, notebooks' plain cells).

It starts an event loop of its own (``anyio.run``), so it refuses where one is running
already (inside ``async def`` code, a notebook's loop, a trio program) and inside a tool call
(a nested run must be awaited: ``await agent.run(...)``).
"""

from __future__ import annotations

import asyncio
import sys

from ..exceptions import UserError
from .context import current_context

__all__ = ["refuse_sync", "running_loop"]


def running_loop() -> str | None:
    """The event loop running in this thread (``"asyncio"`` or ``"trio"``), or None."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return "asyncio"
    trio = sys.modules.get("trio")
    if trio is not None and trio.lowlevel.in_trio_run():
        return "trio"
    return None


def refuse_sync(agent_name: str) -> None:
    """Refuse ``run_sync`` inside a tool call or a running event loop.

    Raises:
        UserError: Where ``run_sync`` cannot start an event loop of its own.
    """
    if current_context() is not None:
        raise UserError(
            f"run_sync() of agent {agent_name!r} inside a tool call: a nested run must be "
            f"awaited: use `await agent.run(...)` in an async tool"
        )
    loop = running_loop()
    if loop is not None:
        raise UserError(
            f"run_sync() of agent {agent_name!r} inside a running {loop} event loop: "
            "use `await agent.run(...)` there instead"
        )
