"""A protocol on this process's stdin and stdout (``protocol_stdio``): the two as anyio byte
streams, stdout kept for the protocol's messages alone.

A server an editor or an MCP client starts as a child talks on its stdin and stdout, so one
stray byte on stdout (a ``print`` in a tool, a log line, a library's banner, a child
process's output) breaks the protocol. Meanwhile descriptor 1 and ``sys.stdout`` point at
stderr; the protocol writes to a duplicate of the real stdout. A pipe or socket is read and
written when the event loop says it is ready (nothing blocks the loop); a terminal or a file
in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Generator

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

__all__ = ["protocol_stdio"]

_CHUNK = 1 << 16


def _pollable(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a socket (waited on by the event loop)."""
    if os.name != "posix":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:  # closed: reading it fails, which ends the protocol
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _FdReceive(anyio.abc.ByteReceiveStream):
    """Bytes read from a file descriptor the caller owns."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._polled = _pollable(fd)
        self._drained = False  # the last read took less than it asked: the pipe was empty

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
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
    try:
        for fd, _ in modes:
            os.set_blocking(fd, False)
        yield _FdReceive(0), _FdSend(out)
    finally:
        for fd, blocking in modes:
            os.set_blocking(fd, blocking)
        sys.stdout = saved
        os.dup2(out, 1)
        os.close(out)
