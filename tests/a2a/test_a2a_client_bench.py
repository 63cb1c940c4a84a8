"""Smoke test of benchmarks/bench_a2a.py: tiny sizes, behaviour not timing (each round trip
asserts its own result inside the bench)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_a2a_reports_every_figure() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_a2a.py", "--repeat", "3", "--warmup", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT_JSON "))
    result = json.loads(line.removeprefix("RESULT_JSON "))
    assert result["repeat"] == 3 and result["target"] == 1.2
    for key in ("sdk_ms", "sdk_read_to_end_ms", "hpd_agent_ms", "hpd_agent_both_ms"):
        assert result[key] > 0, key
    assert abs(result["ratio"] - result["hpd_agent_ms"] / result["sdk_ms"]) < 0.01
    assert abs(result["ratio_both"] - result["hpd_agent_both_ms"] / result["sdk_ms"]) < 0.01
