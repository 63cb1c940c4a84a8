"""The ACP wire (``hpd_agent.acp._rpc.Peer``): requests both ways, handlers in tasks of their
own, ``$/cancel_request``, hostile lines answered or ending the connection, a closed connection
failing every request that waits."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hpd_agent.acp._rpc import (
    CANCELLED,
    INVALID_REQUEST,
    MAX_DEPTH,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ConnectionClosed,
    Peer,
    RPCError,
)
from hpd_agent.hosting._stdio import _FdSend  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.anyio


class _Out(anyio.abc.ByteSendStream):
    def __init__(self, stream: MemoryObjectSendStream[bytes]) -> None:
        self.stream = stream

    async def send(self, item: bytes) -> None:
        await self.stream.send(item)

    async def send_eof(self) -> None:
        await self.stream.aclose()

    async def aclose(self) -> None:
        await self.stream.aclose()


class _In(anyio.abc.ByteReceiveStream):
    def __init__(self, stream: MemoryObjectReceiveStream[bytes]) -> None:
        self.stream = stream

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self.stream.receive()
        except anyio.EndOfStream:
            raise
        except anyio.ClosedResourceError:
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        await self.stream.aclose()


def _pipe() -> tuple[_Out, _In]:
    send, receive = anyio.create_memory_object_stream[bytes](100)
    return _Out(send), _In(receive)


class _Raw:
    """The other side, speaking raw lines."""

    def __init__(self, out: _Out, into: _In) -> None:
        self.out, self.into = out, into
        self.buffer = b""

    async def line(self, text: str | bytes) -> None:
        await self.out.send(text if isinstance(text, bytes) else text.encode())

    async def read(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self.buffer += await self.into.receive()
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)


async def _echo(method: str, params: Any) -> Any:
    if method == "echo":
        return params
    if method == "wait":
        await anyio.sleep_forever()
    raise RPCError(METHOD_NOT_FOUND, f"no method {method}")


@asynccontextmanager
async def _peer_and_raw() -> AsyncIterator[tuple[Peer, _Raw, list[Any]]]:
    to_peer, peer_in = _pipe()
    peer_out, from_peer = _pipe()
    notes: list[Any] = []

    async def note(method: str, params: Any) -> None:
        notes.append((method, params))

    peer = Peer(peer_in, peer_out, on_request=_echo, on_notification=note)
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.serve)
        yield peer, _Raw(to_peer, from_peer), notes
        tg.cancel_scope.cancel()


async def test_requests_are_answered_and_notifications_taken() -> None:
    with anyio.fail_after(10):
        async with _peer_and_raw() as (_peer, raw, notes):
            await raw.line('{"jsonrpc":"2.0","id":7,"method":"echo","params":{"a":1}}\n')
            assert await raw.read() == {"jsonrpc": "2.0", "id": 7, "result": {"a": 1}}
            await raw.line('{"jsonrpc":"2.0","method":"hello","params":[1]}\n')
            await raw.line('{"jsonrpc":"2.0","id":"x","method":"nope"}\n')
            reply = await raw.read()
            assert reply["id"] == "x" and reply["error"]["code"] == METHOD_NOT_FOUND
            assert notes == [("hello", [1])]


async def test_a_waiting_handler_does_not_stop_the_next_message_and_can_be_cancelled() -> None:
    with anyio.fail_after(10):
        async with _peer_and_raw() as (_peer, raw, _notes):
            await raw.line('{"jsonrpc":"2.0","id":1,"method":"wait"}\n')
            await raw.line('{"jsonrpc":"2.0","id":2,"method":"echo","params":"next"}\n')
            assert await raw.read() == {"jsonrpc": "2.0", "id": 2, "result": "next"}
            await raw.line(
                '{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}\n'
            )
            reply = await raw.read()
            assert reply["id"] == 1 and reply["error"]["code"] == CANCELLED


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"not json\n", PARSE_ERROR),
        (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"\n", PARSE_ERROR),
        (b"[1, 2]\n", INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":{"no":1},"method":"echo"}\n', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":3}\n', INVALID_REQUEST),
    ],
    ids=["not-json", "too-deep", "not-an-object", "bad-id", "neither"],
)
async def test_a_hostile_line_is_answered_and_the_connection_goes_on(
    line: bytes, code: int
) -> None:
    with anyio.fail_after(10):
        async with _peer_and_raw() as (_peer, raw, _notes):
            await raw.line(line)
            assert (await raw.read())["error"]["code"] == code
            await raw.line('{"jsonrpc":"2.0","id":4,"method":"echo","params":true}\n')
            assert (await raw.read())["result"] is True


async def test_requests_from_this_side_get_their_own_result_in_any_order() -> None:
    with anyio.fail_after(10):
        async with _peer_and_raw() as (peer, raw, _notes):
            results: dict[str, Any] = {}

            async def ask(name: str) -> None:
                results[name] = await peer.request("ask", {"name": name})

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "a")
                tg.start_soon(ask, "b")
                first, second = await raw.read(), await raw.read()
                await raw.line(json.dumps({"jsonrpc": "2.0", "id": 999, "result": "stray"}) + "\n")
                for message in (second, first):  # answered in the other order
                    answer = {"jsonrpc": "2.0", "id": message["id"], "result": message["params"]}
                    await raw.line(json.dumps(answer) + "\n")
            assert results == {"a": {"name": "a"}, "b": {"name": "b"}}


async def test_an_error_response_is_raised_and_a_closed_connection_fails_the_waiters() -> None:
    with anyio.fail_after(10):
        async with _peer_and_raw() as (peer, raw, _notes):
            async with anyio.create_task_group() as tg:

                async def refused() -> None:
                    with pytest.raises(RPCError) as e:
                        await peer.request("ask", None)
                    assert (e.value.code, e.value.message) == (-32602, "no")

                tg.start_soon(refused)
                message = await raw.read()
                error = {"code": -32602, "message": "no"}
                await raw.line(
                    json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}) + "\n"
                )

            async with anyio.create_task_group() as tg:

                async def closed() -> None:
                    with pytest.raises(ConnectionClosed):
                        await peer.request("ask", None)

                tg.start_soon(closed)
                await raw.read()
                await raw.out.aclose()  # the other side goes away
            await peer.closed.wait()
            with pytest.raises(ConnectionClosed):
                await peer.request("ask", None)


# -- writing without a trip through the event loop ----------------------------------------------
class _Counted(_FdSend):
    """This process's stdout as ``protocol_stdio`` gives it, its writes counted."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self.writes = 0

    def send_nowait(self, item: bytes) -> int:
        self.writes += 1
        return super().send_nowait(item)


async def test_messages_of_one_loop_iteration_go_out_in_one_write_and_order_is_kept(
    anyio_backend: str,
) -> None:
    """On asyncio (``hpd-agent acp``'s loop) what is sent in one iteration is one write, so
    the editor wakes once (a tool call's update and its permission request); on trio each
    message is written at once. Either way nothing is awaited while the pipe takes it."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # as protocol_stdio sets this process's stdout
    unused, into = _pipe()
    out = _Counted(write_end)
    try:
        peer = Peer(into, out, on_request=_echo, on_notification=_echo)
        assert peer.notify_soon("note", {"n": 1}) is None
        assert peer.notify_soon("note", {"n": 2}) is None
        with anyio.fail_after(10):
            await anyio.wait_readable(read_end)
        lines = os.read(read_end, 1 << 16).splitlines()
        assert [json.loads(line)["params"] for line in lines] == [{"n": 1}, {"n": 2}]
        assert out.writes == (1 if anyio_backend == "asyncio" else 2)
        # A message larger than the pipe holds: the rest is written as the pipe drains, and
        # the next message comes after it.
        big = peer.notify_soon("note", {"text": "x" * (1 << 18)})
        after = peer.notify_soon("note", {"n": 3})
        received = bytearray()

        async def drain() -> None:
            while received.count(b"\n") < 2:
                await anyio.wait_readable(read_end)
                received.extend(os.read(read_end, 1 << 16))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain)
                for writing in (big, after):
                    if writing is not None:
                        await writing
        lines = bytes(received).splitlines()
        assert json.loads(lines[0])["params"]["text"] == "x" * (1 << 18)
        assert json.loads(lines[1])["params"] == {"n": 3}
        # The other side gone: the notification is dropped, the connection closed.
        os.close(read_end)
        read_end = -1
        assert peer.notify_soon("note", {"n": 4}) is None
        with anyio.fail_after(10):
            await peer.closed.wait()
        assert peer.notify_soon("note", {"n": 5}) is None
    finally:
        os.close(write_end)
        if read_end >= 0:
            os.close(read_end)
        await unused.aclose()


async def test_a_request_then_is_written_without_a_task_and_its_reply_taken_as_it_is_read() -> None:
    """``request_then`` writes without a task of its own (by the end of this loop iteration
    on asyncio, before it returns elsewhere); the result goes to ``answered`` and an error
    response to ``failed``, in the reading task; a withdrawn request sends
    ``$/cancel_request`` and its late response reaches nobody."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    replies, into = _pipe()
    seen: list[str] = []
    takers: set[int] = set()  # the tasks the replies were taken in
    taken = anyio.Event()

    async def answered(result: Any) -> None:
        seen.append(f"answered {result}")
        takers.add(anyio.get_current_task().id)

    async def failed(error: RPCError) -> None:
        seen.append(f"failed {error.code} {error.message}")
        takers.add(anyio.get_current_task().id)
        taken.set()

    def sent() -> list[dict[str, Any]]:
        return [json.loads(line) for line in os.read(read_end, 1 << 16).splitlines()]

    waiting = anyio.get_current_task().id
    try:
        peer = Peer(into, _FdSend(write_end), on_request=_echo, on_notification=_echo)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(peer.serve)
                asked = [peer.request_then("ask", {"n": n}, answered, failed) for n in (1, 2, 3)]
                assert [writing for _, writing in asked] == [None, None, None]
                await anyio.wait_readable(read_end)
                assert [m["params"] for m in sent()] == [{"n": 1}, {"n": 2}, {"n": 3}]
                withdrawing = asked[2][0]()
                if withdrawing is not None:
                    await withdrawing
                await anyio.wait_readable(read_end)
                assert sent() == [
                    {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 3}}
                ]
                assert asked[2][0]() is None  # withdrawn once
                await replies.send(b'{"jsonrpc":"2.0","id":3,"result":"late"}\n')
                await replies.send(b'{"jsonrpc":"2.0","id":1,"result":"yes"}\n')
                await replies.send(
                    b'{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"no"}}\n'
                )
                await taken.wait()
                tg.cancel_scope.cancel()
        assert seen == ["answered yes", "failed -32603 no"]
        assert len(takers) == 1 and takers != {waiting}  # the reading task, not this one
    finally:
        os.close(read_end)
        os.close(write_end)
