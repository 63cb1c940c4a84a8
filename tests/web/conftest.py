"""Fixtures of the web tests: a real ``hpd-agent serve`` on 127.0.0.1 and its helpers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

pytest.importorskip("starlette", reason='needs the web extra: pip install -e ".[web]"')

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REPO = Path(__file__).resolve().parents[2]
AGENT = "tests.web.agents:root"
_SERVING = re.compile(r"Serving (\S+) on (http://\S+)")


@dataclass
class Server:
    """A running ``hpd-agent serve`` child process."""

    url: str
    proc: subprocess.Popen[str]
    folder: Path
    token: str | None = None
    output: list[str] = field(default_factory=list[str])

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers(), timeout=60)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (a crash)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def notes(self) -> list[str]:
        path = self.folder / "notes.txt"
        return path.read_text().splitlines() if path.exists() else []


def serve_command(*args: str, agent: str = AGENT) -> list[str]:
    return [sys.executable, "-m", "hpd_agent.cli", "serve", agent, *args]


def start_server(folder: Path, *args: str, token: str | None = None, agent: str = AGENT) -> Server:
    """Start the server (serving ``agent``) on a free port and wait (bounded) for its
    "Serving" line."""
    env = {**os.environ, "HPD_WEB_TEST_DIR": str(folder), "PYTHONUNBUFFERED": "1"}
    # The test helpers by their own names (``rating_kind``), as this process imports them.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "tests"), env.get("PYTHONPATH")]))
    env.pop("HPD_AGENT_TOKEN", None)
    extra = ["--token", token] if token else []
    proc = subprocess.Popen(
        serve_command("--port", "0", "--store", str(folder / "web.db"), *extra, *args, agent=agent),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: dict[str, str] = {}
    ready = threading.Event()
    output: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            m = _SERVING.search(line)
            if m and not ready.is_set():
                found["url"] = m.group(2)
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(60) or "url" not in found:
        proc.kill()
        raise AssertionError("server did not start:\n" + "".join(output))
    return Server(found["url"], proc, folder, token, output)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = start_server(tmp_path)
    yield s
    s.stop()


def unchunked(body: bytes) -> bytes:
    """A chunked HTTP/1.1 body (``Transfer-Encoding: chunked``, read whole) decoded."""
    out = bytearray()
    while True:
        size_line, body = body.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            return bytes(out)
        out += body[:size]
        body = body[size + 2 :]


def sse_events(text: str) -> list[dict[str, Any]]:
    """The JSON events of an SSE body (comments and ids skipped)."""
    out: list[dict[str, Any]] = []
    for block in text.split("\n\n"):
        data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if data:
            out.append(json.loads("\n".join(data)))
    return out


def post_run(client: httpx.Client, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """POST /agent; the raw SSE text and its events."""
    with client.stream("POST", "/agent", json=body) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join(response.iter_text())
    return text, sse_events(text)


def run_input(thread: str, run: str, prompt: str | None = None, **extra: Any) -> dict[str, Any]:
    messages = [] if prompt is None else [{"id": f"u-{run}", "role": "user", "content": prompt}]
    return {"threadId": thread, "runId": run, "messages": messages, **extra}


VALIDATOR = Path(sys.executable).parent / "ag-ui-validate"


def assert_conformant(text: str, folder: Path, name: str) -> dict[str, Any]:
    """Zero errors and zero warnings from the ag-ui-validate 0.4.0 CLI over a captured stream.

    The raw SSE bytes go through the validator (its framing rules included); returns its
    JSON report.
    """
    capture = folder / f"{name}.sse"
    capture.write_text(text)
    done = subprocess.run(
        [str(VALIDATOR), str(capture), "--json"], capture_output=True, text=True, timeout=120
    )
    report = json.loads(done.stdout)
    bad = [d for d in report["diagnostics"] if d["severity"] in ("error", "warning")]
    assert not bad, f"{name}: " + "\n".join(f"{d['rule']}: {d['message']}" for d in bad)
    assert report["summary"]["errors"] == 0 and report["summary"]["warnings"] == 0
    assert report["eventCount"] > 0
    return report


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium under Playwright (the browser tests; ``browser_server``)."""
    from browser_server import CHROMIUM, CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def read_until(chunks: Iterator[str], needle: str = "hpd_agent.request") -> str:
    """The text read from ``chunks`` until it holds ``needle`` (by default: a request was
    announced); the rest stays in ``chunks``."""
    text = ""
    while needle not in text:
        text += next(chunks)
    return text
