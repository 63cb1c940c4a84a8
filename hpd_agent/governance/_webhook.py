"""``Webhook``: a hook that POSTs a signed JSON notification when a request to the human
opens, is about to expire and ends, delivered by the process's worker (``_deliveries``)."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import math
import re
from collections.abc import Iterable
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from ..backend import Author
from ..events import ClarificationRequest, RequestEvent, RequestStatus
from ..exceptions import UserError
from ..hooks import Hook
from ..text import bounded, permission_question
from ..version import __version__
from ._deliveries import Delivery, deliveries, origin

__all__ = ["SIGNATURE_HEADER", "Notification", "Webhook", "delivery_id"]

Notification = Literal["opened", "expiring", "resolved"]
"""What a notification is about: a request opened, is about to expire, or ended."""

SIGNATURE_HEADER = "X-Hpd-Signature"
"""``sha256=<hex>``: the HMAC-SHA256 of the body under the webhook's secret."""

_NOTIFICATIONS: tuple[str, ...] = get_args(Notification)
_UNSAFE = re.compile(r"[\x00-\x20\x7f]")


def delivery_id(request_id: str, notification: str) -> str:
    """The id of a request's notification: the same wherever and however often it is made
    (a retry, a resumed run, another process), so a receiver deduplicates by it."""
    digest = hashlib.sha256(f"{request_id}\x00{notification}".encode()).hexdigest()
    return "dlv_" + digest[:32]


def _checked_url(url: object) -> str:
    bad = UserError(f"a webhook URL is http(s)://host/... text, got {bounded(repr(url), 200)}")
    if not isinstance(url, str) or _UNSAFE.search(url):
        raise bad
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018  # a bad port raises here, not at the first delivery
    except ValueError:
        raise bad from None
    if parts.scheme not in ("http", "https") or not host:
        raise bad
    return url


class Webhook(Hook):
    """POSTs a JSON notification to ``url`` when a request opens, is about to expire
    (``warn_before``) and ends; install it like any hook (``Agent.run(hooks=[...])``,
    ``hooks.install``, ``hpd-agent serve --hook MODULE:ATTR``).

    The run only hands the notification to the process's delivery worker (a thread of its
    own): a receiver that is down or slow never slows or fails it. A failed try is retried
    with backoff and logged (logger ``hpd_agent.governance``; the schedule is in
    ``hpd_agent.governance._deliveries``). The body is ``payload(...)``; with a ``secret``
    it is signed (``X-Hpd-Signature: sha256=<hex HMAC-SHA256 of the body>``).
    ``delivery_id`` is the same for a request's notification on every try and in every
    process, and a resumed durable run does not notify again of what it notified before.

    Args:
        url: The receiver: ``https://...`` (``http://`` too: use it only within a trusted
            network, the body tells the question).
        secret: Signs every body (text or bytes); None: unsigned.
        events: What to notify: any of ``"opened"``, ``"expiring"``, ``"resolved"``.
        timeout: Seconds one try may take.

    Raises:
        UserError: A URL, event name, secret or timeout that cannot work.
    """

    def __init__(
        self,
        url: str,
        *,
        secret: str | bytes | None = None,
        events: Iterable[str] = _NOTIFICATIONS,
        timeout: float = 5.0,
    ) -> None:
        self.url = _checked_url(url)
        self._origin = origin(self.url)
        if isinstance(events, str):
            events = (events,)
        self.events = frozenset(events)
        unknown = sorted(self.events - set(_NOTIFICATIONS))
        if unknown or not self.events:
            choices = ", ".join(map(repr, _NOTIFICATIONS))
            raise UserError(f"webhook events are some of {choices}, got {sorted(self.events)!r}")
        if isinstance(secret, str):
            secret = secret.encode()
        if secret is not None and not secret:
            raise UserError("a webhook secret must not be empty (None: unsigned)")
        self._secret = secret
        number = isinstance(timeout, int | float) and not isinstance(timeout, bool)  # pyright: ignore[reportUnnecessaryIsInstance]
        if not number or not 0 < timeout < math.inf:
            raise UserError(f"a webhook timeout is a positive number of seconds, got {timeout!r}")
        self.timeout = float(timeout)

    def __repr__(self) -> str:
        # The URL's path may be its secret (a Slack webhook's): only where it goes.
        return f"Webhook({self._origin!r}, events={sorted(self.events)!r})"

    # -- the hook --------------------------------------------------------------------------
    def request_opened(self, event: RequestEvent) -> None:
        """Notify ``opened`` (not for a request a resumed run announces again)."""
        if "opened" in self.events and not event.replayed:
            self._hand_over("opened", event, None)

    def request_expiring(self, event: RequestEvent) -> None:
        """Notify ``expiring``."""
        if "expiring" in self.events:
            self._hand_over("expiring", event, None)

    def request_resolved(
        self,
        event: RequestEvent,
        status: RequestStatus,
        answer: Any,
        author: Author | None = None,
    ) -> None:
        """Notify ``resolved`` (with how: ``status``, and who answered on which channel)."""
        if "resolved" in self.events:
            self._hand_over("resolved", event, status, author)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every notification of this process was delivered or given up (at
        most ``timeout`` seconds); True if none is left. It blocks: from async code, run
        it in a thread (``await anyio.to_thread.run_sync(webhook.flush)``)."""
        return deliveries().flush(timeout)

    # -- the notification -------------------------------------------------------------------
    def payload(
        self,
        notification: Notification,
        event: RequestEvent,
        status: RequestStatus | None,
        author: Author | None = None,
    ) -> dict[str, Any]:
        """The JSON object sent (override it to speak another receiver's format).

        ``{delivery_id, event, request_id, agent_path, question_kind, question, tool_name,
        expires_at, answered_by, channel, status}``: ``question_kind`` is
        ``"permission"`` for a permission (``question`` then names the tool and its
        arguments), ``expires_at`` seconds since the epoch (None without a timeout),
        ``answered_by`` / ``channel`` who answered and where (a resolved request's
        ``author``: None when it ended unanswered or nobody was named), ``status`` how it
        ended (``resolved`` only).
        """
        if isinstance(event, ClarificationRequest):
            kind, question, tool = event.question_kind, event.question, None
        else:
            kind, tool = "permission", event.tool_name
            question = permission_question(event.tool_name, event.arguments)
        return {
            "delivery_id": delivery_id(event.request_id, notification),
            "event": notification,
            "request_id": event.request_id,
            "agent_path": list(event.agent_path),
            "question_kind": kind,
            "question": question,
            "tool_name": tool,
            "expires_at": event.expires_at,
            "answered_by": None if author is None else author.by,
            "channel": None if author is None else author.channel,
            "status": status,
        }

    def _hand_over(
        self,
        notification: Notification,
        event: RequestEvent,
        status: RequestStatus | None,
        author: Author | None = None,
    ) -> None:
        # Built on the worker's thread: the run only queues this.
        prepare = functools.partial(self._delivery, notification, event, status, author)
        deliveries().submit(self._origin, prepare)

    def _delivery(
        self,
        notification: Notification,
        event: RequestEvent,
        status: RequestStatus | None,
        author: Author | None = None,
    ) -> Delivery:
        payload = self.payload(notification, event, status, author)
        body = json.dumps(payload, default=str).encode()
        did = delivery_id(event.request_id, notification)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"hpd-agent/{__version__}",
            "X-Hpd-Delivery": did,
            "X-Hpd-Event": notification,
        }
        if self._secret is not None:
            digest = hmac.new(self._secret, body, hashlib.sha256).hexdigest()
            headers[SIGNATURE_HEADER] = f"sha256={digest}"
        what = f"{notification} of {event.request_id}"
        return Delivery(
            url=self.url,
            body=body,
            headers=headers,
            timeout=self.timeout,
            delivery_id=did,
            what=what,
        )
