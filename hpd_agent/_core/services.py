"""``RunServices``: what a root run keeps open for its toolsets (``tools.RunResources``).

A toolset's resources (an MCP client session, its subprocess) are entered from whatever
task first needs them (a nested agent's call inside a parallel batch) but must outlive that
task and be closed when the root run ends. Context managers holding task groups or cancel
scopes must be exited in the task that entered them, so each is hosted by a task of its own
in a task group the root run opens around its body; closing sets an event every host waits
on. The root run opens one only when its agent tree has a toolset (``Blueprint.hosts``):
every other run pays nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.abc

__all__ = ["RunServices"]

_T = TypeVar("_T")

_log = logging.getLogger("hpd_agent")


class _Once:
    """One value computed at most once at a time; a failed attempt lets the next caller try."""

    __slots__ = ("done", "failed", "owner", "value")

    def __init__(self, owner: object) -> None:
        self.owner = owner  # keeps the key object alive while its id is the key
        self.done = anyio.Event()
        self.failed = False
        self.value: Any = None


class RunServices:
    """The resources of one root run (or of one agent call, when nothing above hosts them).

    Use as ``async with RunServices(run_id) as services:`` around what uses them; leaving
    the block closes every resource entered meanwhile (concurrently, each in its own task).
    """

    __slots__ = ("_closing", "_group", "_once", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._group: anyio.abc.TaskGroup | None = None
        self._closing = anyio.Event()
        self._once: dict[int, _Once] = {}

    async def __aenter__(self) -> RunServices:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._closing.set()
        group, self._group = self._group, None
        assert group is not None
        return await group.__aexit__(exc_type, exc, tb)

    async def enter(self, resource: AbstractAsyncContextManager[_T]) -> _T:
        """Enter ``resource`` in a task of its own until the run ends; see ``RunResources``."""
        group = self._group
        if group is None or self._closing.is_set():
            raise RuntimeError("the run's resources are closed: it has ended")
        closing = self._closing

        async def host(*, task_status: anyio.abc.TaskStatus[_T]) -> None:
            started = False
            try:
                async with resource as value:
                    task_status.started(value)
                    started = True
                    await closing.wait()
            except Exception:
                if not started:
                    raise  # start() raises it to the caller
                # Broken on its own after it was handed out: its users see it fail; the
                # run goes on (an error here would cancel the whole run).
                _log.warning("a run resource failed while it was open", exc_info=True)

        value: _T = await group.start(host)
        return value

    async def once(self, key: object, compute: Callable[[], Awaitable[_T]]) -> _T:
        """``compute()``'s value for ``key`` (by identity), computed once for the run.

        Concurrent callers wait for the first; if it fails (or is cancelled) its error is
        its own, and the next caller computes again.
        """
        while True:
            entry = self._once.get(id(key))
            if entry is None:
                entry = self._once[id(key)] = _Once(key)
                try:
                    entry.value = await compute()
                except BaseException:
                    entry.failed = True
                    del self._once[id(key)]
                    raise
                finally:
                    entry.done.set()
                return entry.value
            await entry.done.wait()
            if not entry.failed:
                return entry.value
