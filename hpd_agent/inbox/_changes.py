"""The store's requests opening and ending, heard once for the whole app (the store's
``RequestFeed``) and handed to every client's event stream (``GET /inbox/events``).

Each change is encoded once, as an SSE frame (``request_opened`` with the request as the
listing shows it, ``request_resolved`` with how it ended), and queued for each stream whose
filter keeps it. A stream that falls ``MAX_BEHIND`` frames behind, or whose changes may have
been missed (the store was lost for a while), is told to ``resync``: its page lists the
requests again. A store that offers no feed is looked at every ``POLL`` seconds instead (its
pending requests compared with the last look's). The app's hooks are told of each change
too (their request observers, with the stored request's event).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Sequence
from typing import Any, cast

import anyio

from ..events import RequestStatus
from ..hooks import Hook
from ..store import RequestRecord, Store
from ..text import error_text
from ._listing import Filter, inbox_item, resolved_item

__all__ = ["KEEP_ALIVE", "MAX_BEHIND", "POLL", "Changes", "Stream", "encode"]

KEEP_ALIVE = 15.0
"""Seconds of silence after which a stream sends a comment (proxies keep it open)."""

MAX_BEHIND = 10_000
"""Frames a stream may hold unsent before it is told to ``resync``."""

POLL = 1.0
"""Seconds between looks at a store that offers no request feed."""

_RETRY = 1.0
"""Seconds before listening again after the store was lost."""

_log = logging.getLogger("hpd_agent.inbox")


def frame(event: str, data: Any) -> bytes:
    """One SSE frame (JSON data, non-ASCII escaped: any text, lone surrogates included)."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def encode(record: RequestRecord) -> bytes:
    """The frame telling ``record``'s change: opened (pending) or resolved."""
    if record.status == "pending":
        return frame("request_opened", inbox_item(record))
    return frame("request_resolved", resolved_item(record))


class Stream:
    """One client's frames, queued until its response sends them.

    Args:
        keep: Which requests it is told of.
    """

    def __init__(self, keep: Filter) -> None:
        self.keep = keep
        self.behind = False
        self._frames: deque[bytes] = deque()
        self._event = anyio.Event()

    def put(self, record: RequestRecord, encoded: bytes) -> None:
        """Queue ``encoded`` (``record``'s frame) if the filter keeps the record."""
        if self.behind or not self.keep.keeps(record):
            return
        self._frames.append(encoded)
        if len(self._frames) > MAX_BEHIND:
            self.resync()
        self._event.set()

    def resync(self) -> None:
        """Tell the client to list the requests again (and end the stream)."""
        self.behind = True
        self._frames.clear()
        self._event.set()

    async def take(self, timeout: float) -> list[bytes]:
        """The frames queued, waiting up to ``timeout`` seconds for one (none: silence)."""
        if not self._frames and not self.behind:
            with anyio.move_on_after(timeout):
                await self._event.wait()
        self._event = anyio.Event()
        frames = list(self._frames)
        self._frames.clear()
        return frames


class Changes:
    """The app's one listener to the store, and the streams it feeds.

    Args:
        store: The store whose requests the inbox shows.
        hooks: Told of each change (``request_opened``, ``request_resolved``).
    """

    def __init__(self, store: Store, hooks: Sequence[Hook] = ()) -> None:
        self.store = store
        self.hooks = tuple(hooks)
        self.listening = anyio.Event()
        """Set while the store is listened to: a stream opened now misses nothing."""
        self._streams: set[Stream] = set()

    def open_stream(self, keep: Filter) -> Stream:
        """A new client's stream (told of what happens from now on)."""
        stream = Stream(keep)
        self._streams.add(stream)
        return stream

    def close_stream(self, stream: Stream) -> None:
        """The client left."""
        self._streams.discard(stream)

    async def run(self) -> None:
        """Listen to the store until cancelled (the app's lifespan), again after a loss."""
        while True:
            try:
                await self._listen()
            except Exception as e:  # the store was lost (a server restart): listen again
                _log.warning("inbox: lost the store's request feed: %s", error_text(e))
            if self.listening.is_set():
                self.listening = anyio.Event()
                for stream in self._streams:
                    stream.resync()  # what happened meanwhile was not heard
            await anyio.sleep(_RETRY)

    async def _listen(self) -> None:
        feed = self.store.capabilities().feed
        if feed is None:
            await self._poll()
            return
        async with feed.request_changes() as changes:
            self.listening.set()
            async for record in changes:
                self._tell(record)

    async def _poll(self) -> None:
        known = {r.request_id for r in await self.store.list_requests()}
        self.listening.set()
        while True:
            await anyio.sleep(POLL)
            pending = await self.store.list_requests()
            now = {r.request_id for r in pending}
            for record in pending:
                if record.request_id not in known:
                    self._tell(record)
            for gone in known - now:
                record = await self.store.get_request(gone)
                if record is not None and record.status != "pending":
                    self._tell(record)
            known = now

    def _tell(self, record: RequestRecord) -> None:
        """Hand the record's change to the hooks and to every stream that keeps it."""
        if self.hooks:
            self._hook(record)
        if not self._streams:
            return
        try:
            encoded = encode(record)
        except Exception as e:  # a request the web cannot show: its listing says why
            _log.warning("inbox: cannot show request %s: %s", record.request_id, error_text(e))
            return
        for stream in self._streams:
            stream.put(record, encoded)

    def _hook(self, record: RequestRecord) -> None:
        try:
            event = record.event
        except Exception as e:  # a payload this version cannot read
            _log.warning("inbox: cannot read request %s: %s", record.request_id, error_text(e))
            return
        for hook in self.hooks:
            try:
                if record.status == "pending":
                    hook.request_opened(event)
                else:
                    status = cast(RequestStatus, record.status)
                    hook.request_resolved(event, status, record.answer)
            except Exception as e:  # one hook's failure is its own
                _log.warning("inbox: hook %r failed: %s", hook, error_text(e))
