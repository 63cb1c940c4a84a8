"""Who may reach the inbox: ``serve``'s rules (``hosting.Guard``) on a real ``hpd-agent
inbox``: Host (421), Origin (403), the bearer token (401; the page and its files public),
JSON bodies (415) of bounded size (413); and what the command refuses before it serves,
in one line each: beyond this machine without a token, a store that does not exist, a hook
that does not load.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
from inbox_server import REPO, child_env, cli, inbox_server, make_store

from hpd_agent.web import MAX_BODY

TOKEN = "s3cret-token"


def test_the_guard_refuses_what_serve_refuses(tmp_path: Path) -> None:
    location = str(tmp_path / "runs.db")
    make_store(location)
    args = ("--token", TOKEN, "--allow-host", "inbox.internal")
    args += ("--allow-origin", "https://app.example")
    with inbox_server(location, *args) as url:
        port = httpx.URL(url).port
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=url, timeout=60) as client:
            # The page and its files (the web page's cards among them) need no token.
            for path in ("", "inbox", "static/board.js", "static/inbox.js", "static/style.css"):
                assert client.get(path).status_code == 200, path
            assert "Inbox" in client.get("").text
            for path in ("inbox/requests", "inbox/events"):
                refused = client.get(path)
                assert refused.status_code == 401 and refused.headers["www-authenticate"]
            wrong = client.get("inbox/requests", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            assert client.get("inbox/requests", headers=bearer).json() == {"requests": []}
            post = client.post("inbox/requests/req_x", json={"answer": 1})
            assert post.status_code == 401
            # Host: loopback names and the allowed one (DNS rebinding guard).
            rebound = client.get("inbox/requests", headers={**bearer, "Host": "evil.example"})
            assert rebound.status_code == 421
            named = {**bearer, "Host": f"inbox.internal:{port}"}
            assert client.get("inbox/requests", headers=named).status_code == 200
            # Origin: the page's own and the allowed one.
            for origin, status in [
                ("https://evil.example", 403),
                ("null", 403),
                (f"http://127.0.0.1:{port}", 200),
                ("https://app.example", 200),
            ]:
                headers = {**bearer, "Origin": origin}
                assert client.get("inbox/requests", headers=headers).status_code == status
            # Bodies: JSON only (no form a page can post without asking), of bounded size.
            text = client.post(
                "inbox/requests/req_x",
                content=b'{"answer": 1}',
                headers={**bearer, "Content-Type": "text/plain"},
            )
            assert text.status_code == 415
            big = client.post(
                "inbox/requests/req_x",
                content=b'{"answer": "' + b"x" * MAX_BODY + b'"}',
                headers={**bearer, "Content-Type": "application/json"},
            )
            assert big.status_code == 413
            unknown = client.post("inbox/requests/req_x", json={"answer": 1}, headers=bearer)
            assert unknown.status_code == 404


def _refused(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli("inbox", *args), cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=60
    )


def test_the_command_refuses_in_one_line_before_it_serves(tmp_path: Path) -> None:
    location = str(tmp_path / "runs.db")
    missing = _refused("--store", location, "--port", "0")
    assert missing.returncode == 8
    assert missing.stderr.count("\n") == 1 and "does not exist" in missing.stderr
    make_store(location)
    open_ = _refused("--store", location, "--host", "0.0.0.0", "--port", "0")
    assert open_.returncode == 2 and "without a token" in open_.stderr
    assert open_.stderr.count("\n") == 1
    hook = _refused("--store", location, "--port", "0", "--hook", "no_such_module:hook")
    assert hook.returncode == 2 and "cannot load --hook" in hook.stderr
    assert "Traceback" not in missing.stderr + open_.stderr + hook.stderr
