"""What a durable store gives a root run: the protocol ``hpd_agent.store`` implements.

A store opens a ``RunSession`` for a new run (``open_session``) or for a run it already
holds (``resume_session``). The session brings the run its hooks (the journal, which
replays what an earlier life did), its request backend (requests kept in the store, answers
from any process) and the bookkeeping around them (the run record, ``per_run`` sub-agent
conversations). The core only speaks to these protocols; it never imports a store.

A session may also offer ``grants``, a ``hpd_agent.permissions.GrantBook`` where the run
keeps and finds remembered grants (``Approve(scope="always")``); a session without it keeps
none (a store's session offers the store's, ``StoreCapabilities.grants``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._core.journaling import DURABILITY_MODES, Durability, RunJournal
from .backend import RequestBackend
from .hooks import Hook
from .messages import Message

if TYPE_CHECKING:
    from .coordinator import Coordinator
    from .run import RunResult

__all__ = ["DURABILITY_MODES", "Durability", "RunJournal", "RunSession", "SessionStore"]


class RunSession(Protocol):
    """One root run's life in a store."""

    @property
    def prompt(self) -> str:
        """The run's prompt (as first given)."""
        ...

    @property
    def history(self) -> list[Message] | None:
        """The history the run started from."""
        ...

    @property
    def resumed(self) -> bool:
        """Whether an earlier life of the run left anything to replay."""
        ...

    @property
    def hooks(self) -> Sequence[Hook]:
        """Hooks that must see every call first (after the session's ``journal``, if it
        has one: an optional ``RunJournal`` attribute the core calls directly)."""
        ...

    @property
    def backend(self) -> RequestBackend:
        """Where the run's requests are kept."""
        ...

    def held(self) -> AbstractAsyncContextManager[None]:
        """Held around the whole run: while it is, this process drives the run (a store
        takes a lease on the run, keeps it alive, and releases it at the end)."""
        ...

    async def attach(self, coordinator: Coordinator) -> None:
        """Bring back run-wide state an earlier life built (approvals for the run)."""
        ...

    async def finish(self, result: RunResult) -> None:
        """Record how the run ended."""
        ...

    def conversation(self, key: str) -> list[Message] | None:
        """A ``per_run`` sub-agent's conversation as of its last finished call, if kept."""
        ...

    async def record_conversation(self, key: str, messages: list[Message]) -> None:
        """Keep a ``per_run`` sub-agent's conversation after a finished call."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    """A store that can hold runs (every ``hpd_agent.store`` store is one)."""

    async def open_session(
        self,
        *,
        run_id: str,
        agent_name: str,
        prompt: str,
        history: Sequence[Message] | None,
        agent_ref: str | None = None,
        durability: Durability | None = None,
    ) -> RunSession:
        """Start keeping a new run; refuses a run id it already holds. ``durability`` is
        passed only when the run names one (a store of its own may take no such keyword)."""
        ...

    async def resume_session(
        self,
        run_id: str,
        *,
        agent_name: str,
        answers: Mapping[str, Any] | None = None,
        max_age: float | None = None,
        durability: Durability | None = None,
    ) -> RunSession:
        """Reopen a run it holds; ``answers`` are checked, all of them, before any is written.
        ``durability`` as for ``open_session``."""
        ...
