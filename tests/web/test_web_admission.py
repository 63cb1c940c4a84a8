"""Starting runs a few at a time (``STARTING``): a burst of inputs all run, and an input
whose body has not fully come holds no slot (a slow or hostile client cannot keep other
runs from starting). Real ``hpd-agent serve`` on 127.0.0.1; assertions are on events,
never on timing."""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor

import httpx
from conftest import Server, post_run, run_input, sse_events, unchunked

from hpd_agent.web._threads import STARTING


def _unchunked(raw: bytes) -> bytes:
    """The body of a chunked HTTP/1.1 response (head included in ``raw``)."""
    head, rest = raw.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    return unchunked(rest)


def test_inputs_whose_bodies_have_not_come_hold_no_start_slot(server: Server) -> None:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    partial: list[tuple[socket.socket, bytes]] = []
    for i in range(STARTING + 2):  # more than all the slots
        data = json.dumps(run_input(f"slow-{i}", f"r-{i}", "hello")).encode()
        sock = socket.create_connection((host, int(port)), timeout=120)
        head = (
            f"POST /agent HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        half = len(data) // 2
        sock.sendall(head.encode() + data[:half])
        partial.append((sock, data[half:]))
    with server.client() as client:
        _, events = post_run(client, run_input("quick", "r-quick", "hello"))
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["threadId"] == "quick"
    # The slow ones were only waiting for their bodies: they start once those come.
    for i, (sock, rest) in enumerate(partial):
        sock.sendall(rest)
        chunks: list[bytes] = []
        while more := sock.recv(65536):
            chunks.append(more)
        sock.close()
        slow = sse_events(_unchunked(b"".join(chunks)).decode())
        assert slow[0]["type"] == "RUN_STARTED" and slow[0]["threadId"] == f"slow-{i}"
        assert slow[-1]["type"] == "RUN_FINISHED"


def test_a_burst_of_inputs_all_start_and_each_streams_its_own_run(server: Server) -> None:
    count = 3 * STARTING + 1

    def one(i: int) -> list[dict[str, object]]:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=120) as client:
            return post_run(client, run_input(f"burst-{i}", f"r-{i}", f"say {i}"))[1]

    with ThreadPoolExecutor(count) as pool:
        streams = list(pool.map(one, range(count)))
    for i, events in enumerate(streams):
        assert events[0]["type"] == "RUN_STARTED"
        assert (events[0]["threadId"], events[0]["runId"]) == (f"burst-{i}", f"r-{i}")
        assert events[-1]["type"] == "RUN_FINISHED"
        said = "".join(str(e["delta"]) for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert said == f"Hello! You said: say {i}"
