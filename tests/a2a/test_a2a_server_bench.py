"""Smoke test of benchmarks/bench_a2a_server.py: tiny sizes, behaviour not timing (each round
trip asserts its own result inside the bench)."""

from __future__ import annotations

from _bench import bench_result


def test_bench_a2a_server_reports_both_servers_and_their_calls() -> None:
    result = bench_result(
        "benchmarks/bench_a2a_server.py", "--repeat", "3", "--warmup", "1", "--calls"
    )
    assert result["repeat"] == 3
    for kind in ("sdk", "ours"):
        figures = result[kind]
        for key in ("query_ms", "answer_ms", "query_cpu_ms", "answer_cpu_ms", "loop_iterations"):
            assert figures[key] > 0, (kind, key)
        assert abs(figures["calls"] - sum(figures["calls_per_task"].values())) < 1
    # Only the served agent's run has tasks of hpd_agent's own; the SDK's server runs none.
    assert any(name.startswith("hpd_agent.") for name in result["ours"]["calls_per_task"])
    assert not any(name.startswith("hpd_agent.") for name in result["sdk"]["calls_per_task"])
    assert "AskOnce.execute" in result["sdk"]["calls_per_task"]
    assert "AgentRunner.execute" in result["ours"]["calls_per_task"]
    assert abs(result["cpu_ratio"] - result["ours"]["cpu_ms"] / result["sdk"]["cpu_ms"]) < 0.01
