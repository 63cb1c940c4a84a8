"""Answering a stored request from anywhere: validation against the stored question.

A process that holds only the store (the ``hpd-agent answer`` command, a web worker) has no
live ``RequestSpec``; it rebuilds one from the stored request event and validates the
answer before the atomic update, so a wrong option is refused here exactly as ``run.respond``
would refuse it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._values.records import audit_context
from ..backend import AnswerPolicy, Author, check_policy
from ..exceptions import InvalidAnswerError
from ..questions import Decline, answer_for
from ._base import RequestRecord, dump_json, refusal
from ._protocol import Store

__all__ = ["CANCEL_REQUEST", "jsonable", "respond", "validate_stored"]


class _CancelRequest:
    __slots__ = ()

    def __repr__(self) -> str:
        return "CANCEL_REQUEST"


CANCEL_REQUEST: Any = _CancelRequest()
"""As a value of ``resume``'s ``answers``: cancel that request instead of answering it (the
asking tool gets the cancelled text), written, like the answers, once the lease is taken."""


def jsonable(value: Any) -> Any:
    """``value`` as JSON-compatible data, as a store keeps it (dataclasses such as
    ``Approve`` become objects; text with lone surrogates is kept escaped).

    Args:
        value: An answer, payload or context.

    Returns:
        The same data as ``json.loads`` of its JSON text.
    """
    return json.loads(dump_json(value))


def validate_stored(record: RequestRecord, answer: Any) -> Any:
    """The answer in canonical, JSON-compatible form, or ``InvalidAnswerError``."""
    try:
        value = answer_for(record.event, answer)
    except (ValueError, TypeError) as e:
        raise InvalidAnswerError(
            f"invalid answer for request {record.request_id}: {e}", request_id=record.request_id
        ) from None
    try:
        return jsonable(value)
    except Exception as e:  # pydantic_core refuses what it can't encode
        raise InvalidAnswerError(
            f"invalid answer for request {record.request_id}: not JSON-serialisable ({e})",
            request_id=record.request_id,
        ) from None


async def respond(
    store: Store,
    request_id: str,
    answer: Any,
    *,
    by: str | None = None,
    channel: str = "api",
    policy: AnswerPolicy | None = None,
    context: Mapping[str, Any] | None = None,
) -> RequestRecord:
    """Answer a stored request from any process; the waiting run wakes up and continues.

    The answer is validated against the stored question, then written with an atomic
    conditional update: of two answers racing, exactly one is accepted. Who answered and
    on which channel are written with it (``RequestRecord.answered_by``, ``.channel``), once.

    Args:
        store: The store holding the request.
        request_id: The request's id.
        answer: Text, an option, ``Approve``/``Deny`` or ``True``/``False`` for permissions;
            ``Decline()`` for any request: the human declines to answer (the request ends
            ``declined``, its asker gets ``QuestionNotAnswered(status="declined")``).
        by: Who answers (a person's or token's name); None: nobody named.
        channel: Where the answer comes from (``"api"``, ``"cli"``, ``"web"``, ...;
            ``hpd_agent.backend.CHANNELS``).
        policy: An ``AnswerPolicy`` asked first, with the stored request, whether ``by``
            may answer it (under a policy ``by`` is required).
        context: Free-form data kept with the answer (``answered_by`` and ``channel`` are
            the author's).

    Returns:
        The answered (or declined) record.

    Raises:
        UnknownRequestError, RequestAlreadyAnsweredError, RequestExpiredError,
        RequestCancelledError, AnswerRefusedError, InvalidAnswerError: Refused; nothing
        changed.
    """
    record = await store.get_request(request_id)
    if record is None or record.status != "pending":
        raise refusal(record, request_id)
    check_policy(policy, by, record)
    kept = audit_context(Author(by, channel), context)
    if isinstance(answer, Decline):
        return await store.resolve(request_id, "declined", context=kept)
    value = validate_stored(record, answer)
    return await store.resolve(request_id, "answered", value, context=kept)
