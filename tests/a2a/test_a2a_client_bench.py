"""Smoke test of benchmarks/bench_a2a.py: tiny sizes, behaviour not timing (each round trip
asserts its own result inside the bench)."""

from __future__ import annotations

from _bench import bench_result


def test_bench_a2a_reports_every_figure() -> None:
    result = bench_result("benchmarks/bench_a2a.py", "--repeat", "3", "--warmup", "1")
    assert result["repeat"] == 3 and result["target"] == 1.2
    for key in ("sdk_ms", "sdk_read_to_end_ms", "hpd_agent_ms", "hpd_agent_both_ms"):
        assert result[key] > 0, key
    assert abs(result["ratio"] - result["hpd_agent_ms"] / result["sdk_ms"]) < 0.01
    assert abs(result["ratio_both"] - result["hpd_agent_both_ms"] / result["sdk_ms"]) < 0.01
