"""Multi-turn conversations of a server: each conversation's history, turn after turn.

A client that talks with the agent turn by turn (an ACP session, an A2A context) names its
conversation when it starts a run (``RunHost.start(query, conversation=...)``): the messages
of that conversation's completed turns are the run's history, and once the run completes
its messages are the conversation's history. ``Histories`` is where they are kept;
``MemoryHistories`` keeps them in this process (the default), ``ThreadHistories`` in a
store's thread tables (a store that declares them: its conversations survive a restart).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Protocol

from ..messages import Message, message_adapter

__all__ = ["SPACE", "Histories", "MemoryHistories", "ThreadHistories"]

SPACE = "conversations"
"""The thread-table space ``ThreadHistories`` keeps conversations in: a thread per
conversation, an item per completed turn (the JSON list of the messages it added), a row
``messages`` counting them."""


class Histories(Protocol):
    """Where a server keeps each conversation's history."""

    async def history(self, conversation: str) -> list[Message]:
        """The messages of ``conversation``'s completed turns (empty for a new one)."""
        ...

    async def keep(self, conversation: str, messages: Sequence[Message]) -> None:
        """``messages`` are ``conversation``'s history now (a turn completed)."""
        ...


class MemoryHistories:
    """``Histories`` in this process's memory (lost with it), for the ``limit``
    conversations used last: keeping one past the limit forgets the one unused longest (its
    next turn starts afresh).

    Args:
        limit: How many conversations are kept (None: all of them).
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self._kept: OrderedDict[str, list[Message]] = OrderedDict()

    async def history(self, conversation: str) -> list[Message]:
        """The messages of ``conversation``'s completed turns (empty for a new or forgotten
        one)."""
        kept = self._kept.get(conversation)
        if kept is None:
            return []
        self._kept.move_to_end(conversation)
        return list(kept)

    async def keep(self, conversation: str, messages: Sequence[Message]) -> None:
        """``messages`` are ``conversation``'s history now (the oldest one beyond the limit
        forgotten)."""
        self._kept[conversation] = list(messages)
        self._kept.move_to_end(conversation)
        while self.limit is not None and len(self._kept) > self.limit:
            self._kept.popitem(last=False)


class _Thread(Protocol):
    @property
    def rows(self) -> dict[str, str]: ...
    @property
    def items(self) -> list[str]: ...


class _Tables(Protocol):
    """What ``ThreadHistories`` needs of a store's thread tables (``ThreadTables``)."""

    async def write_thread(
        self,
        space: str,
        thread_id: str,
        *,
        rows: Mapping[str, str] | None = None,
        items: Sequence[str] = (),
        first: int = 0,
    ) -> None: ...

    async def read_thread(self, space: str, thread_id: str) -> _Thread | None: ...


class ThreadHistories:
    """``Histories`` in a store's thread tables (space ``SPACE``): one item per completed
    turn, the messages it added to the conversation. A turn's messages extend the history
    it started from (``RunResult.messages``), so only what it added is written.

    Args:
        tables: The store's thread tables (its ``capabilities().threads``).
    """

    def __init__(self, tables: _Tables) -> None:
        self.tables = tables

    async def history(self, conversation: str) -> list[Message]:
        """The messages of ``conversation``'s completed turns (empty for a new one)."""
        thread = await self.tables.read_thread(SPACE, conversation)
        messages: list[Message] = []
        for item in () if thread is None else thread.items:
            messages += message_adapter().validate_json(item)
        return messages

    async def keep(self, conversation: str, messages: Sequence[Message]) -> None:
        """Add the messages of the turn that completed (those past the kept history)."""
        thread = await self.tables.read_thread(SPACE, conversation)
        turns = 0 if thread is None else len(thread.items)
        kept = 0 if thread is None else int(thread.rows.get("messages", "0"))
        added = list(messages[kept:])
        if added:
            await self.tables.write_thread(
                SPACE,
                conversation,
                rows={"messages": str(len(messages))},
                items=[message_adapter().dump_json(added).decode()],
                first=turns,
            )
