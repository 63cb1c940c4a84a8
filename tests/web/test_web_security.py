"""Every security rule of the web server, against a real ``hpd-agent serve`` process."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
import pytest
from conftest import REPO, Server, post_run, run_input, serve_command, start_server

TOKEN = "s3cret-token"
GUARDED = [
    ("POST", "/agent"),
    ("POST", "/threads/t/requests/req_x"),
    ("POST", "/requests/req_x"),
    ("GET", "/threads/t/requests"),
    ("GET", "/threads/t/events"),
    ("GET", "/threads/t/messages"),
    ("GET", "/info"),
]


@pytest.fixture
def guarded(tmp_path: Path):
    s = start_server(tmp_path, token=TOKEN)
    yield s
    s.stop()


@pytest.mark.parametrize(("method", "path"), GUARDED)
def test_token_guards_every_route_but_the_page(guarded: Server, method: str, path: str) -> None:
    with httpx.Client(base_url=guarded.url, timeout=30) as c:
        assert c.request(method, path).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        response = c.request(method, path, headers=wrong)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert c.get("/").status_code != 401  # the page itself needs no token


def test_the_page_loads_every_file_from_the_server_itself_without_a_token(
    guarded: Server,
) -> None:
    with httpx.Client(base_url=guarded.url, timeout=30) as c:
        page = c.get("/").text
        wanted = re.findall(r'(?:src|href)="([^"]+)"', page)
        # Nothing from elsewhere (no CDN): the page's files, and its blank icon.
        assert [w for w in wanted if not w.startswith("static/")] == ["data:,"]
        files = [w for w in wanted if w.startswith("static/")]
        assert "static/vendor/marked.umd.js" in files and "static/vendor/purify.min.js" in files
        for name in files:
            got = c.get("/" + name)
            assert got.status_code == 200, name
            assert got.headers["content-type"].split(";")[0] in {
                "text/javascript",
                "application/javascript",
                "text/css",
            }, name


def test_the_right_token_is_let_in(guarded: Server) -> None:
    with guarded.client() as c:
        _, events = post_run(c, run_input("t", "r1", "hello"))
        assert events[-1]["result"] == "Hello! You said: hello"
        assert c.get("/threads/t/messages").status_code == 200
        # What the page names the agent by (the header, the root of the tree).
        assert c.get("/info").json() == {
            "name": "Orchestrator",
            "description": None,
            "examples": [],
        }


def test_non_loopback_host_without_token_refuses_to_start(tmp_path: Path) -> None:
    done = subprocess.run(
        serve_command("--host", "0.0.0.0", "--port", "0", "--store", str(tmp_path / "s.db")),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert "refusing to serve on 0.0.0.0 without a token" in done.stderr
    assert "Traceback" not in done.stderr


def _ask(c: httpx.Client, thread: str) -> str:
    _, events = post_run(c, run_input(thread, "r1", "deep"))
    return events[-1]["outcome"]["interrupts"][0]["id"]


def test_a_request_is_answerable_only_through_its_own_thread(server: Server) -> None:
    with server.client() as c:
        a = _ask(c, "thread-a")
        post_run(c, run_input("thread-b", "r1", "hello"))
        assert (
            c.post(f"/threads/thread-b/requests/{a}", json={"answer": "sqlite"}).status_code == 404
        )
        flat = c.post(f"/requests/{a}", json={"threadId": "thread-b", "answer": "sqlite"})
        assert flat.status_code == 404
        assert (
            c.post(f"/threads/nowhere/requests/{a}", json={"answer": "sqlite"}).status_code == 404
        )
        resume = [{"interruptId": a, "status": "resolved", "payload": "sqlite"}]
        _, refused = post_run(c, run_input("thread-b", "r2", resume=resume))
        assert refused[-1]["type"] == "RUN_ERROR"
        assert [r["id"] for r in c.get("/threads/thread-a/requests").json()["requests"]] == [a]
        assert c.get("/threads/thread-b/requests").json()["requests"] == []
        ok = c.post(f"/threads/thread-a/requests/{a}", json={"answer": "sqlite"})
        assert ok.status_code == 200 and ok.json() == {"id": a, "answer": "sqlite"}
        assert (
            c.post(f"/threads/thread-a/requests/{a}", json={"answer": "sqlite"}).status_code == 409
        )


def test_request_ids_are_unguessable(server: Server) -> None:
    with server.client() as c:
        first, second = _ask(c, "one"), _ask(c, "two")
        events = c.get("/threads/one/events").text
    # The same scenario on two threads: ids come from secret run ids, not from anything a
    # client sees (prompt, call ids, thread id).
    assert first != second
    assert len(first.removeprefix("req_")) == 16
    assert "run_" not in events


def test_bodies_over_the_limit_get_413(server: Server) -> None:
    big = "x" * (1 << 20)
    with server.client() as c:
        assert c.post("/agent", json=run_input("t", "r1", big)).status_code == 413
        answer = c.post("/threads/t/requests/req_x", json={"answer": big})
        assert answer.status_code == 413


def test_unknown_fields_in_answers_are_refused(server: Server) -> None:
    with server.client() as c:
        a = _ask(c, "t")
        response = c.post(f"/threads/t/requests/{a}", json={"answer": "sqlite", "admin": True})
        assert response.status_code == 400 and "admin" in response.json()["error"]
        flat = c.post(f"/requests/{a}", json={"threadId": "t", "answer": "sqlite", "x": 1})
        assert flat.status_code == 400
        assert c.post(f"/threads/t/requests/{a}", json={"answr": "sqlite"}).status_code == 400
        invalid = c.post(f"/threads/t/requests/{a}", json={"answer": "mongodb"})
        assert invalid.status_code == 400
        # Nothing changed: still pending, answerable.
        assert c.post(f"/threads/t/requests/{a}", json={"answer": "sqlite"}).status_code == 200
