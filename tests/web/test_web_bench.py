"""Smoke tests of benchmarks/bench_web*.py: tiny sizes, behaviour not timing."""

from __future__ import annotations

import importlib
import os
import sys

from _bench import REPO
from _bench import bench_result as _result


def test_bench_web_reports_every_figure() -> None:
    result = _result("benchmarks/bench_web.py", "--turns", "3", "--repeat", "1")
    assert result["turns"] == 3
    # 3 tool turns: each is TOOL_CALL_START/ARGS/END/RESULT on the wire.
    assert result["sse_events"] >= 4 * 3
    assert result["sse_events_per_s"] > 0 and result["in_process_events_per_s"] > 0
    assert "pydantic_ai_sse_events" in result or result["pydantic_ai"].startswith("skipped")


def test_bench_web_fanout_reports_every_figure() -> None:
    result = _result(
        "benchmarks/bench_web_fanout.py", "--agents", "3", "--tokens", "5", "--repeat", "1"
    )
    # Per call: SUBAGENT_STARTED, TEXT_MESSAGE_START, 5 pieces, TEXT_MESSAGE_END,
    # SUBAGENT_FINISHED and the root's four TOOL_CALL_* events.
    assert result["sse_events"] >= 3 * (5 + 8)
    assert result["sse_events_per_s"] > 0 and result["in_process_events_per_s"] > 0
    # The two rates measured in one run, alternately: their ratio overall and per round.
    assert result["ratio"] > 0 and len(result["ratio_rounds"]) == 1
    assert "pydantic_ai_events_per_s" in result or result["pydantic_ai"].startswith("skipped")
    if "pydantic_ai_sse_events" in result:  # the same AG-UI events, give or take the ends
        assert abs(result["pydantic_ai_sse_events"] - result["sse_events"]) <= 3


def test_bench_web_clients_reports_every_figure() -> None:
    result = _result(
        "benchmarks/bench_web_clients.py",
        *("--clients", "4", "--agents", "1", "--tokens", "10", "--interval", "10"),
        *("--stalled", "1", "--repeat", "1"),
    )
    for phase in ("steady", "steady_with_stalled", "burst"):
        assert result[f"{phase}_complete"] is True
        assert result[f"{phase}_p99_ms"] >= result[f"{phase}_p50_ms"] > 0


def test_bench_servers_output_is_read_while_it_serves() -> None:
    # A served run writes a line to the server's stdout (its activity log); a benchmark that
    # stops reading after the "Serving ... on URL" line lets the pipe fill (64 KiB), and the
    # server blocks writing, its event loop with it: `--phases burst --repeat 3` hung so.
    sys.path.insert(0, str(REPO / "benchmarks"))
    start = importlib.import_module("bench_web")._start
    chatty = "print('Serving x on http://127.0.0.1:1', flush=True)\nfor _ in range(20000): print('x' * 99)"
    proc, url = start([sys.executable, "-c", chatty], dict(os.environ))
    assert url == "http://127.0.0.1:1"
    try:
        assert proc.wait(timeout=60) == 0  # it wrote 2 MB and ended: someone read them
    finally:
        proc.kill()
        proc.wait()
