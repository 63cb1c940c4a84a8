"""Smoke test of benchmarks/bench_mcp_server.py: tiny sizes, behaviour not timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_mcp_server_reports_every_figure() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_mcp_server.py", "--calls", "10"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT_JSON "))
    rows = json.loads(line.removeprefix("RESULT_JSON "))["rows"]
    cases = [(r["transport"], r["protocol"]) for r in rows]
    assert cases == [
        ("memory", "2025-11-25"),
        ("memory", "2026-07-28"),
        ("http", "2025-11-25"),
        ("http", "2026-07-28"),
    ]
    for row in rows:
        assert row["calls"] >= 10
        assert row["ours_ms"] > 0 and row["sdk_ms"] > 0 and row["raw_ms"] > 0
