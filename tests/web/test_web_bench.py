"""Smoke tests of benchmarks/bench_web*.py: tiny sizes, behaviour not timing."""

from __future__ import annotations

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
