"""Notifications sent outside every run: one delivery worker per process.

A hook that notifies (``Webhook``) hands each notification to ``deliveries()``, the
process's worker, and returns at once: the run never waits for a receiver, never sees its
failure, and never runs the worker's code on its event loop. The worker is one daemon
thread started at the first notification, with a bounded queue (``QUEUE_SIZE``; when it is
full a notification is dropped and a warning says so: a receiver down for long must not
hold the process's memory). It builds each notification's body on its own thread, POSTs it
(stdlib ``urllib``, redirects not followed) and retries what may succeed later (no
connection, a timeout, HTTP 408, 429 or 5xx) with exponential backoff: ``ATTEMPTS`` tries in
all, ``FIRST_RETRY`` seconds before the second, doubling each time, at most ``MAX_WAIT``
(1, 2, 4, 8 s: about 15 s from the first try to the last). Every failed attempt is a
warning on the ``hpd_agent.governance`` logger, naming the delivery id, the event, the
request and the receiver's origin (never the URL's path or query: a Slack webhook's path is
its secret). Other retries wait meanwhile, not the whole queue: a retry is due at its time
while later deliveries go out. ``flush`` waits until everything handed over has been
delivered or given up; at exit the process waits for that at most ``DRAIN_SECONDS``.
"""

from __future__ import annotations

import atexit
import heapq
import itertools
import logging
import os
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
"""Notifications waiting for the worker at most; one more is dropped (with a warning)."""
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


class Deliveries:
    """A delivery worker: a daemon thread, a bounded queue, retries with backoff.

    Args:
        send: Makes one try (``post``); tests give another.
        attempts: Tries per delivery.
        first_retry: Seconds before the second try (then doubling, at most ``MAX_WAIT``).
        queue_size: Notifications waiting at most.
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
        self._queue: queue.Queue[Prepare] = queue.Queue(queue_size)
        self._retries: list[tuple[float, int, Delivery, int]] = []
        self._order = itertools.count()
        self._lock = threading.Condition()
        self._outstanding = 0
        self._thread: threading.Thread | None = None

    def submit(self, prepare: Prepare) -> bool:
        """Hand a notification over (never blocks); False when the queue is full (dropped,
        with a warning)."""
        with self._lock:
            try:
                self._queue.put_nowait(prepare)
            except queue.Full:
                log.warning(
                    "notification dropped: %d are waiting to be delivered already",
                    self._queue.maxsize,
                )
                return False
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

    def _work(self) -> None:
        while True:
            wait = None
            if self._retries:
                wait = max(0.0, self._retries[0][0] - time.monotonic())
            try:
                prepare = self._queue.get(timeout=wait)
            except queue.Empty:
                pass
            else:
                self._first_try(prepare)
            while self._retries and self._retries[0][0] <= time.monotonic():
                _, _, delivery, attempt = heapq.heappop(self._retries)
                self._try(delivery, attempt)

    def _first_try(self, prepare: Prepare) -> None:
        try:
            delivery = prepare()
        except Exception:  # a notifier's bug: said, and the worker goes on
            log.exception("a notification could not be built; not delivered")
            self._done()
            return
        self._try(delivery, 1)

    def _try(self, delivery: Delivery, attempt: int) -> None:
        try:
            failed = self._send(delivery)
        except Exception as e:  # the sender's own bug: a failed try like any other
            failed = error_text(e, 300), True
        if failed is None:
            self._done()
            return
        why, retryable = failed
        where = origin(delivery.url)
        if retryable and attempt < self._attempts:
            wait = min(self._first_retry * 2 ** (attempt - 1), MAX_WAIT)
            log.warning(
                "delivery %s (%s) to %s failed (attempt %d of %d): %s; retrying in %g s",
                delivery.delivery_id,
                delivery.what,
                where,
                attempt,
                self._attempts,
                why,
                wait,
            )
            due = time.monotonic() + wait
            heapq.heappush(self._retries, (due, next(self._order), delivery, attempt + 1))
            return
        log.warning(
            "delivery %s (%s) to %s failed (attempt %d of %d): %s; giving up",
            delivery.delivery_id,
            delivery.what,
            where,
            attempt,
            self._attempts,
            why,
        )
        self._done()

    def _done(self) -> None:
        with self._lock:
            self._outstanding -= 1
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
