"""Client helpers: read a run's pending requests and events, answer a request.

- ``pending(handle)`` is a query: no history is written and no worker holds the run.
- ``respond(handle, request_id, answer)`` is a workflow update whose validator refuses a
  wrong answer before it reaches the history; the refusal comes back as the same error class
  a store's ``respond`` raises. ``respond(handle, request_id, Decline())`` declines it (the
  ``hpd_agent.decline`` update, validated alike).
- ``stream(handle)`` polls the events query from an offset. Polling, not a long-poll
  update: an update is written to the workflow history, so waiting on one per read would add
  history events for every reader and every poll, and a query costs the run nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import pydantic_core
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from ..events import Event, RequestEvent, event_adapter, load_event
from ..exceptions import RequestError, UnknownRequestError
from ..questions import Decline
from ._state import DECLINE_UPDATE, EVENTS_QUERY, PENDING_QUERY, RESPOND_UPDATE
from ._tree import error_class

__all__ = ["PendingRequestInfo", "pending", "respond", "stream"]

_Handle = WorkflowHandle[Any, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingRequestInfo:
    """A request waiting in a run's workflow.

    Attributes:
        request_id: Its id (answer with ``respond(handle, request_id, ...)``).
        run_id: The run (the workflow id).
        agent_path: Agent names from the root to the asking agent.
        kind: ``"permission"`` or the question kind (``"text"``, ``"choice"``, ...).
        question: The question (for a permission, a sentence naming the tool).
        options: Allowed answers, if any.
        created_at: When it was raised (workflow time, seconds since the epoch).
        expires_at: When it times out, if it has a timeout.
        event: The request event itself.
    """

    request_id: str
    run_id: str
    agent_path: tuple[str, ...]
    kind: str
    question: str
    options: tuple[str, ...] | None
    created_at: float
    expires_at: float | None
    event: RequestEvent


def _info(data: dict[str, Any]) -> PendingRequestInfo:
    event = event_adapter().validate_python(data["payload"])
    assert isinstance(event, RequestEvent)
    options = data.get("options")
    return PendingRequestInfo(
        request_id=data["id"],
        run_id=data["run_id"],
        agent_path=tuple(data["agent_path"]),
        kind=data["kind"],
        question=data["question"],
        options=None if options is None else tuple(options),
        created_at=data["created_at"],
        expires_at=data.get("expires_at"),
        event=event,
    )


async def pending(handle: _Handle) -> list[PendingRequestInfo]:
    """The run's requests waiting for an answer, oldest first (a query)."""
    data: list[dict[str, Any]] = await handle.query(PENDING_QUERY, result_type=list)
    return [_info(d) for d in data]


def _refusal(error: WorkflowUpdateFailedError, request_id: str) -> BaseException:
    cause = error.cause
    if isinstance(cause, ApplicationError):
        cls = error_class(RequestError, cause.type)
        if cls is not None:
            return cls(cause.message, request_id=request_id)
    return error


async def respond(handle: _Handle, request_id: str, answer: Any, *, by: str | None = None) -> Any:
    """Answer a pending request of the run (a workflow update); the asker continues.

    Args:
        handle: The run's workflow.
        request_id: The request to answer.
        answer: Text, an option, ``Approve``/``Deny`` or ``True``/``False`` for permissions,
            JSON data for a custom question; ``Decline()`` declines any request (the
            ``hpd_agent.decline`` update: it ends ``declined``).
        by: Who answers: kept with the answer (channel ``"temporal"``), on the resolved
            event and the workflow's request record.

    Returns:
        The answer as accepted (canonical JSON form), or the ``Decline`` as given.

    Raises:
        UnknownRequestError, RequestAlreadyAnsweredError, RequestExpiredError,
        RequestCancelledError, InvalidAnswerError: Refused; nothing changed.
    """
    try:
        if isinstance(answer, Decline):
            await handle.execute_update(DECLINE_UPDATE, args=[request_id, by])  # pyright: ignore[reportUnknownMemberType]
            return answer
        value = pydantic_core.to_jsonable_python(answer)
        return await handle.execute_update(RESPOND_UPDATE, args=[request_id, value, by])  # pyright: ignore[reportUnknownMemberType]
    except WorkflowUpdateFailedError as e:
        raise _refusal(e, request_id) from None
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise UnknownRequestError(
                f"no request {request_id!r}: workflow {handle.id!r} is not running ({e})",
                request_id=request_id,
            ) from None
        raise


async def read_events(handle: _Handle, offset: int = 0) -> tuple[list[Event], int, bool]:
    """The run's events from ``offset`` on, the next offset, and whether the run ended."""
    data: dict[str, Any] = await handle.query(EVENTS_QUERY, offset, result_type=dict)
    events = [load_event(e) for e in data["events"]]
    return events, int(data["next"]), bool(data["finished"])


async def stream(
    handle: _Handle, *, offset: int = 0, poll_interval: float = 0.2
) -> AsyncIterator[Event]:
    """Yield the run's events as they come, from ``offset`` on, until ``RunFinished``.

    Polls the events query every ``poll_interval`` seconds while nothing is new (see the
    module docstring for why polling).
    """
    while True:
        events, offset, finished = await read_events(handle, offset)
        for event in events:
            yield event
            if event.kind == "run_finished":
                return
        if finished:
            return
        if not events:
            await anyio.sleep(poll_interval)
