"""``benchmarks/bench_answer.py`` runs (tiny sizes; behaviour, not timing)."""

from __future__ import annotations

from _bench import bench_result


def test_the_answer_benchmark_answers_with_its_author() -> None:
    result = bench_result("benchmarks/bench_answer.py", "--rounds", "1", "--answers", "20")
    assert result["authored"] is True
    assert result["memory_us"] > 0 and result["sqlite_us"] > 0
