"""``Agent.run_sync``: a root run from synchronous code (scripts, notebooks' plain cells).

It starts an event loop of its own (``anyio.run``), so it refuses where one is running
already (inside ``async def`` code, a notebook's loop, a trio program) and inside a tool call
(a nested run must be awaited: ``await agent.run(...)``).
"""

from __future__ import annotations

import asyncio
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import partial
from typing import Any

import anyio

from ..coordinator import OnUnhandled
from ..exceptions import UserError
from ..handlers._base import Handler
from ..hooks import Hook
from ..messages import Message
from ..run import RunResult
from ..sessions import SessionStore
from .context import current_context

__all__ = ["SyncRunnable", "running_loop"]


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


class SyncRunnable(ABC):
    """``run_sync`` for ``Agent``."""

    name: str

    @abstractmethod
    async def run(
        self,
        prompt: str,
        *,
        handler: Handler | None = None,
        history: Sequence[Message] | None = None,
        run_id: str | None = None,
        on_unhandled: OnUnhandled | None = None,
        store: SessionStore | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
    ) -> RunResult:
        """Run the agent to its final answer (see ``Agent.run``)."""

    def run_sync(
        self,
        prompt: str,
        *,
        handler: Handler | None = None,
        history: Sequence[Message] | None = None,
        run_id: str | None = None,
        on_unhandled: OnUnhandled | None = None,
        store: SessionStore | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
    ) -> RunResult:
        """``run`` for synchronous code: starts an event loop, runs to the final answer.

        Takes the arguments of ``Agent.run``. Where an event loop is running already
        (``async def`` code, a Jupyter notebook, a trio program) use
        ``await agent.run(...)`` instead.

        Raises:
            UserError: Called inside a running event loop or inside a tool call.
            AgentRunError, ModelError: The run failed (as ``run``).
        """
        if current_context() is not None:
            raise UserError(
                f"run_sync() of agent {self.name!r} inside a tool call: a nested run must be "
                f"awaited: use `await agent.run(...)` in an async tool"
            )
        loop = running_loop()
        if loop is not None:
            raise UserError(
                f"run_sync() of agent {self.name!r} inside a running {loop} event loop: "
                "use `await agent.run(...)` there instead"
            )
        run = partial(
            self.run,
            prompt,
            handler=handler,
            history=history,
            run_id=run_id,
            on_unhandled=on_unhandled,
            store=store,
            hooks=hooks,
            deps=deps,
        )
        return anyio.run(run)
