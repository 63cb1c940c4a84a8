"""Sub-agent conversations kept per parent run (``as_tool(conversation="per_run")``), and
the protocol of what keeps them beyond the process (a store's session)."""

from __future__ import annotations

from typing import Protocol

import anyio

from ..messages import Message

__all__ = ["ConversationKeeper", "Conversations"]


class ConversationKeeper(Protocol):
    """Keeps ``per_run`` sub-agent conversations beyond the process (a store's session)."""

    def conversation(self, key: str) -> list[Message] | None:
        """The kept conversation, if any."""
        ...

    async def record_conversation(self, key: str, messages: list[Message]) -> None:
        """Keep a conversation after a finished call."""
        ...


class Conversations:
    """Sub-agent conversations kept per parent run (``as_tool(conversation="per_run")``)."""

    # Every run in flight holds one; most never keep a conversation: the two dicts are
    # made when first used.
    __slots__ = ("_kept", "_locks", "keeper")

    def __init__(self) -> None:
        self._kept: dict[str, list[Message]] | None = None
        self._locks: dict[str, anyio.Lock] | None = None
        self.keeper: ConversationKeeper | None = None
        """Where they outlive the process (the run's store), if anywhere."""

    def lock(self, key: str) -> anyio.Lock:
        """The lock serialising calls that share the conversation ``key``."""
        locks = self._locks
        if locks is None:
            locks = self._locks = {}
        return locks.setdefault(key, anyio.Lock())

    def get(self, key: str) -> list[Message] | None:
        """The conversation so far; after a cold resume it comes back from the keeper."""
        kept = None if self._kept is None else self._kept.get(key)
        if kept is None and self.keeper is not None:
            kept = self.keeper.conversation(key)
        return kept

    async def put(self, key: str, messages: list[Message]) -> None:
        """Keep the conversation after a finished call."""
        if self._kept is None:
            self._kept = {}
        self._kept[key] = messages
        if self.keeper is not None:
            await self.keeper.record_conversation(key, messages)
