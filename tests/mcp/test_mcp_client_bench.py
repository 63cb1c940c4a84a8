"""benchmarks/bench_mcp.py runs (tiny sizes): both clients get every answer right on both
transports and protocols, and it prints its RESULT_JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_mcp_bench_runs_and_reports() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_mcp.py"),
            "--calls",
            "3",
            "--rounds",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT_JSON ")]
    result = json.loads(line.removeprefix("RESULT_JSON "))
    rows = {(r["transport"], r["protocol"]) for r in result["rows"]}
    assert rows == {(t, p) for t in ("stdio", "http") for p in ("2026-07-28", "2025-11-25")}
    assert all(r["sdk_ms"] > 0 and r["bridge_ms"] > 0 for r in result["rows"])
