"""Smoke test of benchmarks/bench_webhook.py: tiny sizes, behaviour not timing."""

from __future__ import annotations

from _bench import bench_result


def test_bench_webhook_reports_every_mode() -> None:
    result = bench_result("benchmarks/bench_webhook.py", "--runs", "5", "--rounds", "2")
    assert set(result["median_us_per_run"]) == {"none", "none2", "observer", "down"}
    assert all(v > 0 for v in result["median_us_per_run"].values())
    assert {"none2_vs_none_percent", "down_vs_none_percent", "down_vs_observer_percent"} <= set(
        result
    )
