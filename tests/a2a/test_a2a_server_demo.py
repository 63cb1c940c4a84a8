"""``hpd-agent demo --a2a`` through a real subprocess: offline, two processes, the remote
Clarifier's question shown with the whole path, answered from piped input, exit 0, and
process B gone afterwards."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_a2a_runs_offline_in_two_processes(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HPD_AGENT_DEMO_PACE": "0", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", "demo", "--a2a", "Build a blog"],
        input="Django\n",
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Orchestrator > Planner > Clarifier asks: Which web framework" in out
    assert "Result (completed)" in out and "Use Django." in out and "'Build a blog'" in out
    assert "Traceback" not in done.stderr
    b = re.search(r"Process B \(pid (\d+)\)", out)
    assert b is not None and not Path(f"/proc/{b.group(1)}").exists()
