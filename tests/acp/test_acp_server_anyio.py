"""The ACP server on both anyio backends (asyncio and trio): a client made of our own ``Peer``
over in-memory pipes prompts a session, streams its text and approves a deep permission;
malformed requests get clear JSON-RPC errors, and the connection ending stops the turn."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from acp_agents import GATES, counted, echo, planner, top
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hpd_agent import Agent
from hpd_agent.acp._rpc import (
    CANCELLED,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    NOT_FOUND,
    Peer,
    RPCError,
)
from hpd_agent.acp._server import serve_streams

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def counts(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPD_ACP_TEST_DIR", str(tmp_path))


class _Out(anyio.abc.ByteSendStream):
    def __init__(self, stream: MemoryObjectSendStream[bytes]) -> None:
        self.stream = stream
        self.broken = False  # set: the reader has gone (a write fails, as EPIPE does)
        self.refused = anyio.Event()  # a write failed so

    async def send(self, item: bytes) -> None:
        if self.broken:
            self.refused.set()
            raise anyio.BrokenResourceError
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
        except anyio.ClosedResourceError:
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        await self.stream.aclose()


def _pipe() -> tuple[_Out, _In]:
    send, receive = anyio.create_memory_object_stream[bytes](100)
    return _Out(send), _In(receive)


Handler = Callable[[str, Any], Awaitable[Any]]


class _Updates(list[dict[str, Any]]):
    """The updates the editor got, in order; ``reach`` waits for more."""

    def __init__(self) -> None:
        super().__init__()
        self._grew = anyio.Event()

    def add(self, update: dict[str, Any]) -> None:
        self.append(update)
        self._grew.set()
        self._grew = anyio.Event()

    async def reach(self, count: int) -> None:
        while len(self) < count:
            await self._grew.wait()


@asynccontextmanager
async def client(
    agent: Agent, on_request: Handler, *, store: str | None = None, out: list[_Out] | None = None
) -> AsyncIterator[tuple[Peer, _Updates]]:
    """A ``Peer`` as the editor, connected to the server; the updates it got (``out``
    gets the server's output stream)."""
    to_server, server_in = _pipe()
    server_out, from_server = _pipe()
    if out is not None:
        out.append(server_out)
    updates = _Updates()

    async def note(method: str, params: Any) -> None:
        updates.add(params["update"])

    async def server() -> None:
        try:
            await serve_streams(agent, server_in, server_out, store=store)
        finally:
            await server_out.aclose()  # as a process's stdout closes when it exits

    peer = Peer(from_server, to_server, on_request=on_request, on_notification=note)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server)
        tg.start_soon(peer.serve)
        await peer.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        yield peer, updates
        await to_server.aclose()  # the editor goes away: the server ends
        with anyio.fail_after(5):
            await peer.closed.wait()


async def _approve(method: str, params: Any) -> Any:
    assert method == "session/request_permission"
    return {"outcome": {"outcome": "selected", "optionId": "approve_once"}}


async def test_a_turn_with_a_deep_permission() -> None:
    with anyio.fail_after(20):
        async with client(top, _approve) as (peer, updates):
            session = (await peer.request("session/new", {"cwd": "/tmp"}))["sessionId"]
            answer = await peer.request(
                "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "1"}]}
            )
    assert answer == {"stopReason": "end_turn"}
    chunks = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(chunks) == "top: mid: leaf: deployed to prod1"
    assert counted("effect") == ["deploy prod1"]


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("session/nope", {}, METHOD_NOT_FOUND),
        ("session/new", {"cwd": "relative/dir"}, INVALID_PARAMS),
        ("session/new", [1, 2], INVALID_PARAMS),
        ("session/prompt", {"sessionId": 3, "prompt": []}, INVALID_PARAMS),
        ("session/prompt", {"sessionId": "sess_x", "prompt": []}, NOT_FOUND),
    ],
)
async def test_bad_requests_get_clear_errors(method: str, params: Any, code: int) -> None:
    with anyio.fail_after(20):
        async with client(echo, _approve) as (peer, _updates):
            with pytest.raises(RPCError) as caught:
                await peer.request(method, params)
    assert caught.value.code == code


async def test_a_prompt_without_text_is_refused() -> None:
    with anyio.fail_after(20):
        async with client(echo, _approve) as (peer, _updates):
            session = (await peer.request("session/new", {"cwd": "/tmp"}))["sessionId"]
            image = {"type": "image", "data": "", "mimeType": "image/png"}
            with pytest.raises(RPCError) as caught:
                await peer.request("session/prompt", {"sessionId": session, "prompt": [image]})
    assert caught.value.code == INVALID_PARAMS
    assert "no text" in caught.value.message


async def test_the_editor_going_away_stops_a_turn_waiting_for_it() -> None:
    asked = anyio.Event()

    async def hold(method: str, params: Any) -> Any:
        asked.set()
        await anyio.sleep_forever()

    with anyio.fail_after(20):
        async with client(top, hold) as (peer, _updates):
            session = (await peer.request("session/new", {"cwd": "/tmp"}))["sessionId"]
            async with anyio.create_task_group() as tg:

                async def prompt() -> None:
                    prompt = [{"type": "text", "text": "1"}]
                    with contextlib.suppress(RPCError):  # the connection ends first
                        await peer.request(
                            "session/prompt", {"sessionId": session, "prompt": prompt}
                        )

                tg.start_soon(prompt)
                await asked.wait()
                tg.cancel_scope.cancel()
    assert counted("effect") == []


async def test_a_prompt_cancelled_by_its_request_id_stops_its_turn_and_the_session_goes_on() -> (
    None
):
    """``$/cancel_request`` on a ``session/prompt`` answers it ``-32800`` and stops its turn
    (its open permission request is withdrawn, its tool never runs): the session's next
    prompt runs (it used to find the first turn still running)."""
    asked, withdrawn = anyio.Event(), anyio.Event()

    async def hold_then_approve(method: str, params: Any) -> Any:
        if asked.is_set():
            return await _approve(method, params)
        asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            withdrawn.set()

    with anyio.fail_after(20):
        async with client(top, hold_then_approve) as (peer, updates):
            session = (await peer.request("session/new", {"cwd": "/tmp"}))["sessionId"]
            caught: list[RPCError] = []

            async def prompt() -> None:
                first = {"sessionId": session, "prompt": [{"type": "text", "text": "1"}]}
                try:
                    await peer.request("session/prompt", first)
                except RPCError as e:
                    caught.append(e)

            async with anyio.create_task_group() as tg:
                prompt_id = peer.next_request_id
                tg.start_soon(prompt)
                await asked.wait()
                await peer.notify("$/cancel_request", {"requestId": prompt_id})
            await withdrawn.wait()
            second = {"sessionId": session, "prompt": [{"type": "text", "text": "1"}]}
            answer = await peer.request("session/prompt", second)
    assert [e.code for e in caught] == [CANCELLED]
    assert answer == {"stopReason": "end_turn"}
    chunks = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(chunks) == "top: mid: leaf: deployed to prod1"  # the second turn's
    assert counted("effect") == ["deploy prod1"]  # once: the first turn's never ran


async def test_an_update_the_editor_no_longer_reads_leaves_the_turn_resumable(
    tmp_path: Path,
) -> None:
    """The editor stops reading while a turn streams (its write fails before its read ends):
    the turn is stopped as at any shutdown, not failed, and the next prompt resumes it."""
    store = str(tmp_path / "sessions.db")
    gate = GATES["db"] = anyio.Event()
    out: list[_Out] = []
    try:
        with anyio.fail_after(30):
            async with client(planner, _approve, store=store, out=out) as (peer, updates):
                session = (await peer.request("session/new", {"cwd": "/tmp"}))["sessionId"]
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_prompt_quietly, peer, session, "a plan")
                    # Planner: Clarifier, then survey (held at its gate)
                    await updates.reach(2)
                    out[0].broken = True  # the survey's end is written to nobody
                    gate.set()
                    await out[0].refused.wait()  # the server's write failed; then it read EOF
                    tg.cancel_scope.cancel()
    finally:
        GATES.clear()
    asked: list[str] = []

    async def pick(method: str, params: Any) -> Any:
        asked.append(params["toolCall"]["title"])
        option = next(o for o in params["options"] if o["name"] == "PostgreSQL")
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    with anyio.fail_after(30):
        async with client(planner, pick, store=store) as (peer, updates):
            prompt = [{"type": "text", "text": "and the tests"}]
            answer = await peer.request("session/prompt", {"sessionId": session, "prompt": prompt})
    assert answer == {"stopReason": "end_turn"}
    said = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert said == ["Plan: The user chose PostgreSQL."] * 2  # the resumed turn, then this one
    assert asked[0] == "Planner > Clarifier: Which database should the plan assume?"
    assert counted("effect") == ["survey db"]  # the survey did not run again


async def _prompt_quietly(peer: Peer, session: str, text: str) -> None:
    prompt = [{"type": "text", "text": text}]
    with contextlib.suppress(RPCError):  # the connection ends first
        await peer.request("session/prompt", {"sessionId": session, "prompt": prompt})
