"""``KeptTasks``: the A2A server's task store, kept with the run store when there is one.

a2a-sdk keeps each task (its status, history, artifacts) in a ``TaskStore``; in memory
only, a restarted server would not know the task a user message answers. With a run store,
every task saved is also written there (a journal entry under a run id no run takes:
``hpd_agent.a2a.task:<task id>``), and a task not in memory is read back from it, so a
restarted server shows the pending question (``GetTask``) and takes its answer.

Each task has an owner: the SDK's in-memory store files tasks by the caller's user name
(``resolve_user_scope``), and the kept entry records it beside the task
(``{"owner": ..., "task": ...}``); a task is read back only for its owner. With the one
shared bearer token every caller is the same (unnamed) owner: one tenant, whose
``ListTasks`` shows every task. Named callers (an authentication middleware setting the
request's user) get their own tasks, here and after a restart. An entry written before
owners were kept (the task alone) belongs to the unnamed owner.

Several servers on one store keep their tasks there: a task is read from the store first
(another server may have moved it on: answered its question, completed or canceled it), its
copy in memory refreshed from it.

Every ``TASK_STATE_CANCELED`` the SDK records goes through here, including the one it
writes without calling the executor (a task waiting for input that no request holds, or one
whose execution ran on another server): the run is cancelled then, wherever it is driven,
so it goes no further.

A store that fails is logged and answered as ``Internal server error`` (``_unexpected``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task, TaskState
from google.protobuf.json_format import MessageToDict, ParseDict

from ..store import JournalEntry, Store
from ._unexpected import unexpected

__all__ = ["TASK_RUN_PREFIX", "KeptTasks"]

TASK_RUN_PREFIX = "hpd_agent.a2a.task:"
"""The journal's run id a task is kept under is this, then the task id."""
_ENTRY = "task"


class KeptTasks(InMemoryTaskStore):
    """Tasks in memory, and in ``store`` once the server has one (``use``).

    Args:
        on_canceled: Awaited with a task's id when the SDK records it as canceled.
    """

    def __init__(self, on_canceled: Callable[[str], Awaitable[None]]) -> None:
        super().__init__()
        self._kept_in: Store | None = None
        self._on_canceled = on_canceled

    def use(self, store: Store | None) -> None:
        """Keep tasks in ``store`` from now on (None: in memory only)."""
        self._kept_in = store

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Save ``task`` (in memory, then in the run store)."""
        await unexpected(lambda: self._save(task, context), "save a task")

    async def _save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        if self._kept_in is not None:
            kept = {"owner": resolve_user_scope(context), "task": MessageToDict(task)}
            entry = JournalEntry(key=_ENTRY, kind="step", value=kept)
            await self._kept_in.journal_put(TASK_RUN_PREFIX + task.id, entry)
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            await self._on_canceled(task.id)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task as the run store has it (the memory's copy refreshed from it); the
        memory's without a store."""
        return await unexpected(lambda: self._get(task_id, context), "read a task")

    async def _get(self, task_id: str, context: ServerCallContext) -> Task | None:
        if self._kept_in is None:
            return await super().get(task_id, context)
        entry = (await self._kept_in.journal(TASK_RUN_PREFIX + task_id)).get(_ENTRY)
        kept = _owned(None if entry is None else entry.value, resolve_user_scope(context))
        if kept is None:
            return None
        task = ParseDict(kept, Task(), ignore_unknown_fields=True)
        if task.id != task_id:
            return None
        await super().save(task, context)
        return await super().get(task_id, context)


def _owned(value: Any, owner: str) -> dict[str, Any] | None:
    """The kept task (JSON) if ``owner`` owns it, else None."""
    if not isinstance(value, dict):
        return None
    kept = cast(dict[str, Any], value)
    if "task" not in kept:  # kept before owners were: the task alone, the unnamed owner's
        return kept if owner == "" else None
    task = kept["task"]
    if kept.get("owner", "") != owner or not isinstance(task, dict):
        return None
    return cast(dict[str, Any], task)
