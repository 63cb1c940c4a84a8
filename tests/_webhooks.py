"""A webhook receiver for the tests: an HTTP server on 127.0.0.1 in a thread of the test's
process, recording every POST (headers and body), optionally holding each one until the
test releases it (a slow receiver), or answering with a status of the test's choosing."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.body)

    def signed_by(self, secret: str) -> bool:
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("X-Hpd-Signature", ""), expected)


class Receiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.arrived = threading.Condition()
        self.release = threading.Event()
        self.release.set()  # not holding: answers at once
        self.status = 204

    def wait_arrived(self, count: int, timeout: float = 30.0) -> bool:
        """Until ``count`` POSTs arrived (a thread of the test waits, never the run)."""
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.received) >= count, timeout)


@contextmanager
def receiving() -> Iterator[tuple[Receiver, str]]:
    """A receiver and its URL (path ``/hooks/secret-part``: never logged)."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with receiver.arrived:
                receiver.received.append(Received(dict(self.headers.items()), body))
                receiver.arrived.notify_all()
            receiver.release.wait(60)
            self.send_response(receiver.status)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver, f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-part"
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()


def down_url() -> str:
    """A loopback URL where nothing listens (the connection is refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hooks/secret-part"
