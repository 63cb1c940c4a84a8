"""Every command that takes a store location opens it through the scheme registry
(``hpd_agent.store.register_scheme``): ``pending``, ``answer`` and ``resume`` with a scheme an
installed package declares, and ``serve``, ``serve --a2a`` and ``mcp`` refusing a scheme
nobody registered with one line naming the registry (exit status 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import durable_agents
import pytest
from _scheme_plugin import ROOT, installed_plugin
from test_cli_store import _interrupted_run

pytestmark = pytest.mark.anyio


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    return tmp_path


async def cli(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``hpd-agent ARGS`` in another process, the ``lite`` scheme's package installed."""
    env = {
        **os.environ,
        "PYTHONPATH": installed_plugin(workdir),
        "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
    }
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, "-m", "hpd_agent.cli", *args], env=env, check=False, cwd=ROOT
        )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


async def test_pending_answer_and_resume_open_a_scheme_an_installed_package_declares(
    workdir: Path,
) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)
    location = f"lite://{db}"
    listed = await cli(workdir, "pending", "--db", location, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["request_id"] for line in listed.stdout.splitlines()] == [rid]
    answered = await cli(workdir, "answer", rid, "Hanami", "--db", location)
    assert answered.returncode == 0, answered.stderr
    done = await cli(workdir, "resume", run_id, "--db", location, "--agent", "durable_agents:build")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Orchestrator: built with Hanami"
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    # An existing store only: a mistyped path makes no new one, whatever the scheme.
    missing = await cli(workdir, "pending", "--db", f"lite://{workdir / 'typo.db'}")
    assert missing.returncode == 8 and not (workdir / "typo.db").exists()
    assert missing.stderr.count("\n") == 1 and "does not exist" in missing.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("pending", "--db"),
        ("serve", "tests.web.agents:root", "--port", "0", "--store"),
        ("serve", "tests.web.agents:root", "--a2a", "--port", "0", "--store"),
        ("mcp", "tests.web.agents:root", "--store"),
    ],
    ids=["pending", "serve", "serve --a2a", "mcp"],
)
async def test_a_scheme_nobody_registered_is_one_line_naming_the_registry(
    workdir: Path, command: tuple[str, ...]
) -> None:
    if command[0] != "pending":
        pytest.importorskip({"serve": "starlette", "mcp": "mcp"}[command[0]])
        if "--a2a" in command:
            pytest.importorskip("a2a")
    done = await cli(workdir, *command, "nope://somewhere/db")
    assert done.returncode == 8, done.stderr
    (line,) = done.stderr.splitlines()
    assert "nope://" in line and "register_scheme" in line and "Traceback" not in line
    assert done.stdout == ""
