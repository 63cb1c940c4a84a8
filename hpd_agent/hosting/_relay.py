"""Answers for a run another process of the store drives, given through the store:
``StoreRelay``.

Several servers on one store (MCP, A2A): a run is driven by the server that holds its lease
(``HostedRun.elsewhere`` on any other), and a client's request may reach another. That one
answers it all the same: it gives the answers to the run through the store
(``hpd_agent.store.respond``, checked against the stored question as ``run.respond`` would;
the driving server's run wakes and takes them), then follows the run in the store until it
moves on (``RunHost.moved_on``) and tells the client what it found.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Generic

from ..backend import AnswerPolicy
from ..events import RequestEvent
from ..exceptions import RequestError, UnknownRunError
from ..store import RequestRecord, RunRecord, respond
from ._hosted import why_refused
from ._runs import H, RunHost

__all__ = ["StoreRelay"]


class StoreRelay(Generic[H]):
    """One client request's answers for ``run_id``, which another process drives.

    Args:
        host: The server's runs (their store is the one the driving process shares).
        run_id: The run.

    Attributes:
        notes: Why an answer was refused, by request id (say it when asking again).
        given: The requests this relay answered, declined or ended.

    Raises:
        UnknownRunError: The server has no store (a run is driven elsewhere only through
            one).
    """

    def __init__(self, host: RunHost[H], run_id: str) -> None:
        store = host.store
        if store is None:
            raise UnknownRunError(f"no run {run_id!r} of agent {host.agent.name!r} here")
        self.host = host
        self.store = store
        self.run_id = run_id
        self.notes: dict[str, str] = {}
        self.given: set[str] = set()
        self._seen: set[str] | None = None

    async def pending(self) -> dict[str, RequestEvent]:
        """The run's pending requests in the store, by id, oldest first (the first look
        is what the client may have been asked: see ``follow``)."""
        records = await self.store.list_requests(run_id=self.run_id)
        found = {r.request_id: r.event for r in records}
        if self._seen is None:
            self._seen = set(found)
        return found

    async def known(self, request_id: str) -> bool:
        """Whether ``request_id`` was a question of the run (answered meanwhile, maybe by
        another client or process)."""
        record = await self.store.get_request(request_id)
        return record is not None and record.run_id == self.run_id

    async def answer_request(
        self,
        request_id: str,
        read: Callable[[], Any],
        *,
        by: str | None = None,
        channel: str = "api",
        policy: AnswerPolicy | None = None,
    ) -> str | None:
        """Answer ``request_id`` with what ``read`` gives (the protocol's reply read as the
        answer), through the store, as given by ``by`` on ``channel`` under ``policy``: None
        when it was taken (or the request ended meanwhile), else why not (``why_refused``)."""

        async def through_store() -> None:
            await respond(self.store, request_id, read(), by=by, channel=channel, policy=policy)

        note = await why_refused(request_id, through_store)
        if note is None:
            self.given.add(request_id)
        return note

    async def cancel_request(self, request_id: str) -> None:
        """End ``request_id`` unanswered, cancelled in the store (its asker is told nobody
        answered); the run goes on. One that ended meanwhile is left as it is."""
        with contextlib.suppress(RequestError):  # it ended meanwhile
            await self.store.resolve(request_id, "cancelled")
        self.given.add(request_id)

    async def follow(self, wait: float) -> H | RunRecord | list[RequestRecord]:
        """The run once it has moved on (``RunHost.moved_on``): it ended, or it asks a
        request the client was not asked (not pending at the first look, nor given here).

        It is followed for at most ``wait`` seconds when an answer was taken and none
        refused, or when the run waits for nothing (it works); otherwise what it waits
        for is returned at once (a refused answer's question is asked again).

        Returns:
            The run's record once it has ended; its pending requests (maybe none, after
            ``wait``); the run, live here, if it was resumed here (the process driving it
            died: its lease lapsed).

        Raises:
            UnknownRunError: The store has no such run of this agent.
        """
        known = (self._seen or set()) | self.given
        if not self.given or self.notes:
            found = await self.host.moved_on(self.run_id, known, 0.0)
            if not isinstance(found, list) or found:
                return found
        return await self.host.moved_on(self.run_id, known, wait)
