"""The answering side of a run's coordinator: what ends a request from outside its asker.

``Answering`` is a mixin of ``Coordinator``: ``respond`` (an answer, or ``Decline()``),
``respond_nowait``, ``cancel_request`` and ``cancel_all``. Each checks before it changes
anything, so a refused answer leaves the request as it was. The asking side (raising a
request, waiting for it, mirroring its outcome to a durable backend, replaying it) stays in
``hpd_agent/coordinator.py``. A mixin rather than an object the coordinator holds: a run
that asks nothing pays for no extra object, and an answer for no extra call.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import RequestAlreadyAnsweredError, RequestCancelledError, UserError
from ..questions import Decline
from .requests import PendingRequest, RequestBackend, RequestTable

__all__ = ["Answering"]


class Answering:
    """The methods that answer, decline or cancel a run's open requests (``Coordinator``'s).

    Attributes:
        backend: Where the run's requests are kept.
        requests: The run's open requests.
        cancelling: Set when the run is cancelled on purpose; no answer is accepted then.
    """

    # Set by Coordinator.__init__; declared here so that the methods below are typed.
    backend: RequestBackend
    requests: RequestTable
    cancelling: bool

    async def respond(self, request_id: str, answer: Any) -> Any:
        """Answer an open request; returns the answer as validated.

        ``Decline()`` as the answer ends the request as declined instead (any kind of
        request; the asker gets ``QuestionNotAnswered(status="declined")``); it is returned
        as given.

        Atomic: on any error nothing changes. With a durable backend the answer is written
        there first, and its conditional update decides between racing answers (from this
        process or any other); the loser gets the distinct error.

        Raises:
            UnknownRequestError, RequestAlreadyAnsweredError, RequestExpiredError,
            RequestCancelledError, InvalidAnswerError.
        """
        if not self.backend.durable:
            return self.respond_nowait(request_id, answer)
        pending = self._open_for_answer(request_id)
        value = self._checked(pending, answer)
        declined = isinstance(value, Decline)
        pending.answering += 1
        try:
            # The store decides a race.
            if declined:
                await self.backend.resolve(request_id, "declined", None)
            else:
                await self.backend.resolve(request_id, "answered", value)
        finally:
            pending.answering -= 1
        pending.stored = True
        self._settle(pending, value)
        return value

    def _checked(self, pending: PendingRequest, answer: Any) -> Any:
        """The answer as validated, or ``Decline()`` as given (it fits every request)."""
        if isinstance(answer, Decline):
            return answer
        return self.requests.validate(pending, answer)

    def _settle(self, pending: PendingRequest, value: Any) -> None:
        """End ``pending`` here with a checked answer (or decline), unless it has ended."""
        if pending.status != "pending":
            return
        if isinstance(value, Decline):
            self.requests.finish(pending, "declined", None)
        else:
            self.requests.accept(pending, value)

    def _open_for_answer(self, request_id: str) -> PendingRequest:
        pending = self.requests.check_open(request_id)
        if self.cancelling:
            raise RequestCancelledError(
                f"request {request_id} was cancelled: its run is being cancelled",
                request_id=request_id,
            )
        return pending

    def cancel_all(self) -> None:
        """The run is being cancelled on purpose: from now on no answer is accepted.

        In memory every open request ends cancelled at once, so an answer given after the
        cancel is refused, never half-accepted. With a durable backend each waiter writes
        "cancelled" to the store as it unwinds; an answer the store took first wins there,
        and the run's events say so.
        """
        self.cancelling = True
        if not self.backend.durable:
            for pending in self.requests.open_requests():
                self.requests.finish(pending, "cancelled", None)

    def respond_nowait(self, request_id: str, answer: Any) -> Any:
        """``respond`` without awaiting, for a run whose requests live in memory only (e.g.
        from an event sink, the instant the request is emitted).

        Raises:
            UserError: The run keeps its requests in a store: use ``respond``.
        """
        if self.backend.durable:
            raise UserError("this run keeps its requests in a store: await respond() instead")
        pending = self._open_for_answer(request_id)
        value = self._checked(pending, answer)
        self._settle(pending, value)
        return value

    def cancel_request(self, request_id: str) -> None:
        """End an open request without an answer; its asker sees "cancelled".

        Raises:
            RequestAlreadyAnsweredError: An answer is being written to the store: it came
                first, so it decides (``respond`` returns it, the stream and the store say
                "answered"); or the request has its answer already.
            UnknownRequestError, RequestExpiredError, RequestCancelledError: As ``respond``.
        """
        pending = self.requests.check_open(request_id)
        if pending.answering:
            raise RequestAlreadyAnsweredError(
                f"request {request_id} is being answered: its answer came first",
                request_id=request_id,
            )
        self.requests.finish(pending, "cancelled", None)
