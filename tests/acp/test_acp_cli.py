"""``hpd-agent acp MODULE:ATTR [--store LOC]``: a bad agent or store is one line on stderr and
its exit status, nothing on stdout; stdin ending ends the server; ``import hpd_agent`` (and a
run) loads neither ``hpd_agent.acp`` nor the SDK's ``acp``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _child import PYTHONPATH

HERE = Path(__file__).parent


def hpd_agent_acp(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", "acp", *args],
        cwd=HERE,
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "status", "said"),
    [
        (["nosuch_module:agent"], 10, "error: acp: cannot load MODULE:ATTR 'nosuch_module:agent'"),
        (["nosuch_module:agent"], 10, "; pass acp MODULE:ATTR, e.g. package.module:NAME"),
        # The file named, and what it has (tests/apps/test_cli_names.py: the closest name).
        (["acp_agents:nothing"], 10, "error: acp: cannot load MODULE:ATTR 'acp_agents:nothing'"),
        (["acp_agents:nothing"], 10, "module acp_agents (acp_agents.py) has no attribute"),
        (["acp_agents:FLAT"], 10, "TypeError"),
        (["no-colon"], 10, "is not of the form"),
        (["acp_agents:echo", "--store", "/nonexistent/dir/runs.db"], 8, "error: "),
        (["acp_agents:echo", "--store", "nosuch://x"], 8, "error: "),
    ],
)
def test_bad_input_is_one_line_and_its_status(args: list[str], status: int, said: str) -> None:
    out = hpd_agent_acp(*args)
    assert out.returncode == status, out.stderr
    lines = out.stderr.splitlines()
    assert said in lines[-1]
    # the module under test prints at import: that line went to stderr too
    assert [line for line in lines if not line.startswith("importing")] == [lines[-1]]
    assert "Traceback" not in out.stderr
    assert out.stdout == ""  # stdout is the ACP channel


def test_the_server_ends_when_stdin_does() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "hpd_agent.cli", "acp", "acp_agents:echo"],
        cwd=HERE,
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        replies = []
        for i, (method, params) in enumerate(
            [("initialize", {"protocolVersion": 1}), ("session/new", {"cwd": "/tmp"})]
        ):
            message = {"jsonrpc": "2.0", "id": i, "method": method, "params": params}
            server.stdin.write(json.dumps(message) + "\n")
            server.stdin.flush()
            replies.append(json.loads(server.stdout.readline()))
        assert replies[0]["result"]["protocolVersion"] == 1
        assert replies[1]["result"]["sessionId"].startswith("sess_")
        server.stdin.close()
        started = time.monotonic()
        assert server.wait(timeout=30) == 0
        assert time.monotonic() - started < 5
        assert server.stdout.read() == ""
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_import_hpd_agent_loads_no_acp() -> None:
    code = (
        "import sys, anyio, hpd_agent\n"
        "from hpd_agent.testing import FunctionModel, text\n"
        "agent = hpd_agent.Agent('A', model=FunctionModel(lambda m, i: text('hi')))\n"
        "anyio.run(agent.run, 'go')\n"
        "print([m for m in ('hpd_agent.acp', 'acp') if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_the_package_names() -> None:
    import hpd_agent.acp as package

    assert callable(package.serve_stdio)
    assert "serve_stdio" in package.__all__
