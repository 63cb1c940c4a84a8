"""Smoke test of benchmarks/bench_inbox.py: tiny sizes, behaviour not timing."""

from __future__ import annotations

from _bench import bench_result


def test_bench_inbox_lists_every_request() -> None:
    result = bench_result("benchmarks/bench_inbox.py", "--requests", "200", "--rounds", "2")
    assert result["requests"] == 200 and result["store"] == "sqlite"
    assert result["median_ms"] > 0 and result["first_ms"] > 0 and result["body_bytes"] > 0
