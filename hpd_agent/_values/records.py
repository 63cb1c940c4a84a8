"""A request to the human as it is kept: ``RequestRecord`` (what a store holds, what an
answer policy is shown, what a Temporal workflow keeps), made from a request event.

Pure data beside the events (layer 0), so the core can show a policy the same record a
store would (``hpd_agent.backend.AnswerPolicy``); ``hpd_agent.store`` is its public home.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..events import ClarificationRequest, RequestEvent, event_adapter
from ..exceptions import StoreCorruptError
from ..text import permission_question

__all__ = ["ANSWERED_BY", "CHANNEL", "Author", "RequestRecord", "RequestState", "audit_context"]

RequestState = Literal["pending", "answered", "declined", "expired", "cancelled"]
"""Where a stored request stands."""

ANSWERED_BY = "answered_by"
"""The key of a record's ``context`` naming who answered (or declined) it."""

CHANNEL = "channel"
"""The key of a record's ``context`` naming the channel the answer (or decline) came on."""


@dataclass(frozen=True, slots=True)
class Author:
    """Who gave an answer (or a decline), and on which channel.

    Attributes:
        by: The identity: a person (``hpd-agent answer --as``, the OS user), a server
            token's name (``"local"`` on a server without tokens), an MCP or ACP client's name,
            ``grant:<id>``; None when the channel names nobody.
        channel: Where the answer came from: one of ``CHANNELS``, or an adapter's own.
    """

    by: str | None
    channel: str


def audit_context(author: Author, context: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a keeper of requests writes into a request's ``context`` with its answer:
    ``context``, then who answered (``answered_by``, left out when nobody is named) and on
    which ``channel`` (read back as ``RequestRecord.answered_by`` / ``.channel``)."""
    kept = dict(context or {})
    kept.pop(ANSWERED_BY, None)  # only the author names who answered
    if author.by is not None:
        kept[ANSWERED_BY] = author.by
    kept[CHANNEL] = author.channel
    return kept


@dataclass(frozen=True, kw_only=True, slots=True, init=False)
class RequestRecord:
    """One request as a store keeps it.

    Attributes:
        request_id: The request id (derived from the asking call's path, so stable across
            replays); the same name as on the request events and every method taking one.
            ``id`` is its deprecated spelling (read, or given to the constructor), kept
            for one release.
        run_id: The root run that raised it.
        agent_path: Agent names from the root to the asking agent.
        kind: ``"permission"`` or the question kind (``"text"``, ``"choice"``, ...).
        question: The question text (for a permission, a sentence naming the tool).
        payload: The request event as JSON (``event_adapter()``), enough to validate and
            show the request in another process.
        options: Allowed answers, if any.
        status: ``pending``, ``answered``, ``declined`` (the human refused to answer:
            ``Decline()``), ``expired`` or ``cancelled``.
        answer: The accepted answer as JSON-compatible data (None unless answered).
        created_at: When it was raised (seconds since the epoch).
        answered_at: When it left ``pending``.
        expires_at: When it times out, if it has a timeout.
        context: Free-form data about where it was shown or who answered; once it has
            left ``pending`` by an answer or a decline, who gave it and on which channel
            (read as ``answered_by`` and ``channel``), written with the answer, once.
    """

    request_id: str
    run_id: str
    agent_path: tuple[str, ...]
    kind: str
    question: str
    payload: Mapping[str, Any]
    options: tuple[str, ...] | None = None
    status: RequestState = "pending"
    answer: Any = None
    created_at: float = field(default_factory=time.time)
    answered_at: float | None = None
    expires_at: float | None = None
    context: Mapping[str, Any] = field(default_factory=dict[str, Any])

    def __init__(
        self,
        *,
        request_id: str | None = None,
        run_id: str,
        agent_path: tuple[str, ...],
        kind: str,
        question: str,
        payload: Mapping[str, Any],
        options: tuple[str, ...] | None = None,
        status: RequestState = "pending",
        answer: Any = None,
        created_at: float | None = None,
        answered_at: float | None = None,
        expires_at: float | None = None,
        context: Mapping[str, Any] | None = None,
        id: str | None = None,  # the deprecated spelling of request_id
    ) -> None:
        if id is not None:
            warnings.warn(
                "RequestRecord(id=...) is deprecated: use request_id=",
                DeprecationWarning,
                stacklevel=2,
            )
            if request_id is not None and request_id != id:
                raise TypeError("RequestRecord got both request_id and id, and they differ")
            request_id = id
        if request_id is None:
            raise TypeError("RequestRecord needs request_id")
        put = object.__setattr__  # frozen: the generated __init__ sets fields the same way
        put(self, "request_id", request_id)
        put(self, "run_id", run_id)
        put(self, "agent_path", agent_path)
        put(self, "kind", kind)
        put(self, "question", question)
        put(self, "payload", payload)
        put(self, "options", options)
        put(self, "status", status)
        put(self, "answer", answer)
        put(self, "created_at", time.time() if created_at is None else created_at)
        put(self, "answered_at", answered_at)
        put(self, "expires_at", expires_at)
        put(self, "context", {} if context is None else context)

    @property
    def id(self) -> str:
        """Deprecated: use ``request_id`` (removed in the next release)."""
        warnings.warn(
            "RequestRecord.id is deprecated: use request_id", DeprecationWarning, stacklevel=2
        )
        return self.request_id

    @classmethod
    def from_event(
        cls,
        event: RequestEvent,
        *,
        timeout: float | None = None,
        context: Mapping[str, Any] | None = None,
        now: float | None = None,
    ) -> RequestRecord:
        """The pending record of a request event."""
        created = time.time() if now is None else now
        if isinstance(event, ClarificationRequest):
            kind, question, options = event.question_kind, event.question, event.options
        else:
            kind = "permission"
            question = permission_question(event.tool_name, event.arguments)
            options = None
        return cls(
            request_id=event.request_id,
            run_id=event.run_id,
            agent_path=event.agent_path,
            kind=kind,
            question=question,
            payload=event_adapter().dump_python(event, mode="json"),
            options=options,
            created_at=created,
            expires_at=None if timeout is None else created + timeout,
            context=dict(context or {}),
        )

    @property
    def event(self) -> RequestEvent:
        """The request event this record was made from.

        Raises:
            StoreCorruptError: The stored payload is not a request event (names the request).
        """
        try:
            event = event_adapter().validate_python(self.payload)
        except ValueError as e:
            raise StoreCorruptError(
                f"request {self.request_id} (run {self.run_id}): its stored payload is not an event: "
                f"{_first_line(e)}"
            ) from None
        if not isinstance(event, RequestEvent):
            raise StoreCorruptError(
                f"request {self.request_id} (run {self.run_id}): its stored payload is a "
                f"{event.kind!r} event, not a question or permission request"
            )
        return event

    @property
    def answered_by(self) -> str | None:
        """Who answered or declined it (a person's or token's name, ``grant:<id>``), as the
        answer recorded it; None unless answered or declined, or when nobody was named."""
        return self._audit(ANSWERED_BY)

    @property
    def channel(self) -> str | None:
        """The channel its answer or decline came on (``"cli"``, ``"web"``, ``"mcp"``,
        ``"api"``, ...); None unless answered or declined (or when no channel was kept)."""
        return self._audit(CHANNEL)

    def _audit(self, key: str) -> str | None:
        if self.status not in ("answered", "declined"):
            return None  # the context may say where it was shown, not who answered
        value = self.context.get(key)
        return value if isinstance(value, str) else None

    def resolved(
        self,
        status: RequestState,
        answer: Any = None,
        *,
        at: float | None = None,
        author: Author | None = None,
    ) -> RequestRecord:
        """A copy that left ``pending`` with ``status`` (and its ``author``, kept in its
        context, for an answer or a decline)."""
        context = self.context if author is None else audit_context(author, self.context)
        when = time.time() if at is None else at
        return replace(self, status=status, answer=answer, answered_at=when, context=context)


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:299] + "…"
