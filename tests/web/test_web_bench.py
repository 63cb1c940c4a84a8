"""Smoke test of benchmarks/bench_web.py: tiny sizes, behaviour not timing."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO


def test_bench_web_reports_every_figure() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_web.py", "--turns", "3", "--repeat", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT_JSON "))
    result = json.loads(line.removeprefix("RESULT_JSON "))
    assert result["turns"] == 3
    # 3 tool turns: each is TOOL_CALL_START/ARGS/END/RESULT on the wire.
    assert result["sse_events"] >= 4 * 3
    assert result["sse_events_per_s"] > 0 and result["in_process_events_per_s"] > 0
    assert "pydantic_ai_sse_events" in result or result["pydantic_ai"].startswith("skipped")
