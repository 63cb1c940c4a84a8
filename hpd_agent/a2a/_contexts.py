"""A2A contexts as conversations: the tasks of one ``contextId`` are turns of one conversation.

A new task in a context runs the agent with the context's history (the prompts and answers
of its completed tasks: ``hpd_agent.hosting.RunHost``'s conversations). Each context is a
conversation of its owner (the caller a2a-sdk files tasks by): one caller never continues
another's context. The conversation's key is a hash of owner and ``contextId``, so the
untrusted id (at most ``MAX_CONTEXT_ID`` characters) is only ever a value, never a name.

Where the histories are kept: in the store's thread tables (``hosting.ThreadHistories``)
when the server has a store that declares them, so they survive a restart; else in memory,
the ``MAX_CONTEXTS`` contexts used last (``hosting.MemoryHistories``): an older one starts afresh.

One task at a time per context: a new task while the context's last one still runs or
waits for input is refused (``busy``: the protocol's ``UnsupportedOperationError``). With thread tables the context's tasks are
kept too (space ``SPACE``: a row per task id, in order), so the rule holds after a restart
and across servers sharing the store, and a run resumed there finds its context.
"""

from __future__ import annotations

import hashlib
import json

from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from ..hosting import Histories, MemoryHistories, ThreadHistories
from ..store import Store, ThreadTables

__all__ = [
    "MAX_CONTEXTS",
    "MAX_CONTEXT_ID",
    "SPACE",
    "Contexts",
    "busy",
    "conversation_of",
]

MAX_CONTEXT_ID = 256
"""The longest ``contextId`` taken, in characters (a UUID, what the SDK makes, has 36)."""

MAX_CONTEXTS = 1000
"""How many contexts a server without a store keeps in memory (those used last)."""

SPACE = "a2a"
"""The thread-table space of the contexts' tasks: a thread per conversation, a row per task."""

_ENDED = ("completed", "failed", "cancelled")


def conversation_of(owner: str, context_id: str) -> str:
    """The conversation of ``context_id`` for ``owner``: a fixed-length key naming both.

    Raises:
        InvalidParamsError: ``context_id`` is longer than ``MAX_CONTEXT_ID``.
    """
    if len(context_id) > MAX_CONTEXT_ID:
        raise InvalidParamsError(
            message=f"contextId has {len(context_id)} characters, more than {MAX_CONTEXT_ID}"
        )
    named = json.dumps([owner, context_id]).encode()
    return "a2a:" + hashlib.sha256(named).hexdigest()


class Contexts:
    """The server's conversations (``histories``) and, with thread tables, each context's
    tasks.

    Args:
        store: The server's store, or None.
    """

    def __init__(self, store: Store | None) -> None:
        self.store = store
        self.tables: ThreadTables | None = None if store is None else store.capabilities().threads
        self.histories: Histories = (
            MemoryHistories(MAX_CONTEXTS) if self.tables is None else ThreadHistories(self.tables)
        )

    async def claim(self, conversation: str, task_id: str) -> None:
        """Record ``task_id`` as the conversation's new task, unless the last one kept
        still runs or waits for input.

        Raises:
            UnsupportedOperationError: The last task kept has not ended (``busy``).
        """
        if self.tables is None or self.store is None:
            return
        thread = await self.tables.read_thread(SPACE, conversation)
        last = None if thread is None or not thread.rows else list(thread.rows)[-1]
        if last is not None and last != task_id:
            record = await self.store.get_run(last)
            if record is not None and record.status not in _ENDED:
                raise busy(last)
        await self.tables.write_thread(SPACE, conversation, rows={task_id: ""})

    async def of_task(self, task_id: str) -> str | None:
        """The conversation the task ``task_id`` is a turn of, if kept."""
        return None if self.tables is None else await self.tables.thread_of(SPACE, task_id)


def busy(task_id: str) -> UnsupportedOperationError:
    """The error refusing a new task while ``task_id`` holds its context (the SDK maps an
    error to its JSON-RPC code by its exact class: no subclass)."""
    return UnsupportedOperationError(
        message=f"this context's task {task_id} is still working or waiting for input: "
        "answer or cancel it (CancelTask) before starting another task in the context"
    )
