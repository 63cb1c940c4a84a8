"""One client's SSE stream of a thread: coalesced writes, a bounded backlog, resync.

The run records each event once, as a frame in the thread's log (``_threads``); a stream
follows the log and writes whatever is ready in one body write (up to ``MAX_BATCH``
frames), so a burst of a thousand text deltas is a few writes, not a thousand. No client
ever holds the run back: the run only appends to the log.

A client that stops reading must not cost the others anything either. While a write waits
for its client, the run's publisher counts the events queued behind it; once
``MAX_BEHIND`` are (``Follower``), the write is abandoned, the client gets one last event,
a ``CUSTOM`` ``hpd_agent.resync`` whose value says from which index of the thread's log to
resume (``{"threadId", "from", "message"}``), and its stream is closed. It got every event
before that index (in order, none twice) and none after, so
``GET /threads/{thread}/events?from=<index>`` gives it exactly what it missed, then the live
rest. A stream that fell behind drops the thread at once: it holds nothing but its last
frame while it waits for the client to read it (or to go away).
"""

from __future__ import annotations

import time
from typing import Literal

import anyio
import anyio.lowlevel
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ._threads import MAX_BEHIND, PING_SECONDS, Follower, Thread, Threads
from ._wire import frames_bytes, resync_frame

__all__ = ["MAX_BATCH", "EventStream"]

MAX_BATCH = 1024
"""Frames written to a client in one body write at most."""

GATHER_SECONDS = 0.005
"""How long a write waits at most for a run that keeps adding frames (``_gather``)."""

_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_PING = b": ping\n\n"


class EventStream(Response):
    """An ASGI response: the thread's frames from ``start`` on, live ones as they come.

    Args:
        threads: The registry (publishing, the keep-alive wait).
        thread: The thread to follow.
        start: The index of the first frame to send.
        until: ``"end"``: stop after the terminal frame of the run that starts at
            ``start`` (``POST /agent``); ``"idle"``: stop once the thread has no run going
            and everything was sent (``GET /threads/{id}/events``).
        ids: Precede each frame with its ``id: <index>`` line.
    """

    def __init__(
        self,
        threads: Threads,
        thread: Thread,
        start: int,
        *,
        until: Literal["end", "idle"],
        ids: bool,
    ) -> None:
        # Not Response.__init__: there is no body to render, only the headers.
        self.status_code = 200
        self.media_type = "text/event-stream"
        self.background = None
        self.init_headers(_HEADERS)
        self._threads = threads
        self._thread: Thread | None = thread
        self._start = start
        self._until = until
        self._ids = ids

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        async with anyio.create_task_group() as tg:

            async def disconnected() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()  # the client went away: nothing more to write

            async def stream() -> None:
                body = await self._follow(send)
                await send({"type": "http.response.body", "body": body, "more_body": False})
                tg.cancel_scope.cancel()

            tg.start_soon(disconnected)
            # In a task of its own: each wake-up resumes a few frames, not the whole ASGI
            # stack (middleware, router) the response was called from.
            tg.start_soon(stream)

    def _stop(self, thread: Thread) -> int | None:
        """The index after which this stream ends, once known."""
        if self._until == "end":
            return next((e for e in thread.ends if e >= self._start), None)
        return None if thread.running else thread.published - 1

    async def _follow(self, send: Send) -> bytes:
        """Write the frames as they are published; the last bytes of the body to write."""
        thread = self._thread
        assert thread is not None
        follower = Follower(self._start, thread.published)
        # One scope for the stream's life: the publisher cancels it when the client fell
        # behind, which can only happen while a write waits (``Thread.writing``).
        done = False
        with anyio.CancelScope() as scope:
            follower.scope = scope
            done = await self._pump(send, thread, follower)
        if scope.cancelled_caught or not done:
            return self._resync(thread, follower.index)  # that write was not made
        self._thread = None
        return b""

    async def _pump(self, send: Send, thread: Thread, follower: Follower) -> bool:
        """Send until the end: True; False once the client has ``MAX_BEHIND`` events
        waiting (``follower.index``: the first it does not have)."""
        last = time.monotonic()
        while True:
            stop = self._stop(thread)
            if stop is None and follower.index < thread.published:
                await self._gather(thread, follower.index)
                stop = self._stop(thread)
            index, published = follower.index, thread.published
            end = min(published, index + MAX_BATCH)
            if stop is not None:
                end = min(end, stop + 1)
            if index < end:
                if follower.waiting(published) > MAX_BEHIND:
                    return False
                first = index if self._ids else None
                await self._write(
                    send, thread, follower, frames_bytes(thread.frames[index:end], first)
                )
                follower.index = end
                last = time.monotonic()
                if end < thread.published:
                    await anyio.lowlevel.checkpoint()  # a long replay lets others run
                continue
            if stop is not None and index > stop:
                return True
            await self._threads.log.changed(thread)
            if thread.published == index and time.monotonic() - last >= PING_SECONDS:
                await self._write(send, thread, follower, _PING)
                last = time.monotonic()

    @staticmethod
    async def _gather(thread: Thread, index: int) -> None:
        """Let a run that keeps adding frames add more before they are written (a turn of
        the event loop at a time, while it adds some, up to ``MAX_BATCH`` frames or
        ``GATHER_SECONDS``): a burst goes out in a few large writes, not one per turn, each
        waking the client (on one machine, often running it there and then). A frame that
        comes alone is written after one turn."""
        published, deadline = thread.published, time.monotonic() + GATHER_SECONDS
        while published - index < MAX_BATCH:
            await anyio.lowlevel.checkpoint()
            if thread.published == published or time.monotonic() >= deadline:
                return
            published = thread.published

    @staticmethod
    async def _write(send: Send, thread: Thread, follower: Follower, body: bytes) -> None:
        """Hand ``body`` to the connection; while that waits for the client to read, the
        publisher watches how many events queue up behind it."""
        thread.writing.add(follower)
        try:
            await send({"type": "http.response.body", "body": body, "more_body": True})
        finally:
            thread.writing.discard(follower)

    def _resync(self, thread: Thread, index: int) -> bytes:
        self._thread = None  # a client that fell behind holds nothing of the run
        now = int(time.time() * 1000)
        return resync_frame(thread.thread_id, index, now).encode()
