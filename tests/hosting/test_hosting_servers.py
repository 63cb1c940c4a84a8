"""One table of who may reach a server, against each server we ship as its command runs it
(``hpd-agent serve``, ``serve --a2a``, ``mcp --http``) on a loopback address other than
127.0.0.1, and on ``::1``: the request that runs the agent, sent with a foreign Origin (as
any page can, ``text/plain`` needing no preflight), ``null``, a foreign Host, no token...
Every refusal comes before the agent runs: its model calls are counted."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from _child import PYTHONPATH, serving_child
from _served_agents import Counts
from mcp import Client

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
AGENT = "tests.hosting.hosting_agents:echo"
JSON = "application/json"
counts = Counts("HPD_HOSTING_TEST_DIR")
_SERVING = re.compile(r"Serving .* on (http://\S+)")

Runner = Callable[[httpx.AsyncClient, str, str, dict[str, str]], Awaitable[int]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _web(http: httpx.AsyncClient, url: str, prompt: str, headers: dict[str, str]) -> int:
    """An AG-UI input to ``url`` (``/agent``): its status once the run's stream ended."""
    body: dict[str, Any] = {
        "threadId": f"t-{prompt}",
        "runId": "r1",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": prompt}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    answer = await http.post(url, content=json.dumps(body), headers=headers)
    assert answer.status_code != 200 or "RUN_FINISHED" in answer.text
    return answer.status_code


async def _a2a(http: httpx.AsyncClient, url: str, prompt: str, headers: dict[str, str]) -> int:
    """JSON-RPC ``message/send`` (A2A 0.3): its status once the task completed."""
    message = {"role": "user", "parts": [{"kind": "text", "text": prompt}], "messageId": prompt}
    call = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    answer = await http.post(url, content=json.dumps(call), headers=headers)
    if answer.status_code == 200:
        assert answer.json()["result"]["status"]["state"] == "completed", answer.text
    return answer.status_code


async def _mcp(http: httpx.AsyncClient, url: str, prompt: str, headers: dict[str, str]) -> int:
    """What a page would do: ``initialize``, then ``tools/call``; the first refusal's status,
    or the call's once it answered (then the session's SSE stream opened, the session
    ended)."""
    sent = {**headers, "Accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "page", "version": "1"},
        },
    }
    answer = await http.post(url, content=json.dumps(init), headers=sent)
    if answer.status_code != 200:
        return answer.status_code
    sent["mcp-session-id"] = answer.headers["mcp-session-id"]
    sent["mcp-protocol-version"] = "2025-11-25"
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, content=json.dumps(ready), headers=sent)).status_code == 202
    arguments = {"name": "Echo", "arguments": {"query": prompt}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": arguments}
    answer = await http.post(url, content=json.dumps(call), headers=sent)
    if answer.status_code == 200:
        assert f"echo: {prompt}" in answer.text
        # The session's other methods pass the guard too: its SSE stream, its end.
        async with http.stream("GET", url, headers=sent) as stream:
            assert stream.status_code == 200
        assert (await http.delete(url, headers=sent)).status_code == 200
    return answer.status_code


@dataclass(frozen=True)
class Kind:
    command: list[str]
    run: Runner
    endpoint: str
    """Where ``run`` posts, after the URL the server says it serves on."""


KINDS = {
    "web": Kind(["serve", AGENT], _web, "/agent"),
    "a2a": Kind(["serve", "--a2a", AGENT], _a2a, "/"),
    "mcp": Kind(["mcp", AGENT, "--http"], _mcp, ""),
}


@contextmanager
def serving(folder: Path, kind: str, host: str, *args: str) -> Generator[str]:
    """The ``kind`` of server on ``host`` (a free port); its endpoint's URL once it listens."""
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1"}
    env["HPD_HOSTING_TEST_DIR"] = str(folder)
    env.pop("HPD_AGENT_TOKEN", None)
    store = ["--store", str(folder / "web.db")] if kind == "web" else []
    command = [sys.executable, "-m", "hpd_agent.cli", *KINDS[kind].command]
    command += ["--host", host, "--port", "0", *store, *args]
    with serving_child(command, cwd=REPO, env=env, serving=_SERVING) as (url, _):
        yield url + KINDS[kind].endpoint


def _cases(url: str) -> list[tuple[str, dict[str, str], int]]:
    """The tokenless table: a prompt, the headers it is sent with, the status expected."""
    netloc, port = urlsplit(url).netloc, urlsplit(url).port
    assert port is not None
    name = netloc.rsplit(":", 1)[0]
    plain = {"Content-Type": "text/plain"}
    json_ = {"Content-Type": JSON}
    return [
        ("foreign-origin-plain", {**plain, "Origin": "http://evil.example"}, 403),
        ("foreign-origin-json", {**json_, "Origin": "https://evil.example"}, 403),
        ("another-port", {**json_, "Origin": f"http://{name}:{port + 1}"}, 403),
        ("null-origin", {**json_, "Origin": "null"}, 403),
        ("foreign-host", {**json_, "Host": f"evil.example:{port}"}, 421),
        ("rebound", {**json_, "Host": "evil.example", "Origin": "http://evil.example"}, 421),
        ("plain-no-origin", plain, 415),
        ("json-no-origin", json_, 200),
        ("own-origin", {**json_, "Origin": f"http://{netloc}"}, 200),
    ]


@pytest.mark.parametrize("host", ["127.0.0.2", "::1"])
@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_a_tokenless_server_serves_only_this_machine(
    tmp_path: Path, kind: str, host: str
) -> None:
    with serving(tmp_path, kind, host) as url:
        seen: dict[str, int] = {}
        async with httpx.AsyncClient(timeout=60) as http:
            for prompt, headers, _ in _cases(url):
                seen[prompt] = await KINDS[kind].run(http, url, prompt, headers)
            if kind == "mcp":
                async with Client(url) as client:
                    result = await client.call_tool("Echo", {"query": "sdk-client"})
                assert result.content[0].text == "echo: sdk-client"  # type: ignore[union-attr]
    assert seen == {prompt: status for prompt, _, status in _cases(url)}
    # Only the requests served ran the agent (each served one had run it by its answer).
    served = [prompt for prompt, _, status in _cases(url) if status == 200]
    assert counts.counted("model", tmp_path) == served + (["sdk-client"] if kind == "mcp" else [])


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_a_server_with_a_token_still_refuses_foreign_pages(tmp_path: Path, kind: str) -> None:
    with serving(tmp_path, kind, "127.0.0.2", "--token", "s3cret") as url:
        port = urlsplit(url).port
        right = {"Authorization": "Bearer s3cret", "Content-Type": JSON}
        cases = [
            ("no-token", {"Content-Type": JSON}, 401),
            ("wrong-token", {**right, "Authorization": "Bearer nope"}, 401),
            ("foreign-origin", {**right, "Origin": "http://evil.example"}, 403),
            ("plain", {**right, "Content-Type": "text/plain"}, 415),
            ("any-host", {**right, "Host": f"agent.example:{port}"}, 200),
            ("token", right, 200),
        ]
        run = KINDS[kind].run
        async with httpx.AsyncClient(timeout=60) as http:
            seen = {prompt: await run(http, url, prompt, headers) for prompt, headers, _ in cases}
            bare = await http.post(url, content="{}", headers={"Content-Type": JSON})
    assert seen == {prompt: status for prompt, _, status in cases}
    assert bare.headers["www-authenticate"] == "Bearer"
    assert counts.counted("model", tmp_path) == ["any-host", "token"]
