"""Multi-turn conversations of a server: each conversation's history, turn after turn.

A client that talks with the agent turn by turn (an ACP session, an A2A context) names its
conversation when it starts a run (``RunHost.start(query, conversation=...)``): the messages
of that conversation's completed turns are the run's history, and once the run completes
its messages are the conversation's history. ``Histories`` is where they are kept;
``MemoryHistories`` keeps them in this process (the default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..messages import Message

__all__ = ["Histories", "MemoryHistories"]


class Histories(Protocol):
    """Where a server keeps each conversation's history."""

    async def history(self, conversation: str) -> list[Message]:
        """The messages of ``conversation``'s completed turns (empty for a new one)."""
        ...

    async def keep(self, conversation: str, messages: Sequence[Message]) -> None:
        """``messages`` are ``conversation``'s history now (a turn completed)."""
        ...


class MemoryHistories:
    """``Histories`` in this process's memory (lost with it)."""

    def __init__(self) -> None:
        self._kept: dict[str, list[Message]] = {}

    async def history(self, conversation: str) -> list[Message]:
        """The messages of ``conversation``'s completed turns (empty for a new one)."""
        return list(self._kept.get(conversation, ()))

    async def keep(self, conversation: str, messages: Sequence[Message]) -> None:
        """``messages`` are ``conversation``'s history now (a turn completed)."""
        self._kept[conversation] = list(messages)
