"""``hpd-agent demo --acp`` through a real subprocess: offline, the Planner served by a child
``hpd-agent acp``, the remote Clarifier's question shown with the whole path and answered as a
numbered option from piped input (or by ``--yes``), exit 0, and the child gone afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpd_agent._apps.acp_demo import SERVED

REPO = Path(__file__).resolve().parents[2]


def demo(tmp_path: Path, *args: str, typed: str = "") -> subprocess.CompletedProcess[str]:
    # tmp_path on the path marks this test's processes (the child inherits PYTHONPATH).
    path = os.pathsep.join([str(REPO), str(tmp_path)])
    env = {**os.environ, "PYTHONPATH": path, "HPD_AGENT_DEMO_PACE": "0", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", "demo", "--acp", *args],
        input=typed,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def servers_of(tmp_path: Path) -> list[str]:
    """Processes serving the demo's Planner that this test started."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if SERVED.encode() in cmdline and str(tmp_path).encode() in environ:
            found.append(entry.name)
    return found


@pytest.mark.parametrize(
    ("args", "typed", "chosen"), [((), "2\n", "FastAPI"), (("--yes",), "", "Express")]
)
def test_demo_acp_asks_across_the_protocol(
    tmp_path: Path, args: tuple[str, ...], typed: str, chosen: str
) -> None:
    done = demo(tmp_path, "Build a blog", *args, typed=typed)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Orchestrator > Planner > Clarifier asks: Which web framework" in out
    assert "1) Express" in out and "2) FastAPI" in out
    assert "Result (completed)" in out and f"Use {chosen}." in out and "'Build a blog'" in out
    assert "Traceback" not in done.stderr
    assert servers_of(tmp_path) == []


def test_demo_acp_is_offline_only(tmp_path: Path) -> None:
    done = demo(tmp_path, "--model", "openai/gpt-4o-mini")
    assert done.returncode == 2
    assert done.stderr.strip() == "error: demo --acp runs offline only (no --model)"
