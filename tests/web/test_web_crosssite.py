"""A page from another origin (another 127.0.0.1 port) cannot make a served agent run, in
headless Chromium: a ``text/plain`` no-cors POST needs no preflight, so the server itself
must refuse it (its Content-Type and its Origin)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Server, run_input

CHROMIUM = "/usr/bin/chromium"
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    pytest.skip("playwright is not installed (pip install -e '.[dev]')", allow_module_level=True)
if not os.path.exists(CHROMIUM):  # pragma: no cover - depends on the machine
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

ATTACK = """async ([url, body, type, mode]) => {
  try {
    const r = await fetch(url, {method: "POST", mode, body, headers: {"Content-Type": type}});
    await r.text();
    return mode === "no-cors" ? "sent" : String(r.status);
  } catch (e) { return "blocked"; }
}"""


@pytest.fixture
def attacker(tmp_path: Path) -> Iterator[str]:
    """Another origin: a plain page served from another 127.0.0.1 port."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<!doctype html><title>elsewhere</title><p>hello</p>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def test_a_foreign_page_cannot_run_the_agent(server: Server, attacker: str) -> None:
    body = json.dumps(run_input("victim", "r1", "note"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(attacker)
        url = server.url.rstrip("/") + "/agent"
        sent = page.evaluate(ATTACK, [url, body, "text/plain", "no-cors"])
        cors = page.evaluate(ATTACK, [url, body, "application/json", "cors"])
        browser.close()
    assert sent == "sent" and cors == "blocked"
    with server.client() as c:
        # Follows the thread until its run ends: had the post run the agent, the note would
        # be written by the time this returns.
        events = c.get("/threads/victim/events")
    assert events.status_code == 404
    assert server.notes() == []
