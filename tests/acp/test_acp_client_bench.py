"""Smoke test of benchmarks/bench_acp_client.py: tiny sizes, behaviour not timing (each call
asserts its own result inside the bench: the agent's answer, the permission approved)."""

from __future__ import annotations

from _bench import bench_result


def test_bench_acp_client_reports_every_figure() -> None:
    result = bench_result("benchmarks/bench_acp_client.py", "--calls", "3", "--rounds", "2")
    assert result["target"] == 1.2
    assert result["sdk_ms"] > 0 and result["hpd_ms"] > 0 and result["ratio"] > 0
    assert abs(result["added_ms"] - (result["hpd_ms"] - result["sdk_ms"])) < 0.01
