"""Where requests may come from (Host, Origin), what POST bodies must be (JSON, shallow),
against a real ``hpd-agent serve`` process on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from conftest import Server, post_run, run_input, start_server

POSTS = ["/agent", "/threads/t/requests/req_x", "/requests/req_x"]


def _port(server: Server) -> int:
    port = urlsplit(server.url).port
    assert port is not None
    return port


def test_a_foreign_host_is_refused_before_anything_runs(server: Server) -> None:
    evil = {"Host": f"evil.example:{_port(server)}"}
    with server.client() as c:
        refused = c.post("/agent", json=run_input("t", "r1", "note"), headers=evil)
        assert refused.status_code == 421
        assert "evil.example" in refused.json()["error"]
        assert "DNS rebinding" in refused.json()["error"]
        assert c.get("/", headers=evil).status_code == 421
        assert c.get("/threads/t/messages", headers=evil).status_code == 421
        # Loopback names are served.
        local = {"Host": f"localhost:{_port(server)}"}
        _, events = post_run(c, run_input("t", "r2", "hello"))
        assert events[-1]["result"] == "Hello! You said: hello"
        assert c.get("/threads/t/messages", headers=local).status_code == 200
    assert server.notes() == []  # the tool never ran for the foreign Host


def test_configured_names_are_served_and_others_refused(tmp_path: Path) -> None:
    s = start_server(tmp_path, "--allow-host", "agent.internal")
    try:
        port = _port(s)
        with s.client() as c:
            ok = c.get("/threads/t/requests", headers={"Host": f"agent.internal:{port}"})
            assert ok.status_code == 404  # served (an unknown thread), not refused
            bad = c.get("/threads/t/requests", headers={"Host": f"other.internal:{port}"})
            assert bad.status_code == 421
    finally:
        s.stop()


def test_with_a_token_any_host_is_served_but_the_token_is_still_needed(tmp_path: Path) -> None:
    s = start_server(tmp_path, token="tok")
    try:
        evil = {"Host": f"evil.example:{_port(s)}"}
        with httpx.Client(base_url=s.url, timeout=30) as c:
            assert c.get("/threads/t/requests", headers=evil).status_code == 401
        with s.client() as c:
            assert c.get("/threads/t/requests", headers=evil).status_code == 404
    finally:
        s.stop()


def test_posts_must_say_json(server: Server) -> None:
    body = json.dumps(run_input("t", "r1", "note"))
    with server.client() as c:
        for path in POSTS:
            for kind in ("text/plain", "application/x-www-form-urlencoded", None):
                headers = {"Content-Type": kind} if kind else {}
                response = c.post(path, content=body, headers=headers)
                assert response.status_code == 415, (path, kind)
                assert response.json() == {"error": "Content-Type must be application/json"}
        charset = {"Content-Type": "application/json; charset=utf-8"}
        with c.stream("POST", "/agent", content=body, headers=charset) as ok:
            assert ok.status_code == 200
            ok.read()
    assert server.notes() == ["hello note"]  # only the JSON post ran the tool


def test_a_foreign_origin_is_refused_and_the_own_origin_served(server: Server) -> None:
    port = _port(server)
    with server.client() as c:
        for origin in (f"http://127.0.0.1:{port + 1}", "https://evil.example", "null"):
            response = c.post(
                "/agent", json=run_input("t", "r1", "note"), headers={"Origin": origin}
            )
            assert response.status_code == 403, origin
            assert "cross-site" in response.json()["error"]
        own = {"Origin": server.url.rstrip("/")}
        with c.stream("POST", "/agent", json=run_input("t", "r2", "note"), headers=own) as ok:
            assert ok.status_code == 200
            ok.read()
    assert server.notes() == ["hello note"]


def test_allowed_origins_are_served(tmp_path: Path) -> None:
    s = start_server(tmp_path, "--allow-origin", "https://app.example")
    try:
        with s.client() as c:
            ok = c.get("/threads/t/requests", headers={"Origin": "https://app.example"})
            assert ok.status_code == 404
            bad = c.get("/threads/t/requests", headers={"Origin": "https://other.example"})
            assert bad.status_code == 403
    finally:
        s.stop()


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize("depth", [100_000, 65])
def test_deep_json_is_a_400_never_a_500(server: Server, path: str, depth: int) -> None:
    body = "[" * depth + "]" * depth
    with server.client() as c:
        response = c.post(path, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400
        assert response.json() == {"error": "body nests deeper than 64 levels"}
        nested = {"answer": json.loads("[" * 63 + "]" * 63)}  # 64 levels: allowed through
        assert c.post("/threads/t/requests/req_x", json=nested).status_code == 404
    assert "Traceback" not in "".join(server.output)
