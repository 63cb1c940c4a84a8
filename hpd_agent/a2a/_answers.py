"""A user message in a task, given as the answer to one of its run's pending requests,
wherever the run is driven.

The server driving the run gives it to the run itself (``Driven``); a server of the same
store that does not drive it (another server holds the run's lease) gives it through the
store (an ``hpd_agent.hosting.StoreRelay``), where the driving server's run wakes and takes
it. Either way the message answers the request its metadata ``request_id`` names, else the
oldest pending one; a ``request_id`` that names no pending question is noted (asked again
with the reason) unless it was a question of the run answered meanwhile (an answer sent
twice counts once); a refused answer is noted with why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from a2a.types import Message

from ..backend import AnswerPolicy
from ..events import RequestEvent
from ..hosting import Activity
from ..store import Store
from ._pending import answer_of, message_metadata, shown
from ._runs import CHANNEL, ServedRun

__all__ = ["Driven", "Target", "answer"]


class Target(Protocol):
    """Where a message's answer goes."""

    notes: dict[str, str]
    """Why an answer was refused, by request id (said when the question is asked again)."""

    async def pending(self) -> dict[str, RequestEvent]:
        """The run's pending requests, by id, oldest first."""
        ...

    async def known(self, request_id: str) -> bool:
        """Whether ``request_id`` was a question of the run (answered meanwhile)."""
        ...

    async def answer_request(
        self,
        request_id: str,
        read: Callable[[], Any],
        *,
        by: str | None,
        channel: str,
        policy: AnswerPolicy | None,
    ) -> str | None:
        """Answer ``request_id`` with what ``read`` gives, as given by ``by`` on ``channel``
        under ``policy``: None, or why not."""
        ...


async def answer(
    target: Target,
    message: Message,
    *,
    by: str | None = None,
    policy: AnswerPolicy | None = None,
) -> str | None:
    """Give ``target`` the message's answer (from the caller named ``by``, under
    ``policy``); the request to ask first (its answer was refused), if any."""
    pending = await target.pending()
    if not pending:
        return None  # it ended or works meanwhile: the report says how
    request = next(iter(pending.values()))
    metadata = message_metadata(message)
    named = metadata.get("request_id")
    if isinstance(named, str) and named:
        if named not in pending:
            if not await target.known(named):
                target.notes[request.request_id] = (
                    f"no question with request_id {shown(named)} is pending in this task"
                )
            return None  # an answer sent twice counts once
        request = pending[named]
    chosen = request
    note = await target.answer_request(
        chosen.request_id,
        lambda: answer_of(chosen, message, metadata),
        by=by,
        channel="a2a",
        policy=policy,
    )
    if note is None:
        return None
    target.notes[chosen.request_id] = note
    return chosen.request_id


class Driven:
    """The message reached the server driving the run: the answer goes to the run (its
    caller holds ``served.lock``).

    Args:
        served: The run.
        store: The server's store (a question answered meanwhile is found there).
        activity: The server's activity log, told of each answer the run takes.
    """

    def __init__(
        self, served: ServedRun, store: Store | None, activity: Activity | None = None
    ) -> None:
        self.served = served
        self.store = store
        self.notes = served.notes
        self.activity = activity

    async def pending(self) -> dict[str, RequestEvent]:
        return {r.request_id: r for r in await self.served.run.settled()}

    async def known(self, request_id: str) -> bool:
        if request_id in self.served.answered:
            return True
        record = None if self.store is None else await self.store.get_request(request_id)
        return record is not None and record.run_id == self.served.run_id

    async def answer_request(
        self,
        request_id: str,
        read: Callable[[], Any],
        *,
        by: str | None,
        channel: str,
        policy: AnswerPolicy | None,
    ) -> str | None:
        activity = self.activity
        if activity is not None:  # before the run says it took it (its line then says how)
            activity.giving(request_id, CHANNEL, by=by, via="a message in its task")
        try:
            note = await self.served.answer_request(
                request_id, read, by=by, channel=channel, policy=policy
            )
        except BaseException:
            if activity is not None:
                activity.withdrawn(request_id)
            raise
        if note is None:
            self.served.answered.add(request_id)
        elif activity is not None:  # refused: the question is asked again
            activity.withdrawn(request_id)
        return note
