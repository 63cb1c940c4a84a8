"""The request backend a store gives its runs: requests kept in the store.

A request is written before its event goes out; an answer written by any process wakes the
waiter; a replayed run that reaches a request it raised in an earlier life finds it under
the same id (still pending, or already resolved: then it returns at once). Requests merged
into an identical open one are journaled as aliases, so a replay merges them again.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

import anyio

from .._values.records import audit_context
from ..backend import Author, Final, Reopened, Settlement
from ..events import RequestEvent
from ._answers import jsonable
from ._base import JournalEntry, RequestRecord
from ._journal import Journal
from ._protocol import Store

if TYPE_CHECKING:
    from ._lease import LeaseKeeper

__all__ = ["StoreRequests", "settlement"]


def settlement(record: RequestRecord) -> Settlement | None:
    """How a stored request ended, as the core's request backends report it, or None while
    it is pending.

    Args:
        record: The request as a store (or another keeper of ``RequestRecord``, such as a
            Temporal workflow) holds it.

    Returns:
        Its status and answer (and who gave it, as recorded), and for a request that
        expired at its deadline how many seconds it waited; None while it is pending.
    """
    if record.status == "pending":
        return None
    waited = None
    if record.status == "expired" and record.expires_at is not None:
        waited = round(record.expires_at - record.created_at, 3)
    author = None
    channel = record.channel
    if channel is not None and record.status in ("answered", "declined"):
        author = Author(record.answered_by, channel)
    return Settlement(status=record.status, answer=record.answer, waited=waited, author=author)


class StoreRequests:
    """A ``RequestBackend`` over a ``Store`` for one run (aliases live in its journal), and
    its ``RequestMemory``: a request found pending from an earlier life keeps its deadline,
    and an expiry warning that went out is journaled (``"warning"``), so none goes out twice.
    """

    durable = True
    __slots__ = ("_reopened", "journal", "keeper", "store")

    def __init__(self, store: Store, journal: Journal, keeper: LeaseKeeper | None = None) -> None:
        self.store = store
        self.journal = journal
        self.keeper = keeper
        """The run's lease: renewed at once after a cancelled request, cancelling the run
        if another holder has it (the keeper, not a bound method: one object less per run)."""
        self._reopened: dict[str, Reopened] | None = None
        """Requests found pending from an earlier life (made when the first is found)."""

    def alias_of(self, request_id: str) -> str | None:
        entry = self.journal.entry(request_id, "alias")
        return None if entry is None else str(entry.value)

    async def record_alias(self, request_id: str, first_id: str) -> None:
        await self.journal.put(JournalEntry(key=request_id, kind="alias", value=first_id))

    async def open(
        self, event: RequestEvent, timeout: float | None
    ) -> tuple[Settlement | None, float | None]:
        mine = RequestRecord.from_event(event, timeout=timeout)
        if event.expires_at is not None:  # the deadline the event shows, to the instant
            mine = dataclasses.replace(mine, expires_at=event.expires_at)
        record = mine
        if self.journal.holding:
            await self.journal.settled()  # what is held goes after what is being written
        held = self.journal.take_held()
        batches = self.journal.holds_for
        if held and batches is not None:
            # Written with the request: the asking tool acts on those responses. Only a
            # store that declares ``JournalBatches`` gets any held back (``Journal``), and
            # its ``add_request`` takes them.
            with anyio.CancelScope(shield=True):
                record = await batches.add_request(record, journal=held)
        else:
            if held:  # not reached: a journal holds entries back only for ``holds_for``
                await self.journal.write_held(held)
            record = await self.store.add_request(record)
        settled = settlement(record)
        if settled is None and record is not mine and record.created_at != mine.created_at:
            # Kept from an earlier life of the run, still pending.
            warned = self.journal.entry(_warning_key(event.request_id), "warning") is not None
            if self._reopened is None:
                self._reopened = {}
            self._reopened[event.request_id] = Reopened(expires_at=record.expires_at, warned=warned)
        if settled is not None or record.expires_at is None:
            return settled, timeout
        # A replay keeps the original deadline: waiting restarts with what was left.
        return None, max(0.0, record.expires_at - time.time())

    def reopened(self, request_id: str) -> Reopened | None:
        return None if self._reopened is None else self._reopened.pop(request_id, None)

    async def record_warning(self, request_id: str) -> None:
        entry = JournalEntry(key=_warning_key(request_id), kind="warning", value=time.time())
        await self.journal.put(entry)

    async def wait(self, request_id: str) -> Settlement:
        record = await self.store.wait_resolved(request_id)
        settled = settlement(record)
        assert settled is not None
        if settled.status == "cancelled" and self.keeper is not None:
            # Maybe by a process that took the run over to cancel it (``cancel_run``):
            # nothing more runs here if so, not even the asker's next model request.
            await self.keeper.guard(now=True)
        return settled

    async def resolve(
        self, request_id: str, status: Final, answer: Any, *, author: Author | None = None
    ) -> None:
        if author is None:
            await self.store.resolve(request_id, status, jsonable(answer))
        else:
            context = audit_context(author)
            await self.store.resolve(request_id, status, jsonable(answer), context=context)

    async def settlement(self, request_id: str) -> tuple[RequestEvent, Settlement | None] | None:
        record = await self.store.get_request(request_id)
        return None if record is None else (record.event, settlement(record))


def _warning_key(request_id: str) -> str:
    return f"{request_id}!warning"
