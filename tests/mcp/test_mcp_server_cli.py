"""``hpd-agent mcp MODULE:ATTR``: one error line and its exit status for bad input; a token
guards ``--http`` (and is required off loopback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from _child import PYTHONPATH
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from test_mcp_server_state import served

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
PLANNER = "tests.mcp.mcp_server_agents:planner"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def hpd_agent(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH}
    env.pop("HPD_AGENT_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", "mcp", *args],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "status", "said"),
    [
        (
            ["nosuch.module:planner"],
            10,
            "error: mcp: cannot load MODULE:ATTR 'nosuch.module:planner'",
        ),
        ([PLANNER, "--token", "t"], 2, "error: mcp: --host, --port and --token go with --http"),
        (
            [PLANNER, "--http", "--host", "0.0.0.0"],
            2,
            "error: mcp: refusing to serve on 0.0.0.0 without a token",
        ),
        ([PLANNER, "--store", "/nonexistent/dir/runs.db"], 8, "error: "),
        ([PLANNER, "--http", "--port", "70000"], 2, "is not a port number"),
    ],
)
def test_bad_input_is_one_line_and_its_status(args: list[str], status: int, said: str) -> None:
    out = hpd_agent(*args)
    assert out.returncode == status, out.stderr
    assert said in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout == ""  # stdout is the MCP channel over stdio


async def test_a_token_guards_the_http_endpoint(tmp_path: Path) -> None:
    with served(tmp_path, "--token", "s3cret") as (url, _):
        async with httpx.AsyncClient(timeout=30) as raw:
            refused = await raw.post(url, json={})
            assert refused.status_code == 401
            wrong = await raw.post(url, json={}, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
        http = create_mcp_http_client(headers={"Authorization": "Bearer s3cret"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            [tool] = (await client.list_tools()).tools
    assert tool.name == "Planner"
