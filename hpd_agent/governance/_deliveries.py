"""Notifications sent outside every run: one delivery worker per process.

A hook that notifies (``Webhook``) hands each notification to ``deliveries()``, the
process's worker, and returns at once: the run never waits for a receiver, never sees its
failure, and never runs the worker's code on its event loop. The worker is one daemon
thread started at the first notification. It builds each body on its own thread, POSTs it
(stdlib ``urllib``, redirects not followed) and retries what may succeed later (no
connection, a timeout, HTTP 408, 429 or 5xx) with exponential backoff: ``ATTEMPTS`` tries in
all, ``FIRST_RETRY`` seconds before the second, doubling each time, at most ``MAX_WAIT``
apart (1, 2, 4, 8 s: about 15 s from the first try to the last). Each failed try is a
warning on the ``hpd_agent.governance`` logger naming the delivery id, the event, the
request and the receiver's origin (never the URL's path or query: a Slack webhook's path is
its secret).

Deliveries to one receiver go out in order; while it fails, only the first is tried, at its
backoff's pace, and the others wait behind it (a receiver that is down costs one try per
backoff step, not one per notification): when it answers again they follow at once, and
those still untried once it has failed for the whole schedule are given up (one warning
says how many). At most ``QUEUE_SIZE`` notifications are held; past that one is dropped,
and a warning says so when dropping starts and how many were dropped when it stops (no
line per notification on the run's loop). ``flush`` waits until everything handed over was
delivered or given up; at exit the process waits for that at most ``DRAIN_SECONDS``.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any
from urllib.parse import urlsplit

from ..text import error_text

__all__ = [
    "ATTEMPTS",
    "DRAIN_SECONDS",
    "FIRST_RETRY",
    "MAX_WAIT",
    "QUEUE_SIZE",
    "Deliveries",
    "Delivery",
    "deliveries",
    "origin",
]

ATTEMPTS = 5
"""Tries per delivery, the first included."""
FIRST_RETRY = 1.0
"""Seconds between the first try and the second; each next wait doubles."""
MAX_WAIT = 30.0
"""The longest wait between two tries."""
QUEUE_SIZE = 1000
"""Notifications the worker holds at most (waiting, or waiting for a retry); one more is
dropped."""
DRAIN_SECONDS = 2.0
"""How long the process waits at exit for deliveries still under way."""

log = logging.getLogger("hpd_agent.governance")


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivery:
    """One notification, ready to POST.

    Attributes:
        url: Where to.
        body: The JSON body.
        headers: Its headers (content type, signature, ...).
        timeout: Seconds one try may take.
        delivery_id: The same on every try (the receiver deduplicates by it).
        what: For the log: the event and the request (``opened of req_...``).
    """

    url: str
    body: bytes
    headers: Mapping[str, str]
    timeout: float
    delivery_id: str
    what: str


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: what a log line may show of a receiver."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A signed body goes where it was sent, nowhere else: a 3xx is a failed delivery.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def post(delivery: Delivery) -> tuple[str, bool] | None:
    """POST ``delivery`` once: None when the receiver took it (2xx), else why not and
    whether a retry may succeed."""
    request = urllib.request.Request(
        delivery.url, data=delivery.body, headers=dict(delivery.headers), method="POST"
    )
    try:
        with _OPENER.open(request, timeout=delivery.timeout) as response:
            response.read(65536)  # a little of the reply, so the connection ends cleanly
            return None
    except urllib.error.HTTPError as e:
        e.close()
        if 300 <= e.code < 400:
            return f"HTTP {e.code}: redirects are not followed", False
        return f"HTTP {e.code}", e.code >= 500 or e.code in (408, 429)
    except (OSError, HTTPException, ValueError) as e:  # no connection, a timeout, bad reply
        reason = e.reason if isinstance(e, urllib.error.URLError) else e
        return error_text(reason if isinstance(reason, BaseException) else e, 300), True


Prepare = Callable[[], Delivery]
"""Builds a delivery on the worker's thread (the run only hands this over)."""


@dataclass(slots=True)
class _Waiting:
    prepare: Prepare
    give_up_at: float  # monotonic: one never tried by then, its receiver failing, is given up
    delivery: Delivery | None = None  # built at its first try
    tries: int = 0


@dataclass(slots=True)
class _Lane:
    """The deliveries to one receiver (its origin), in order; while it fails, only the first
    is tried, at its backoff's pace (a receiver that is down costs no try per delivery)."""

    waiting: deque[_Waiting] = field(default_factory=deque[_Waiting])
    ready_at: float = 0.0  # monotonic: no try before (the receiver failed)
    failures: int = 0  # tries that failed in a row

    def due(self) -> float:
        """When the worker has something to do here: the next try, or giving up on the
        deliveries behind a failing receiver."""
        if self.failures and len(self.waiting) > 1:
            return min(self.ready_at, self.waiting[1].give_up_at)
        return self.ready_at


class Deliveries:
    """A delivery worker: a daemon thread, at most ``queue_size`` notifications held,
    retries with backoff per receiver.

    Args:
        send: Makes one try (``post``); tests give another.
        attempts: Tries per delivery.
        first_retry: Seconds before the second try (then doubling, at most ``MAX_WAIT``).
        queue_size: Notifications held at most (see ``QUEUE_SIZE``).
    """

    def __init__(
        self,
        send: Callable[[Delivery], tuple[str, bool] | None] = post,
        *,
        attempts: int = ATTEMPTS,
        first_retry: float = FIRST_RETRY,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self._send = send
        self._attempts = attempts
        self._first_retry = first_retry
        self._patience = sum(self._backoff(n) for n in range(1, attempts))
        self._incoming: deque[tuple[str, Prepare]] = deque()
        self._wake = threading.Event()  # set by the first notification the worker has not seen
        self._lanes: dict[str, _Lane] = {}
        self._limit = queue_size
        self._dropped = 0
        self._lock = threading.Condition()
        self._outstanding = 0
        self._thread: threading.Thread | None = None

    def submit(self, where: str, prepare: Prepare) -> bool:
        """Hand a notification for the receiver ``where`` (its ``origin``) over (never
        blocks); False when the worker holds ``queue_size`` already (dropped)."""
        with self._lock:
            if self._outstanding >= self._limit:
                if not self._dropped:
                    log.warning("%d notifications are held already: dropping", self._limit)
                self._dropped += 1
                return False
            if self._dropped:
                log.warning("%d notifications were dropped", self._dropped)
                self._dropped = 0
            self._incoming.append((where, prepare))
            if not self._wake.is_set():  # one wake-up for a burst: the worker takes them all
                self._wake.set()
            self._outstanding += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="hpd-agent-deliveries", daemon=True
                )
                self._thread.start()
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every notification handed over was delivered or given up (at most
        ``timeout`` seconds); True if none is left. Blocks: not from an event loop's thread
        (``anyio.to_thread.run_sync(webhook.flush)`` there)."""
        with self._lock:
            return self._lock.wait_for(lambda: self._outstanding == 0, timeout)

    def _backoff(self, failures: int) -> float:
        return min(self._first_retry * 2 ** (failures - 1), MAX_WAIT)

    def _work(self) -> None:
        while True:
            due = [lane.due() for lane in self._lanes.values() if lane.waiting]
            self._wake.wait(max(0.0, min(due) - time.monotonic()) if due else None)
            self._wake.clear()
            while self._incoming:
                where, prepare = self._incoming.popleft()
                lane = self._lanes.setdefault(where, _Lane())
                lane.waiting.append(_Waiting(prepare, time.monotonic() + self._patience))
            now = time.monotonic()
            for where, lane in list(self._lanes.items()):
                if lane.waiting and lane.ready_at <= now:
                    self._try(where, lane, now)
                self._expire(where, lane, now)
                if not lane.waiting and not lane.failures:
                    del self._lanes[where]

    def _try(self, where: str, lane: _Lane, now: float) -> None:
        head = lane.waiting[0]
        if head.delivery is None:
            try:
                head.delivery = head.prepare()
            except Exception:  # a notifier's bug: said, and the worker goes on
                log.exception("a notification to %s could not be built; not delivered", where)
                lane.waiting.popleft()
                self._done(1)
                return
        head.tries += 1
        try:
            failed = self._send(head.delivery)
        except Exception as e:  # the sender's own bug: a failed try like any other
            failed = error_text(e, 300), True
        if failed is None:
            lane.failures, lane.ready_at = 0, 0.0
            lane.waiting.popleft()
            self._done(1)
            return
        why, retryable = failed
        d = head.delivery
        said = f"delivery {d.delivery_id} ({d.what}) to {where} failed (attempt {head.tries} of "
        if retryable:
            lane.failures += 1
            lane.ready_at = time.monotonic() + self._backoff(lane.failures)
        if retryable and head.tries < self._attempts:
            behind = len(lane.waiting) - 1
            more = f" ({behind} more wait for this receiver)" if behind else ""
            wait = self._backoff(lane.failures)
            log.warning("%s%d): %s; retrying in %g s%s", said, self._attempts, why, wait, more)
            return
        log.warning("%s%d): %s; giving up", said, self._attempts, why)
        lane.waiting.popleft()
        self._done(1)

    def _expire(self, where: str, lane: _Lane, now: float) -> None:
        # Behind a receiver that stays down: given up untried once their patience is over.
        expired = 0
        while lane.failures and len(lane.waiting) > 1 and lane.waiting[1].give_up_at <= now:
            del lane.waiting[1]
            expired += 1
        if expired:
            log.warning(
                "%d deliveries to %s given up untried: it failed for %g s",
                expired,
                where,
                self._patience,
            )
            self._done(expired)

    def _done(self, count: int) -> None:
        with self._lock:
            self._outstanding -= count
            if self._outstanding == 0:
                self._lock.notify_all()


_worker: Deliveries | None = None
_worker_lock = threading.Lock()


def deliveries() -> Deliveries:
    """The process's delivery worker (made at first use; drained at exit, at most
    ``DRAIN_SECONDS``)."""
    global _worker
    worker = _worker
    if worker is None:
        with _worker_lock:
            if _worker is None:
                _worker = Deliveries()
                atexit.register(_drain)
            worker = _worker
    return worker


def _drain() -> None:
    worker = _worker
    if worker is not None:
        worker.flush(DRAIN_SECONDS)


def _forget_in_child() -> None:
    # A forked child has no worker thread (and maybe a lock held at the fork): its own.
    global _worker, _worker_lock
    _worker = None
    _worker_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
