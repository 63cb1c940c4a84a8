"""A protocol on this process's stdin and stdout (``protocol_stdio``): the two as anyio byte
streams, stdout kept for the protocol's messages alone.

A server an editor or an MCP client starts as a child talks on its stdin and stdout, so one
stray byte on stdout (a ``print`` in a tool, a log line, a library's banner, a child
process's output) breaks the protocol. Meanwhile descriptor 1 and ``sys.stdout`` point at
stderr; the protocol writes to a duplicate of the real stdout. A pipe or socket is read and
written when the event loop says it is ready (nothing blocks the loop); a terminal or a file
in a worker thread. On asyncio a pipe is read by the loop's own callback as data comes, the
descriptor registered once (anyio registers and unregisters it at each wait: two more
system calls and a wake-up's machinery a message).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections import deque
from collections.abc import Generator

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

__all__ = ["protocol_stdio"]

_CHUNK = 1 << 16
_HELD = 16
"""Chunks read ahead and not yet received before the loop stops reading (the reader is
behind: nothing more is taken from the pipe until it catches up)."""


def _pollable(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a socket (waited on by the event loop)."""
    if os.name != "posix":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:  # closed: reading it fails, which ends the protocol
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _Feed:
    """A pipe read by asyncio's loop as it becomes readable (a reader callback registered
    while the reader keeps up), its chunks held for ``receive``."""

    __slots__ = ("_fd", "_held", "_loop", "_waiter", "_watching")

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self._fd = fd
        self._loop = loop
        self._held: deque[bytes | OSError] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._watching = False

    async def receive(self, max_bytes: int) -> bytes:
        if self._held:
            await anyio.lowlevel.checkpoint()
        else:
            self._watch()
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        got = self._held.popleft()
        if isinstance(got, OSError):
            raise anyio.BrokenResourceError(str(got)) from got
        if len(got) > max_bytes:
            self._held.appendleft(got[max_bytes:])
            got = got[:max_bytes]
        if got:
            self._watch()  # taken again once the reader has caught up
        return got

    def _watch(self) -> None:
        if not self._watching and len(self._held) < _HELD:
            self._loop.add_reader(self._fd, self._readable)
            self._watching = True

    def _readable(self) -> None:
        try:
            got: bytes | OSError = os.read(self._fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError as e:  # the other side's end is broken
            got = e
        self._held.append(got)
        if not got or isinstance(got, OSError) or len(self._held) >= _HELD:
            self.end()  # the end of the stream, or the reader is behind
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def end(self) -> None:
        """Stop reading (the descriptor's owner takes it back)."""
        if self._watching:
            self._watching = False
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to undo
                self._loop.remove_reader(self._fd)


class _FdReceive(anyio.abc.ByteReceiveStream):
    """Bytes read from a file descriptor the caller owns."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._polled = _pollable(fd)
        self._drained = False  # the last read took less than it asked: the pipe was empty
        self._feed: _Feed | None = None
        self._feedable = self._polled  # until a receive finds no asyncio loop running

    def end_feed(self) -> None:
        """Stop the loop's reading (before the descriptor is given back)."""
        if self._feed is not None:
            self._feed.end()

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
        if self._feed is None and self._feedable:
            try:
                self._feed = _Feed(self._fd, asyncio.get_running_loop())
            except RuntimeError:  # another backend: anyio's waits below, from now on
                self._feedable = False
        if self._feed is not None:
            got = await self._feed.receive(max_bytes)
            if not got:
                raise anyio.EndOfStream
            return got
        waited = False
        if self._drained:  # a read now would fail (a syscall and an exception for nothing)
            await anyio.wait_readable(self._fd)
            waited = True
        while True:
            try:
                if self._polled:
                    data = os.read(self._fd, max_bytes)
                    self._drained = len(data) < max_bytes
                else:
                    data = await anyio.to_thread.run_sync(
                        os.read, self._fd, max_bytes, abandon_on_cancel=True
                    )
                    waited = True
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                waited = True
                continue
            except OSError as e:
                raise anyio.BrokenResourceError(str(e)) from e
            if not waited:  # read at once: still a checkpoint (waiting was one), but only one
                await anyio.lowlevel.checkpoint()
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        """Nothing to do: the descriptor is the caller's."""


class _FdSend(anyio.abc.ByteSendStream):
    """Bytes written to a file descriptor the caller owns."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._polled = _pollable(fd)

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            try:
                if self._polled:
                    written = os.write(self._fd, view)
                else:
                    written = await anyio.to_thread.run_sync(os.write, self._fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            except OSError as e:  # the other side closed its end
                raise anyio.BrokenResourceError(str(e)) from e
            view = view[written:]

    def send_nowait(self, item: bytes) -> int:
        """Write what the descriptor takes of ``item`` at once: the bytes written (0 when
        it would wait, and always for a file, which is written from a thread: ``send``).

        Raises:
            anyio.BrokenResourceError: The other side closed its end.
        """
        if not self._polled:
            return 0
        try:
            return os.write(self._fd, item)
        except BlockingIOError:
            return 0
        except OSError as e:  # the other side closed its end
            raise anyio.BrokenResourceError(str(e)) from e

    async def send_eof(self) -> None:
        """Nothing to do: the descriptor is the caller's."""

    async def aclose(self) -> None:
        """Nothing to do: the descriptor is the caller's."""


@contextlib.contextmanager
def protocol_stdio() -> Generator[tuple[anyio.abc.ByteReceiveStream, anyio.abc.ByteSendStream]]:
    """This process's stdin and stdout as byte streams for a protocol's messages alone.

    Until the block ends, descriptor 1 and ``sys.stdout`` are stderr (whatever else writes
    to stdout goes there), and a pipe's descriptors are non-blocking (restored after).
    """
    if sys.stdout is not None:
        sys.stdout.flush()
    out = os.dup(1)
    os.dup2(2, 1)
    saved, sys.stdout = sys.stdout, sys.stderr
    modes = [(fd, os.get_blocking(fd)) for fd in (0, out) if _pollable(fd)]
    receive = _FdReceive(0)
    try:
        for fd, _ in modes:
            os.set_blocking(fd, False)
        yield receive, _FdSend(out)
    finally:
        receive.end_feed()
        for fd, blocking in modes:
            os.set_blocking(fd, blocking)
        sys.stdout = saved
        os.dup2(out, 1)
        os.close(out)
