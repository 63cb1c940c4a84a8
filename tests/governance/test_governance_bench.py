"""``benchmarks/bench_answer.py`` and ``bench_grants.py`` run (tiny sizes; behaviour, not
timing)."""

from __future__ import annotations

from _bench import bench_result


def test_the_answer_benchmark_answers_with_its_author() -> None:
    result = bench_result("benchmarks/bench_answer.py", "--rounds", "1", "--answers", "20")
    assert result["authored"] is True
    assert result["memory_us"] > 0 and result["sqlite_us"] > 0


def test_the_grants_benchmark_looks_up_and_approves_by_grant() -> None:
    result = bench_result(
        "benchmarks/bench_grants.py",
        *("--rounds", "1", "--runs", "2", "--lookups", "5", "--grants", "5"),
    )
    assert result["grants"] is True
    for name in ("find_memory_empty", "find_sqlite_full", "granted_memory", "granted_sqlite"):
        assert result[f"{name}_us"] > 0
