"""A client that stops reading costs the run and the other clients nothing, and is told to
resync: real ``hpd-agent serve`` on 127.0.0.1, real sockets (small receive buffers, so a
stalled one fills quickly), the ``tests.web.agents:fanout`` tree. Assertions are on events
and progress, never on timing."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Server, post_run, run_input, start_server, unchunked

AGENTS, TOKENS = 100, 600
"""The stalled run: 60,800 AG-UI events, well over what the socket buffers of a stalled
client hold (a few MB) plus the server's bound (``MAX_BEHIND``, 8,192 events)."""


@pytest.fixture
def fanout_server(tmp_path: Path) -> Iterator[Server]:
    s = start_server(tmp_path, agent="tests.web.agents:fanout")
    yield s
    s.stop()


def _connect(server: Server, method: str, path: str, body: Any = None) -> socket.socket:
    """A raw HTTP/1.1 request on a socket with a small receive buffer (nothing read yet)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(120)  # a bound: nothing here waits on time
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    sock.connect((host, int(port)))
    data = b"" if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    sock.sendall(head.encode() + b"\r\n" + data)
    return sock


def _head(sock: socket.socket) -> bytes:
    """Read the response head (the thread exists once it came); returns what came with it."""
    got = b""
    while b"\r\n\r\n" not in got:
        more = sock.recv(1024)
        assert more, got
        got += more
    head, rest = got.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"transfer-encoding: chunked" in head.lower(), head
    return rest


def _rest(sock: socket.socket, got: bytes) -> bytes:
    """Read the rest of a chunked body (the server closes: ``Connection: close``)."""
    chunks: list[bytes] = [got]
    while more := sock.recv(65536):
        chunks.append(more)
    sock.close()
    return unchunked(b"".join(chunks))


def _events(body: bytes) -> list[tuple[int | None, dict[str, Any]]]:
    """(id or None, event) for each SSE event of a body."""
    out: list[tuple[int | None, dict[str, Any]]] = []
    for block in body.decode().split("\n\n"):
        lines = block.split("\n")
        ids = [int(x[4:]) for x in lines if x.startswith("id: ")]
        data = [x[6:] for x in lines if x.startswith("data: ")]
        if data:
            out.append((ids[0] if ids else None, json.loads("\n".join(data))))
    return out


def _log(c: httpx.Client, thread: str, start: int) -> list[tuple[int | None, dict[str, Any]]]:
    """The thread's events from ``start`` on, as a client that keeps up gets them: should
    this reader itself fall behind (a busy machine), it resumes where it is told to."""
    out: list[tuple[int | None, dict[str, Any]]] = []
    while True:
        with c.stream("GET", f"/threads/{thread}/events?from={start}") as response:
            assert response.status_code == 200
            events = _events(response.read())
        if not events or events[-1][1].get("name") != "hpd_agent.resync":
            return out + events
        out += events[:-1]
        start = events[-1][1]["value"]["from"]


def _pieces(events: list[dict[str, Any]]) -> int:
    """The subagents' text pieces among ``events``."""
    return sum(e["type"] == "TEXT_MESSAGE_CONTENT" and "subagentRunId" in e for e in events)


def _resynced(
    events: list[tuple[int | None, dict[str, Any]]],
) -> tuple[list[dict[str, Any]], int]:
    """The events a stalled client got before its resync event, and the index it names."""
    assert events, "the stalled client got nothing at all"
    last = events[-1][1]
    assert last["type"] == "CUSTOM" and last["name"] == "hpd_agent.resync", last
    assert last["value"]["threadId"] == "stalled"
    return [e for _, e in events[:-1]], last["value"]["from"]


def test_a_stalled_client_costs_nothing_and_is_told_to_resync(fanout_server: Server) -> None:
    server = fanout_server
    prompt = f"fanout {AGENTS} {TOKENS}"
    # S starts the run and stops reading once the response began; W follows the same
    # thread's events and never reads either.
    s = _connect(server, "POST", "/agent", run_input("stalled", "r1", prompt))
    s_got = _head(s)
    w = _connect(server, "GET", "/threads/stalled/events?from=0")
    w_got = _head(w)
    with server.client() as c:
        # Another client's run goes through while both stall...
        _, events = post_run(c, run_input("reader", "r2", "fanout 4 50"))
        assert events[-1]["type"] == "RUN_FINISHED"
        assert _pieces(events) == 4 * 50
        # ...and so does the stalled client's own run: its whole log, read by a third
        # client until the run ended, ends with RUN_FINISHED.
        log = _log(c, "stalled", 0)
        assert [i for i, _ in log] == list(range(len(log)))
        full = [e for _, e in log]
        assert full[-1]["type"] == "RUN_FINISHED" and full[-1]["result"] == "done"
        assert _pieces(full) == AGENTS * TOKENS

        # S reads again: every event before the index the resync event names, in order,
        # then the resync event, then the end of the stream.
        got, n = _resynced(_events(_rest(s, s_got)))
        assert 0 < n < len(full)
        assert got == full[:n]
        # Resuming from there gives exactly the missing events.
        rest = _log(c, "stalled", n)
        assert [i for i, _ in rest] == list(range(n, len(full)))
        assert [e for _, e in rest] == full[n:]

        # The same for the stalled follower of GET /threads/{id}/events (frames with ids).
        w_events = _events(_rest(w, w_got))
        got, m = _resynced(w_events)
        assert 0 < m < len(full)
        assert [i for i, _ in w_events[:-1]] == list(range(m))
        assert got == full[:m]
        assert [e for _, e in _log(c, "stalled", m)] == full[m:]
