"""Smoke test of benchmarks/bench_mcp_server.py: tiny sizes, behaviour not timing."""

from __future__ import annotations

from _bench import bench_result


def test_bench_mcp_server_reports_every_figure() -> None:
    rows = bench_result("benchmarks/bench_mcp_server.py", "--calls", "10")["rows"]
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
