"""A run's state inside its workflow: the requests to the human and the events so far.

``WorkflowRequests`` is the run's ``RequestBackend``: a question or permission request from
any depth is kept here as a ``RequestRecord`` (the store's record type, so clients see the
same fields as ``hpd-agent pending --db``), and the waiting asker wakes when a workflow
update answers it. The state is rebuilt by replay like any workflow state: no worker holds
it while the run waits.

The handlers registered on the workflow:

- query ``hpd_agent.pending`` → the pending requests (``RequestRecord`` as JSON data);
- query ``hpd_agent.events(offset, limit)`` → ``{"events": [JSON, ...], "next": n,
  "finished": b}`` (at most ``limit`` events, 1000 by default);
- update ``hpd_agent.respond(request_id, answer[, by])`` → the answer as accepted (``by``,
  who answers, is kept with it, channel ``"temporal"``). Its validator
  applies the store's checks (unknown id, already answered or declined, expired, cancelled,
  invalid answer): a refused answer is rejected before it reaches the workflow history, so
  nothing changes, and the caller gets the same error class (see ``_client``);
- update ``hpd_agent.decline(request_id[, by])``: the human declines to answer (``Decline()``);
  the request ends ``declined``, validated the same way.
"""

from __future__ import annotations

from typing import Any

import anyio
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from ..backend import Author, Final, Settlement
from ..events import Event, RequestEvent, dump_event
from ..exceptions import RequestError
from ..questions import validate_answer
from ..store import RequestRecord, jsonable, refusal, settlement

__all__ = [
    "DECLINE_UPDATE",
    "EVENTS_QUERY",
    "PENDING_QUERY",
    "RESPOND_UPDATE",
    "RunState",
    "WorkflowRequests",
]

PENDING_QUERY = "hpd_agent.pending"
EVENTS_QUERY = "hpd_agent.events"
RESPOND_UPDATE = "hpd_agent.respond"
DECLINE_UPDATE = "hpd_agent.decline"
_PAGE = 1000


def _failure(error: RequestError) -> ApplicationError:
    """A refusal as the failure an update caller receives (its class name is the type)."""
    return ApplicationError(
        str(error), error.request_id, type=type(error).__name__, non_retryable=True
    )


class WorkflowRequests:
    """The ``RequestBackend`` of a run in a workflow (see the module docstring)."""

    durable = True

    def __init__(self) -> None:
        self.records: dict[str, RequestRecord] = {}
        self._done: dict[str, anyio.Event] = {}
        self._aliases: dict[str, str] = {}

    # -- RequestBackend --------------------------------------------------------------------
    def alias_of(self, request_id: str) -> str | None:
        return self._aliases.get(request_id)

    async def record_alias(self, request_id: str, first_id: str) -> None:
        self._aliases[request_id] = first_id

    async def open(
        self, event: RequestEvent, timeout: float | None
    ) -> tuple[Settlement | None, float | None]:
        record = self.records.get(event.request_id)
        if record is not None:
            return settlement(record), timeout
        now = workflow.now().timestamp()
        self.records[event.request_id] = RequestRecord.from_event(event, timeout=timeout, now=now)
        self._done[event.request_id] = anyio.Event()
        return None, timeout

    async def wait(self, request_id: str) -> Settlement:
        await self._done[request_id].wait()
        settled = settlement(self.records[request_id])
        assert settled is not None
        return settled

    async def resolve(
        self, request_id: str, status: Final, answer: Any, *, author: Author | None = None
    ) -> None:
        record = self.records.get(request_id)
        if record is None or record.status != "pending":
            raise refusal(record, request_id)
        stored = jsonable(answer) if status == "answered" else None
        now = workflow.now().timestamp()
        self.records[request_id] = record.resolved(status, stored, at=now, author=author)
        self._done[request_id].set()

    async def settlement(self, request_id: str) -> tuple[RequestEvent, Settlement | None] | None:
        record = self.records.get(request_id)
        return None if record is None else (record.event, settlement(record))

    # -- the updates ------------------------------------------------------------------------
    def check(self, request_id: str, answer: Any) -> Any:
        """The answer as JSON data in canonical form, or the refusal (nothing changes)."""
        value = validate_answer(self.open_record(request_id).event, answer)
        return jsonable(value)

    def open_record(self, request_id: str) -> RequestRecord:
        """The pending request ``request_id``, or the refusal (nothing changes)."""
        record = self.records.get(request_id)
        if record is None or record.status != "pending":
            raise refusal(record, request_id)
        return record

    def pending(self) -> list[dict[str, Any]]:
        """The pending requests as JSON data, oldest first."""
        return [_record_data(r) for r in self.records.values() if r.status == "pending"]


def _record_data(record: RequestRecord) -> dict[str, Any]:
    return {
        "id": record.request_id,
        "run_id": record.run_id,
        "agent_path": list(record.agent_path),
        "kind": record.kind,
        "question": record.question,
        "options": None if record.options is None else list(record.options),
        "payload": dict(record.payload),
        "created_at": record.created_at,
        "expires_at": record.expires_at,
    }


class RunState:
    """Everything a client can read or change of a run in its workflow."""

    def __init__(self) -> None:
        self.requests = WorkflowRequests()
        self.events: list[str] = []
        self.finished = False

    def add(self, event: Event) -> None:
        """Keep an event of the run (as the JSON ``dump_event`` writes)."""
        self.events.append(dump_event(event).decode())

    def install(self) -> None:
        """Register the queries and the update on the running workflow."""
        workflow.set_query_handler(PENDING_QUERY, self.requests.pending)  # pyright: ignore[reportUnknownMemberType]
        workflow.set_query_handler(EVENTS_QUERY, self.read)  # pyright: ignore[reportUnknownMemberType]
        workflow.set_update_handler(RESPOND_UPDATE, self.respond, validator=self.validate)  # pyright: ignore[reportUnknownMemberType]
        workflow.set_update_handler(  # pyright: ignore[reportUnknownMemberType]
            DECLINE_UPDATE, self.decline, validator=self.validate_decline
        )

    def read(self, offset: int = 0, limit: int = _PAGE) -> dict[str, Any]:
        """Up to ``limit`` events from ``offset`` on, the next offset, and whether the run
        ended with nothing left to read (pages keep a query answer small)."""
        page = self.events[offset : offset + max(1, limit)]
        after = offset + len(page)
        return {
            "events": page,
            "next": after,
            "finished": self.finished and after >= len(self.events),
        }

    def validate(self, request_id: str, answer: Any, by: str | None = None) -> None:
        """The update's validator: refuses before anything is written to the history."""
        try:
            self.requests.check(request_id, answer)
        except RequestError as e:
            raise _failure(e) from None

    async def respond(self, request_id: str, answer: Any, by: str | None = None) -> Any:
        """The update: answer the request (as given by ``by``); the waiting asker continues."""
        try:
            value = self.requests.check(request_id, answer)
            await self.requests.resolve(request_id, "answered", value, author=_author(by))
        except RequestError as e:
            # Validated, but the request ended in the same workflow task (a timer fired).
            raise _failure(e) from None
        return value

    def validate_decline(self, request_id: str, by: str | None = None) -> None:
        """The decline update's validator: only a pending request can be declined."""
        try:
            self.requests.open_record(request_id)
        except RequestError as e:
            raise _failure(e) from None

    async def decline(self, request_id: str, by: str | None = None) -> None:
        """The decline update: the request ends declined (by ``by``); its asker is told so."""
        try:
            self.requests.open_record(request_id)
            await self.requests.resolve(request_id, "declined", None, author=_author(by))
        except RequestError as e:
            raise _failure(e) from None


def _author(by: str | None) -> Author:
    """The author of an answer given through a workflow update (channel ``"temporal"``)."""
    return Author(by if isinstance(by, str) else None, "temporal")
