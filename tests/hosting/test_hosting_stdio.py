"""``protocol_stdio``'s stdin as a stream (``_FdReceive`` on a pipe): what it reads, in order
and whole, on both backends; on asyncio the loop reads the pipe with one registration for the
whole conversation, holds a bounded read-ahead, and stops reading when the stream is given
back."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import termios
from collections.abc import Iterator

import anyio
import anyio.lowlevel
import pytest

from hpd_agent.hosting._stdio import _CHUNK, _HELD, _FdReceive  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.anyio


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    """A pipe whose read end is non-blocking, as ``protocol_stdio`` sets stdin."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        yield read_end, write_end
    finally:
        for fd in (read_end, write_end):
            with contextlib.suppress(OSError):  # closed by the test
                os.close(fd)


async def test_messages_are_received_in_order_whole_and_then_the_end(
    pipe: tuple[int, int],
) -> None:
    read_end, write_end = pipe
    stream = _FdReceive(read_end)
    with anyio.fail_after(10):
        for n in range(3):  # each written once the reader waits for it
            os.write(write_end, b'{"n": %d}\n' % n)
            assert await stream.receive() == b'{"n": %d}\n' % n
        os.write(write_end, b"abcdef")
        assert await stream.receive(4) == b"abcd"  # never more than asked, the rest kept
        assert await stream.receive(4) == b"ef"
        os.close(write_end)
        with pytest.raises(anyio.EndOfStream):
            await stream.receive()
    stream.end_feed()


async def test_a_wait_cancelled_loses_nothing(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    stream = _FdReceive(read_end)
    with anyio.move_on_after(0.01) as scope:  # nothing comes: the wait is cancelled
        await stream.receive()
    assert scope.cancelled_caught
    os.write(write_end, b"later\n")
    with anyio.fail_after(10):
        assert await stream.receive() == b"later\n"
    stream.end_feed()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_on_asyncio_the_pipe_is_registered_once_for_all_messages(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    added: list[int] = []
    add_reader = loop.add_reader

    def counted(fd: int, callback: object, *args: object) -> None:
        added.append(fd)
        add_reader(fd, callback, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(loop, "add_reader", counted)
    read_end, write_end = pipe
    stream = _FdReceive(read_end)
    with anyio.fail_after(10):
        for n in range(5):
            os.write(write_end, b"%d\n" % n)
            assert await stream.receive() == b"%d\n" % n
    assert added == [read_end]  # anyio's wait registers and unregisters at each message
    stream.end_feed()
    assert not loop.remove_reader(read_end)  # given back: the loop no longer watches it


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_on_asyncio_a_reader_behind_stops_the_read_ahead(pipe: tuple[int, int]) -> None:
    """Nothing more is taken from the pipe while ``_HELD`` chunks wait for the reader (the
    writer is held back by the pipe), and everything comes through once it reads."""
    read_end, write_end = pipe
    os.set_blocking(write_end, False)
    stream = _FdReceive(read_end)
    os.write(write_end, b"first\n")
    with anyio.fail_after(10):
        assert await stream.receive() == b"first\n"  # the loop now reads the pipe
        chunk = b"x" * _CHUNK
        sent = bytearray()
        stalled = 0
        while stalled < 50:  # the loop gets 50 iterations to take more: it must not
            try:
                sent += chunk[: os.write(write_end, chunk)]
                stalled = 0
            except BlockingIOError:
                stalled += 1
            await anyio.lowlevel.checkpoint()
        taken = len(sent) - _pipe_holds(read_end)
        assert taken <= _HELD * _CHUNK
        received = bytearray()
        while len(received) < len(sent):
            received += await stream.receive()
    assert received == sent
    stream.end_feed()


def _pipe_holds(fd: int) -> int:
    """Bytes written to the pipe and not yet read from it."""
    got = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, got)
    return int.from_bytes(got, "little")
