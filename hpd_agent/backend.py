"""Where a run's requests are kept: the ``RequestBackend`` protocol a store implements.

The coordinator calls its run's backend around every request to the human: ``open``
before the request's event goes out (a durable backend writes it first), ``wait`` while
the asker waits for an answer from outside (another process, a later resume), ``resolve``
when it ends. The default keeps nothing (the run's memory is enough); ``hpd_agent.store``
supplies a durable one through a run's session (``hpd_agent.sessions``), and a workflow
engine may bring its own. A durable backend may also be a ``RequestMemory``: what it
remembers of a request across the lives of its run (a store's does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from .events import RequestEvent

__all__ = ["Final", "Reopened", "RequestBackend", "RequestMemory", "Settlement"]

Final = Literal["answered", "declined", "expired", "cancelled"]
"""How a kept request ended, as a backend records it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Settlement:
    """How a request ended outside this coroutine (a store: an earlier life, another process).

    Attributes:
        status: How it ended.
        answer: The stored answer (JSON data) when answered.
        waited: For an expired request, the seconds it had been given, when known.
    """

    status: Final
    answer: Any = None
    waited: float | None = None


class RequestBackend(Protocol):
    """Where a run's requests live; the coordinator calls it around every request.

    ``LocalRequests`` (the default) keeps nothing; ``hpd_agent.store`` supplies a durable one.
    """

    @property
    def durable(self) -> bool:
        """Whether others (another process, a later resume) can answer requests kept here."""
        ...

    def alias_of(self, request_id: str) -> str | None:
        """For a request that an earlier life merged into an identical one, that one's id."""
        ...

    async def record_alias(self, request_id: str, first_id: str) -> None:
        """Remember that ``request_id`` was merged into the identical ``first_id``."""
        ...

    async def open(
        self, event: RequestEvent, timeout: float | None
    ) -> tuple[Settlement | None, float | None]:
        """Keep a request before its event goes out.

        Returns:
            How it already ended (an earlier life raised it) or None, and the timeout left.
        """
        ...

    async def wait(self, request_id: str) -> Settlement:
        """Wait until the request is resolved from outside (only called when durable)."""
        ...

    async def resolve(self, request_id: str, status: Final, answer: Any) -> None:
        """Write how a request ended; raises ``RequestError`` if it had already ended."""
        ...

    async def settlement(self, request_id: str) -> tuple[RequestEvent, Settlement | None] | None:
        """A kept request's event and how it ended (None while pending); None if unknown."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Reopened:
    """A request ``open`` found kept, still pending, from an earlier life of its run.

    Attributes:
        expires_at: The deadline that life gave it (seconds since the epoch; None: none).
        warned: Whether its expiry warning went out then (``RequestMemory.record_warning``).
    """

    expires_at: float | None
    warned: bool = False


@runtime_checkable
class RequestMemory(Protocol):
    """Optional, beside ``RequestBackend``: what a durable backend remembers of a request
    across the lives of its run. The coordinator uses it when its backend has it: a request
    an earlier life opened is announced to hooks as ``replayed`` (not new: nobody is
    notified twice), keeps its deadline, and its expiry warning goes out once.
    """

    def reopened(self, request_id: str) -> Reopened | None:
        """Asked once, right after ``open`` returned no settlement: the request as an earlier
        life of the run kept it, or None when ``open`` just created it."""
        ...

    async def record_warning(self, request_id: str) -> None:
        """Remember that the request's expiry warning goes out (written before it does)."""
        ...
