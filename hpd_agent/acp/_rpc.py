"""One JSON-RPC 2.0 connection over newline-delimited JSON: the wire of the Agent Client
Protocol (ACP) on a subprocess's stdin/stdout, for both of its ends.

``Peer`` reads messages from one byte stream and writes to another; either side may send
requests and notifications at any time. Each incoming request is handled in a task of its
own (so a handler that waits for a human does not stop the next message), and its task is
cancelled by the other side's ``$/cancel_request``. Each outgoing request waits for its
response; when the connection ends, every request still waiting gets ``ConnectionClosed``.

What comes from the other side is untrusted: a line over ``MAX_LINE`` ends the connection
(nothing can be resynchronised in it), one not JSON or nesting deeper than ``MAX_DEPTH`` gets
a parse error, one neither request, notification nor response an invalid-request error.

``spawn`` starts a program with a ``Peer`` on its stdio (an ACP client's agent). And the
words the server's parts share: what a client said of itself in ``initialize`` (``Client``),
a tool call's id, title and ``_meta``, a prompt's text.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from ..events import format_path
from ..hosting import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ChildProcess,
    RPCError,
    as_object,
    client_name,
    error_of,
    open_child,
    parse_message,
    valid_id,
)

__all__ = [
    "CANCELLED",
    "CHANNEL",
    "EDITOR",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_DEPTH",
    "MAX_LINE",
    "METHOD_NOT_FOUND",
    "NOT_FOUND",
    "PARSE_ERROR",
    "Child",
    "Client",
    "ConnectionClosed",
    "Peer",
    "RPCError",
    "as_object",
    "call_id_of",
    "meta",
    "prompt_text",
    "spawn",
    "title",
]

NOT_FOUND = -32002
"""ACP's "resource not found" (an unknown session)."""
CANCELLED = -32800
"""ACP's "request cancelled" (``$/cancel_request``)."""

MAX_LINE = 64 << 20
"""Longest message line read (bytes); a longer one ends the connection."""
MAX_DEPTH = 100
"""Deepest nesting of arrays and objects in a message read."""
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps builds one per call

CHANNEL = "acp"
"""The channel the client's answers are recorded on."""

EDITOR = "the editor"
"""Who a denial is by (``Deny.reason``: "denied by the editor")."""

_log = logging.getLogger("hpd_agent.acp")

Handler = Callable[[str, Any], Awaitable[Any]]
"""Answers a request: ``(method, params)`` to its result; raises ``RPCError`` to refuse."""
Listener = Callable[[str, Any], Awaitable[None]]
"""Takes a notification: ``(method, params)``."""


class ConnectionClosed(RPCError):
    """The connection ended before the response came."""

    def __init__(self, message: str = "the connection closed") -> None:
        super().__init__(INTERNAL_ERROR, message)


class Peer:
    """One end of a JSON-RPC connection over newline-delimited JSON.

    Args:
        receive: Where messages come from (the other side's stdout, or this process's stdin).
        send: Where messages go.
        on_request: Answers each incoming request (in a task of its own).
        on_notification: Takes each incoming notification (in the reading task: keep it short).
    """

    def __init__(
        self,
        receive: anyio.abc.ByteReceiveStream,
        send: anyio.abc.ByteSendStream,
        *,
        on_request: Handler,
        on_notification: Listener,
    ) -> None:
        self._reader = BufferedByteReceiveStream(receive)
        self._send = send
        self._on_request = on_request
        self._on_notification = on_notification
        # One write at a time; not a lock: a write begun in one task may end in another.
        self._writing = anyio.Semaphore(1)
        # A stream that writes without waiting when it can (this process's stdout, a pipe)
        self._nowait: Callable[[bytes], int] | None = getattr(send, "send_nowait", None)
        # Messages sent in one event-loop iteration, written together at its end (asyncio)
        self._batch: list[bytes] | None = None
        self._finishing: asyncio.Task[None] | None = None  # a batch's rest being written
        self._next_id = 0
        self._waiting: dict[int, _Waiter | _Callbacks] = {}
        self._handling: dict[Any, anyio.CancelScope] = {}
        self.closed = anyio.Event()
        """Set once the connection has ended (read side finished or writing failed)."""
        self._ended = False  # ``closed`` is set (set with it; the Peer's own checks read this bool)

    async def serve(self) -> None:
        """Read and dispatch messages until the stream ends; then every request still
        waiting for a response gets ``ConnectionClosed`` and running handlers are cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                try:
                    await self._read_all(tg)
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._close()

    @property
    def next_request_id(self) -> int:
        """The id the next ``request`` sends: read right before calling it (no ``await``
        between), it names that request in what the other side sends about it (an ACP
        request-scoped elicitation carries it as ``requestId``)."""
        return self._next_id + 1

    async def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its result.

        Raises:
            RPCError: The other side answered with an error.
            ConnectionClosed: The connection ended first.
        """
        request_id = self._next_id = self._next_id + 1
        waiter = self._waiting[request_id] = _Waiter()
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            if self._ended:
                raise ConnectionClosed()
            await self._write(message)
            await waiter.done.wait()
        except anyio.get_cancelled_exc_class():
            if self._waiting.get(request_id) is waiter and not self._ended:
                with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                    await self.notify("$/cancel_request", {"requestId": request_id})
            raise
        finally:
            self._waiting.pop(request_id, None)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def request_then(
        self,
        method: str,
        params: Any,
        answered: Callable[[Any], Awaitable[None]],
        failed: Callable[[RPCError], Awaitable[None]],
    ) -> tuple[Callable[[], Awaitable[None] | None], Awaitable[None] | None]:
        """A request no task waits for: its result goes to ``answered``, an error response
        to ``failed``, each in the reading task as it comes; a connection that ends first
        drops it. Returns what withdraws it (``$/cancel_request`` sent, a late response
        ignored; None, or the awaitable that writes it) and, when the request could not be
        written at once, the awaitable that writes it."""
        request_id = self._next_id = self._next_id + 1
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self._waiting[request_id] = _Callbacks(answered, failed)
        withdraw = functools.partial(self._withdraw, request_id)
        try:
            if self._ended:
                raise ConnectionClosed()
            writing = self._write_soon(message)
        except ConnectionClosed:
            del self._waiting[request_id]
            return withdraw, None
        return withdraw, None if writing is None else _unless_closed(writing)

    def _withdraw(self, request_id: int) -> Awaitable[None] | None:
        if self._waiting.pop(request_id, None) is None:
            return None  # answered, or the connection has ended
        return self.notify_soon("$/cancel_request", {"requestId": request_id})

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification (no response)."""
        await self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def notify_soon(self, method: str, params: Any) -> Awaitable[None] | None:
        """Send a notification that is dropped once the connection has closed: None when
        it was written at once (or dropped), else the awaitable that writes it."""
        try:
            waiting = self._write_soon({"jsonrpc": "2.0", "method": method, "params": params})
        except ConnectionClosed:
            return None
        return None if waiting is None else _unless_closed(waiting)

    async def aclose(self) -> None:
        """Stop writing; a ``serve`` in progress ends when its stream does."""
        self._close()
        with anyio.CancelScope(shield=True):
            await self._send.aclose()

    # -- reading -------------------------------------------------------------------------
    async def _read_all(self, tg: anyio.abc.TaskGroup) -> None:
        while True:
            try:
                line = await self._reader.receive_until(b"\n", MAX_LINE)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
                return
            except anyio.DelimiterNotFound:
                _log.warning("acp: a message longer than %d bytes: connection ended", MAX_LINE)
                return
            except anyio.BrokenResourceError:
                return
            if line.strip():
                await self._dispatch(line, tg)

    async def _dispatch(self, line: bytes, tg: anyio.abc.TaskGroup) -> None:
        message = parse_message(line, MAX_DEPTH)
        if isinstance(message, RPCError):
            await self._reply(None, error=message)
            return
        method = message.get("method")
        has_id = "id" in message
        if isinstance(method, str):
            params = message.get("params")
            if not has_id:
                await self._notified(method, params)
            elif valid_id(message["id"]):
                tg.start_soon(self._handle, message["id"], method, params)
            else:
                await self._reply(None, error=RPCError(INVALID_REQUEST, "invalid request id"))
        elif has_id and ("result" in message or "error" in message):
            await self._answered(message)
        else:
            request_id = message.get("id") if has_id and valid_id(message.get("id")) else None
            await self._reply(request_id, error=RPCError(INVALID_REQUEST, "not a JSON-RPC message"))

    async def _notified(self, method: str, params: Any) -> None:
        if method == "$/cancel_request":
            target = (
                cast(dict[str, Any], params).get("requestId") if isinstance(params, dict) else None
            )
            scope = self._handling.get(_key(target))
            if scope is not None:
                scope.cancel()
            return
        try:
            await self._on_notification(method, params)
        except Exception:  # a notification has nobody to tell: log it, keep reading
            _log.exception("acp: handling the notification %r failed", method)

    async def _handle(self, request_id: Any, method: str, params: Any) -> None:
        key = _key(request_id)
        with anyio.CancelScope() as scope:
            self._handling[key] = scope
            try:
                result = await self._on_request(method, params)
            except RPCError as e:
                await self._reply(request_id, error=e)
                return
            except Exception as e:
                _log.exception("acp: handling %r failed", method)
                await self._reply(request_id, error=RPCError(INTERNAL_ERROR, _internal(e)))
                return
            finally:
                self._handling.pop(key, None)
            await self._reply(request_id, result=result)
        if scope.cancelled_caught:
            with anyio.CancelScope(shield=True):
                await self._reply(request_id, error=RPCError(CANCELLED, "request cancelled"))

    async def _answered(self, message: dict[str, Any]) -> None:
        waiter = self._waiting.pop(message["id"], None) if isinstance(message["id"], int) else None
        error = message.get("error")
        if isinstance(waiter, _Callbacks):
            if error is not None:
                await waiter.failed(error_of(error))
            else:
                await waiter.answered(message.get("result"))
        elif waiter is not None:  # else late or unknown: the request was given up
            if error is not None:
                waiter.error = error_of(error)
            else:
                waiter.result = message.get("result")
            waiter.done.set()

    # -- writing -------------------------------------------------------------------------
    async def _reply(
        self, request_id: Any, *, result: Any = None, error: RPCError | None = None
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error.payload()
        else:
            message["result"] = result
        try:  # noqa: SIM105 (suppress() is three more calls a reply)
            await self._write(message)
        except ConnectionClosed:  # nobody to answer any more
            pass

    async def _write(self, message: dict[str, Any]) -> None:
        waiting = self._write_soon(message)
        if waiting is not None:
            await waiting

    def _write_soon(self, message: dict[str, Any]) -> Awaitable[None] | None:
        """Write ``message`` without a trip to the event loop when no other write is in
        progress and the stream takes it whole (None then: no coroutine), else return the
        awaitable that writes it (in turn, after the others). On asyncio the messages of
        one loop iteration go out together at its end, one write and one wake-up of the
        other side (a tool call's update and its permission request; a turn's last update
        and its response)."""
        data = (_ENCODE(message) + "\n").encode()
        if self._batch is not None:
            self._batch.append(data)
            return None
        try:
            self._writing.acquire_nowait()  # ``acquire`` checkpoints even when free
        except anyio.WouldBlock:
            return self._write_locked(data, locked=False)
        self._batch = [data]  # the write is ours until the batch is written
        if self._ended or self._nowait is None or not _call_soon(self._flush):
            return self._write_batch()
        return None

    def _write_batch(self) -> Awaitable[None] | None:
        """Write the batch now: None when the stream took it whole, else the awaitable that
        writes the rest (the write still ours)."""
        data, self._batch = b"".join(self._batch or ()), None
        try:
            if self._ended:
                raise ConnectionClosed()
            written = 0 if self._nowait is None else self._nowait(data)
        except anyio.BrokenResourceError as e:
            self._writing.release()
            self._close()
            raise ConnectionClosed(f"the connection closed: {type(e).__name__}") from None
        except BaseException:
            self._writing.release()
            raise
        if written == len(data):
            self._writing.release()
            return None
        return self._write_locked(data[written:], locked=True)

    def _flush(self) -> None:
        """The batch written at the end of its loop iteration (or as the connection closes);
        what the stream does not take at once, by a task."""
        if self._batch is None:
            return
        try:
            rest = self._write_batch()
        except ConnectionClosed:  # dropped, as any write once closed
            return
        if rest is not None:
            # one at a time (the write is its own until done): kept from the collector
            self._finishing = asyncio.get_running_loop().create_task(_unless_closed(rest))

    async def _write_locked(self, data: bytes, *, locked: bool) -> None:
        if not locked:
            await self._writing.acquire()
        try:
            if self._ended:
                raise ConnectionClosed()
            try:
                await self._send.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
                self._close()
                raise ConnectionClosed(f"the connection closed: {type(e).__name__}") from None
        finally:
            self._writing.release()

    def _close(self) -> None:
        if self._ended:
            return
        self._flush()  # what was sent before the end goes out (as far as the stream takes it)
        self._ended = True
        self.closed.set()
        for waiter in self._waiting.values():
            if isinstance(waiter, _Waiter) and not waiter.done.is_set():
                waiter.error = ConnectionClosed()
                waiter.done.set()


def _call_soon(callback: Callable[[], None]) -> bool:
    """Whether ``callback`` runs at the end of this asyncio loop iteration (the editor-facing
    server's loop, ``hpd-agent acp``); on another backend, False (each message written now)."""
    try:
        asyncio.get_running_loop().call_soon(callback)
    except RuntimeError:
        return False
    return True


async def _unless_closed(waiting: Awaitable[None]) -> None:
    with contextlib.suppress(ConnectionClosed):
        await waiting


class Child:
    """A program ``spawn`` started (``proc``), with its ``peer``."""

    def __init__(self, proc: ChildProcess, peer: Peer, tg: anyio.abc.TaskGroup) -> None:
        self.proc = proc
        self.peer = peer
        self.tg = tg
        """For requests that outlive a caller (cancelled with the scope around ``spawn``)."""

    @property
    def broken(self) -> bool:
        """Whether the program has exited or its connection has ended."""
        return self.proc.exited.is_set() or self.peer.closed.is_set()

    async def _watch(self) -> None:
        await self.proc.watch()
        with anyio.move_on_after(1):  # what it wrote before exiting is still read
            await self.peer.closed.wait()
        await self.peer.aclose()

    async def close(self, grace: float = 5.0, kill_grace: float = 2.0) -> None:
        """End the program: stdin closed, then ``ChildProcess.end``'s signals."""
        await self.proc.end(self.peer.aclose, grace, kill_grace)


@asynccontextmanager
async def spawn(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    on_request: Handler,
    on_notification: Listener,
    before_close: Callable[[], Awaitable[None]] | None = None,
) -> AsyncGenerator[Child]:
    """Start ``argv`` with a ``Peer`` on its stdin/stdout (``hosting.open_child``: its
    stderr is this process's); leaving closes it (``Child.close``) and reaps it, its process
    group killed. Until then the connection serves on, even while the scope around it is
    cancelled: ``before_close`` (shielded) may finish the work in progress over it first.

    Raises:
        OSError: The program cannot be started.
    """
    async with open_child(argv, cwd=cwd, env=env) as proc:
        peer = Peer(proc.stdout, proc.stdin, on_request=on_request, on_notification=on_notification)
        async with anyio.create_task_group() as tg:
            child = Child(proc, peer, tg)
            # Each shielded: a cancelled caller does not cut the program off (its other
            # users may still end their work over the connection); stopped once it is closed.
            kept = (anyio.CancelScope(shield=True), anyio.CancelScope(shield=True))
            tg.start_soon(_within, kept[0], peer.serve)
            tg.start_soon(_within, kept[1], child._watch)  # pyright: ignore[reportPrivateUsage]
            try:
                yield child
            finally:
                with anyio.CancelScope(shield=True):
                    if before_close is not None:
                        await before_close()
                    await child.close()
                for scope in kept:
                    scope.cancel()
                tg.cancel_scope.cancel()


async def _within(scope: anyio.CancelScope, work: Callable[[], Awaitable[None]]) -> None:
    with scope:
        await work()


@dataclass(frozen=True)
class Client:
    """What the client said of itself in ``initialize``, kept for the connection.

    Attributes:
        forms: It declared ``clientCapabilities.elicitation.form``: questions that are not
            permissions are asked as forms.
        name: Who its answers are recorded as given by (``answered_by``): its
            ``clientInfo.name``, else ``CHANNEL``.
    """

    forms: bool = False
    name: str = CHANNEL

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> Client:
        """The client of an ``initialize`` request's params."""
        caps = as_object(params.get("clientCapabilities"))
        form = as_object(caps.get("elicitation")).get("form")  # present and not null
        name = client_name(as_object(params.get("clientInfo")).get("name"), CHANNEL)
        return cls(isinstance(form, dict), name)


def call_id_of(invocation_id: str, tool_call_id: str) -> str:
    """A tool call's id for the client: unique in the session (each agent call of each run has
    its own invocation id, its tool call ids are unique) and the same when a run replays."""
    return f"{invocation_id}/{tool_call_id}"


def meta(path: Sequence[str], **more: Any) -> dict[str, Any]:
    """The ``_meta`` of an update or a question: the agent path, for programs."""
    return {"hpd_agent": {"agent_path": list(path), **more}}


def title(path: Sequence[str], what: str) -> str:
    """What editors show: ``A > B: what``."""
    return f"{format_path(path)}: {what}"


_TEXT_OF: dict[Any, Callable[[dict[str, Any]], Any]] = {
    "text": lambda block: block.get("text"),
    "resource_link": lambda block: block.get("uri"),
    "resource": lambda block: as_object(block.get("resource")).get("text"),
}
"""A prompt block's text, by its type (images, audio, binary resources are not offered)."""


def prompt_text(blocks: Any) -> str:
    """A prompt's text: text blocks, resource links (their URI) and embedded text resources
    (their text), joined with a newline."""
    if not isinstance(blocks, list):
        raise RPCError(INVALID_PARAMS, "prompt must be a list of content blocks")
    parts: list[str] = []
    for block in map(as_object, cast(list[Any], blocks)):
        read = _TEXT_OF.get(block.get("type"))
        text = None if read is None else read(block)
        if isinstance(text, str):
            parts.append(text)
    joined = "\n".join(parts)
    if not joined.strip():
        raise RPCError(INVALID_PARAMS, "the prompt holds no text")
    return joined


class _Waiter:
    """A request its task waits for (``request``)."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: Exception | None = None


@dataclass(frozen=True, slots=True)
class _Callbacks:
    """A request no task waits for (``request_then``)."""

    answered: Callable[[Any], Awaitable[None]]
    failed: Callable[[RPCError], Awaitable[None]]


def _key(value: Any) -> Any:
    """An id as the key of a request being handled (1 and "1" are different ids)."""
    return (type(value).__name__, value) if valid_id(value) else None


def _internal(error: Exception) -> str:
    """What the other side reads of an unexpected failure: its kind only (no details)."""
    return f"internal error ({type(error).__name__})"
