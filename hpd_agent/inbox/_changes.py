"""The store's requests opening and ending, heard once for the whole app (the store's
``RequestFeed``): the pending requests the inbox holds (``PendingSet``) kept current, and
each change handed to every client's event stream (``GET /inbox/events``) and to the app's
hooks.

Listening starts first, then the store is listed: whatever happens meanwhile is heard after.
Each change is encoded once, as an SSE frame (``request_opened`` with the request as the
listing shows it, ``request_resolved`` with it and how it ended: status, answer, who, on
which channel, when), and queued for each stream whose filter keeps it. The last ``RECENT``
requests that ended while the inbox listened are kept for ``GET /inbox/resolved``. A stream that falls ``MAX_BEHIND`` frames behind, or whose changes may have
been missed (the store was lost for a while: it is listed again once it is back), is told
to ``resync``: its page lists the requests again. A store that offers no feed is listed every
``POLL`` seconds instead (what appeared and what left are its changes). The hooks are told of
each change the feed brings (their request observers, with the stored request's event and
who answered it).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Sequence
from typing import Any, cast

import anyio

from ..events import RequestStatus
from ..hooks import Hook, HookSet
from ..store import RequestRecord, Store, settlement
from ..text import error_text
from ._listing import Filter, resolved_item
from ._pending import Pending, PendingSet

__all__ = ["KEEP_ALIVE", "MAX_BEHIND", "POLL", "RECENT", "Changes", "Stream", "frame"]

KEEP_ALIVE = 15.0
"""Seconds of silence after which a stream sends a comment (proxies keep it open)."""

MAX_BEHIND = 10_000
"""Frames a stream may hold unsent before it is told to ``resync``."""

POLL = 1.0
"""Seconds between listings of a store that offers no request feed."""

RECENT = 100
"""Requests that ended kept for ``GET /inbox/resolved`` (the newest)."""

_RETRY = 1.0
"""Seconds before listening again after the store was lost."""

_ENDED = 10_000
"""Requests remembered as ended (a request never opens again): a record of one read as
pending a moment before it ended, told after, is not held again."""

_log = logging.getLogger("hpd_agent.inbox")


def frame(event: str, data: Any) -> bytes:
    """One SSE frame (JSON data, non-ASCII escaped: any text, lone surrogates included)."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _encoded(event: bytes, data: bytes) -> bytes:
    """One SSE frame of JSON ``data`` already encoded (as ``frame`` writes it)."""
    return b"event: " + event + b"\ndata: " + data + b"\n\n"


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

    def put(self, entry: Pending, encoded: bytes) -> None:
        """Queue ``encoded`` (a change of ``entry``'s request) if the filter keeps it."""
        if self.behind or not self.keep.keeps(entry.agent_path, entry.kind):
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
    """The app's one listener to the store, the pending requests it holds, and the streams
    it feeds.

    Args:
        store: The store whose requests the inbox shows.
        hooks: Told of each change (``request_opened``, ``request_resolved``).
    """

    def __init__(self, store: Store, hooks: Sequence[Hook] = ()) -> None:
        self.store = store
        self.hooks = HookSet(hooks)
        self.pending = PendingSet()
        self._ended: dict[str, None] = {}
        self._ready = False
        self._changed = anyio.Event()
        self._streams: set[Stream] = set()
        self._recent: deque[tuple[Pending, bytes]] = deque(maxlen=RECENT)

    @property
    def ready(self) -> bool:
        """Whether the store is listened to and was listed: ``pending`` is current, and a
        stream opened now misses nothing."""
        return self._ready

    async def wait_ready(self) -> None:
        """Wait until ``ready``."""
        while not self._ready:
            await self._changed.wait()

    def _set_ready(self, ready: bool) -> None:
        self._ready = ready
        self._changed.set()
        self._changed = anyio.Event()

    def open_stream(self, keep: Filter) -> Stream:
        """A new client's stream (told of what happens from now on)."""
        stream = Stream(keep)
        self._streams.add(stream)
        return stream

    def close_stream(self, stream: Stream) -> None:
        """The client left."""
        self._streams.discard(stream)

    def ended(self, record: RequestRecord) -> None:
        """``record``'s request left ``pending`` (told by the feed, or answered here)."""
        self._ended[record.request_id] = None
        if len(self._ended) > _ENDED:
            del self._ended[next(iter(self._ended))]
        entry = self.pending.remove(record.request_id)
        if entry is None:
            return  # never listed (opened and ended between two looks), or told already
        item = json.dumps(
            {**json.loads(entry.item), **resolved_item(record)}, separators=(",", ":")
        ).encode()
        self._recent.append((entry, item))
        encoded = _encoded(b"request_resolved", item)
        for stream in self._streams:
            stream.put(entry, encoded)

    def resolved(self, keep: Filter) -> bytes:
        """``{"resolved": [...]}``: the requests that ended while the inbox listened (the
        last ``RECENT``), newest first, those ``keep`` keeps."""
        items = [item for e, item in reversed(self._recent) if keep.keeps(e.agent_path, e.kind)]
        return b'{"resolved":[' + b",".join(items) + b"]}"

    async def run(self) -> None:
        """Listen to the store until cancelled (the app's lifespan), again after a loss."""
        while True:
            try:
                await self._listen()
            except Exception as e:  # the store was lost (a server restart): listen again
                _log.warning("inbox: lost the store's request feed: %s", error_text(e))
            if self._ready:
                self._set_ready(False)
                for stream in self._streams:
                    stream.resync()  # what happened meanwhile was not heard
            await anyio.sleep(_RETRY)

    async def _listen(self) -> None:
        feed = self.store.capabilities().feed
        if feed is None:
            await self._poll()
            return
        async with feed.request_changes() as changes:
            await self._list()
            async for record in changes:
                self._tell(record)

    async def _list(self) -> None:
        """Hold the store's pending requests (a fresh listing), then say it is ready."""
        self.pending.replace(self._entries(await self.store.list_requests()))
        self._set_ready(True)

    def _entries(self, records: Sequence[RequestRecord]) -> list[Pending]:
        entries: list[Pending] = []
        for record in records:
            try:
                entries.append(Pending.of(record))
            except Exception as e:  # a request the web cannot show
                _log.warning("inbox: cannot show request %s: %s", record.request_id, e)
        return entries

    async def _poll(self) -> None:
        await self._list()
        while True:
            await anyio.sleep(POLL)
            fresh = await self.store.list_requests()
            listed = {r.request_id for r in fresh}
            gone = [rid for rid in self.pending.ids() if rid not in listed]
            for record in fresh:
                if record.request_id not in self.pending:
                    self._tell(record)
            for rid in gone:
                record = await self.store.get_request(rid)
                if record is not None and record.status != "pending":
                    self._tell(record)

    def _tell(self, record: RequestRecord) -> None:
        """A change the store told: to the hooks, the requests held and the streams."""
        if self.hooks.observers:
            self._hook(record)
        if record.status != "pending":
            self.ended(record)
            return
        if record.request_id in self.pending or record.request_id in self._ended:
            return
        entries = self._entries([record])
        if entries and self.pending.add(entries[0]):
            encoded = _encoded(b"request_opened", entries[0].item)
            for stream in self._streams:
                stream.put(entries[0], encoded)

    def _hook(self, record: RequestRecord) -> None:
        try:
            event = record.event
        except Exception as e:  # a payload this version cannot read
            _log.warning("inbox: cannot read request %s: %s", record.request_id, error_text(e))
            return
        ended = settlement(record)
        if ended is not None:  # with who ended it, as the store keeps it (the audit trail)
            status = cast(RequestStatus, record.status)
            self.hooks.resolved(event, status, record.answer, ended.author)  # logs what fails
            return
        try:
            self.hooks.opened(event)
        except Exception as e:  # a hook's failure is its own: the others were told
            _log.warning("inbox: a hook failed on request %s: %s", record.request_id, error_text(e))
