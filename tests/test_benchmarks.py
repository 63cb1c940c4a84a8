"""Smoke tests of the benchmarks: every workload of every bench, tiny sizes, and the runner.

Behaviour, not timing: each workload asserts its own outcome (outputs, result order, every
question answered, ...) and exits non-zero if one fails; here each must print one parsable
``RESULT_JSON`` line with its metrics and no network attempt. hpd_agent's bench always runs;
a peer's runs when the peer is installed (``pip install -e ".[bench]"``) and is skipped with
that line otherwise. The durable variants run on SQLite always and on PostgreSQL when
``tests/_pg.py`` can start a server.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _pg import postgres_dsn  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
HPD_BENCH = BENCHMARKS / "bench_hpd_agent.py"
INSTALL = 'pip install -e ".[bench]"'

PEERS = {
    # framework: (bench script, module that must be importable)
    # a submodule: tests/web/agents.py shadows a bare "agents" on the test path
    "openai-agents": ("bench_openai_agents.py", "agents.run"),
    "pydantic-ai": ("bench_pydantic_ai.py", "pydantic_ai"),
    "langgraph": ("bench_langgraph.py", "langgraph.prebuilt"),
}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _needs(module: str, what: str) -> None:
    if not _importable(module):
        pytest.skip(f"{what} is not installed: {INSTALL}")


def _run(script: Path, args: list[str], timeout: int = 120) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT_JSON ")]
    assert len(lines) == 1, proc.stdout[-2000:]
    return json.loads(lines[0][len("RESULT_JSON ") :])


def _number(value: Any) -> float:
    number = value["median"] if isinstance(value, dict) else value
    assert isinstance(number, float | int), value
    return float(number)


def _check(result: dict[str, Any], framework: str, args: list[str], keys: list[str]) -> None:
    assert result["framework"] == framework
    assert result["workload"] == args[0]
    assert result["net_attempts"] == []
    assert result["calib_before_ms"] > 0 and result["calib_after_ms"] > 0
    for key in keys:
        number = _number(result["metrics"][key])
        if key in DIFFERENCES:
            # A difference of two timings of a few turns: noise on a loaded machine can make
            # it negative; what matters here is that it is reported.
            assert math.isfinite(number), (key, result["metrics"][key])
        else:
            assert number >= 0, (key, result["metrics"][key])


DIFFERENCES = {"journal_us_per_turn"}
"""Metrics that are one timing minus another (the cost of a layer), not timings."""


# ----------------------------------------------------------------------------- hpd_agent
HPD_CASES: list[tuple[list[str], list[str]]] = [
    (["W1", "--turns", "5", "--runs", "2"], ["us_per_turn"]),
    (["W2", "--fanout", "7", "--runs", "2"], ["total_ms", "us_per_call"]),
    (["W3", "--repeats", "3"], ["ms_per_run"]),
    (["W4", "--depth", "2", "--repeats", "3"], ["ms_round_trip_full", "ms_answer_to_complete"]),
    (["W4", "--depth", "1", "--repeats", "3"], ["ms_round_trip_full", "ms_answer_to_complete"]),
    (["W4", "--variant", "base", "--repeats", "3"], ["ms_round_trip_full"]),
    (["W5", "--concurrency", "20", "--w5-turns", "3"], ["total_s", "peak_rss_mb", "kb_per_run"]),
    (["EVENTS", "--agents", "4", "--chunks", "5", "--runs", "2"], ["events_per_s"]),
    (["PENDING", "--pending", "25"], ["kb_per_pending", "s_to_all_pending"]),
    (["STUB"], ["stub_us_per_call"]),
    (["W2", "--fanout", "5", "--runs", "1", "--backend", "trio"], ["us_per_call"]),
]


@pytest.mark.parametrize(("args", "keys"), HPD_CASES, ids=[" ".join(a) for a, _ in HPD_CASES])
def test_every_workload_runs_and_reports(args: list[str], keys: list[str]) -> None:
    _check(_run(HPD_BENCH, args), "hpd_agent", args, keys)


def test_the_events_workload_counts_every_streamed_piece() -> None:
    metrics = _run(HPD_BENCH, ["EVENTS", "--agents", "3", "--chunks", "4", "--runs", "1"])[
        "metrics"
    ]
    # per sub-agent: 4 text pieces, AgentStarted, AgentFinished, and its tool call's
    # ToolCallStarted/Finished at the root; plus the root's own 5 run/agent/text events
    assert metrics["events_per_run"] == 3 * (4 + 2 + 2) + 5


# ----------------------------------------------------------------------------- durable
DURABLE_CASES: list[tuple[list[str], list[str]]] = [
    (["W1", "--turns", "4", "--runs", "2"], ["us_per_turn"]),
    (["W1", "--turns", "4", "--runs", "2", "--variant", "journal"], ["journal_us_per_turn"]),
    (["W4", "--depth", "2", "--repeats", "2"], ["ms_round_trip_full", "ms_answer_to_complete"]),
    (["W4", "--depth", "1", "--repeats", "2"], ["ms_round_trip_full", "ms_answer_to_complete"]),
    (["W5", "--concurrency", "10", "--w5-turns", "2"], ["total_s", "kb_per_run"]),
]
DURABLE_IDS = [" ".join(a) for a, _ in DURABLE_CASES]


def _durable(store: str, args: list[str], keys: list[str], dsn: str | None) -> None:
    extra = ["--store", store] + (["--dsn", dsn] if dsn else [])
    result = _run(HPD_BENCH, [*args, *extra])
    _check(result, "hpd_agent", args, keys)
    assert result["metrics"]["store"] == store
    if "journal" in args:
        metrics = result["metrics"]
        assert _number(metrics["us_per_turn_in_memory"]) > 0
        assert _number(metrics["us_per_turn"]) > 0


@pytest.mark.parametrize(("args", "keys"), DURABLE_CASES, ids=DURABLE_IDS)
def test_durable_workloads_run_on_sqlite(args: list[str], keys: list[str]) -> None:
    _durable("sqlite", args, keys, None)


@pytest.mark.parametrize(("args", "keys"), DURABLE_CASES, ids=DURABLE_IDS)
def test_durable_workloads_run_on_postgres(
    args: list[str],
    keys: list[str],
    postgres_dsn: str,  # noqa: F811
) -> None:
    _durable("postgres", args, keys, postgres_dsn)


def test_the_legacy_store_variant_journals_in_sqlite() -> None:
    result = _run(HPD_BENCH, ["W4", "--variant", "store", "--depth", "2", "--repeats", "2"])
    assert result["metrics"]["store"] == "sqlite"
    assert _number(result["metrics"]["ms_answer_to_complete"]) > 0


def test_a_store_for_a_workload_without_one_is_refused_clearly() -> None:
    proc = subprocess.run(
        [sys.executable, str(HPD_BENCH), "W2", "--store", "sqlite"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode != 0
    assert "--store is for W1, W4 and W5" in proc.stderr
    assert "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- the peers
W4 = ["ms_round_trip_full", "ms_answer_to_complete"]
PEER_CASES: list[tuple[str, list[str], list[str]]] = [
    *(
        (fw, args, keys)
        for fw in PEERS
        for args, keys in [
            (["W1", "--turns", "4", "--runs", "2"], ["us_per_turn"]),
            (["W2", "--fanout", "5", "--runs", "2"], ["total_ms", "us_per_call"]),
            (["W3", "--repeats", "2"], ["ms_per_run"]),
            (["W4", "--depth", "1", "--variant", "base", "--repeats", "2"], ["ms_round_trip_full"]),
            (["W5", "--concurrency", "5", "--w5-turns", "2"], ["total_s", "peak_rss_mb"]),
            (["STUB"], ["stub_us_per_call"]),
        ]
    ),
    ("openai-agents", ["W4", "--depth", "2", "--repeats", "2"], W4),
    ("openai-agents", ["W4", "--depth", "1", "--repeats", "2"], W4),
    ("openai-agents", ["W5", "--concurrency", "5", "--per-run-agent"], ["total_s"]),
    ("pydantic-ai", ["W4", "--depth", "2", "--variant", "inline", "--repeats", "2"], W4),
    ("pydantic-ai", ["W4", "--depth", "1", "--variant", "deferred", "--repeats", "2"], W4),
    ("langgraph", ["W4", "--depth", "2", "--repeats", "2"], W4),
    ("langgraph", ["W4", "--depth", "1", "--repeats", "2"], W4),
    ("langgraph", ["W1", "--turns", "4", "--runs", "2", "--checkpointer"], ["us_per_turn"]),
]


@pytest.mark.parametrize(
    ("framework", "args", "keys"),
    PEER_CASES,
    ids=[f"{fw} {' '.join(a)}" for fw, a, _ in PEER_CASES],
)
def test_every_peer_workload_runs_and_reports(
    framework: str, args: list[str], keys: list[str]
) -> None:
    script, module = PEERS[framework]
    _needs(module, framework)
    _check(_run(BENCHMARKS / "peers" / script, args), framework, args, keys)


LANGGRAPH_DURABLE = [
    (["W1", "--turns", "4", "--runs", "2"], ["us_per_turn"]),
    (["W1", "--turns", "4", "--runs", "2", "--variant", "journal"], ["journal_us_per_turn"]),
    (["W4", "--depth", "2", "--repeats", "2"], W4),
    (["W4", "--depth", "1", "--repeats", "2"], W4),
    (["W5", "--concurrency", "5", "--w5-turns", "2"], ["total_s"]),
]


@pytest.mark.parametrize(
    ("args", "keys"), LANGGRAPH_DURABLE, ids=[" ".join(a) for a, _ in LANGGRAPH_DURABLE]
)
def test_langgraph_runs_durable_on_sqlite(args: list[str], keys: list[str]) -> None:
    _needs("langgraph.checkpoint.sqlite", "langgraph-checkpoint-sqlite")
    result = _run(BENCHMARKS / "peers" / "bench_langgraph.py", [*args, "--checkpointer", "sqlite"])
    _check(result, "langgraph", args, keys)
    if args[0] in ("W1", "W4"):
        sync = [*args, "--checkpointer", "sqlite-sync"]
        _check(_run(BENCHMARKS / "peers" / "bench_langgraph.py", sync), "langgraph", args, keys)


@pytest.mark.parametrize(
    ("args", "keys"), LANGGRAPH_DURABLE, ids=[" ".join(a) for a, _ in LANGGRAPH_DURABLE]
)
def test_langgraph_runs_durable_on_postgres(
    args: list[str],
    keys: list[str],
    postgres_dsn: str,  # noqa: F811
) -> None:
    _needs("langgraph.checkpoint.postgres", "langgraph-checkpoint-postgres")
    extra = ["--checkpointer", "postgres", "--dsn", postgres_dsn]
    result = _run(BENCHMARKS / "peers" / "bench_langgraph.py", [*args, *extra])
    _check(result, "langgraph", args, keys)


# ----------------------------------------------------------------------------- the runner
def test_the_runner_prints_one_table_and_writes_its_results(tmp_path: Path) -> None:
    out = tmp_path / "results"
    cmd = [sys.executable, str(BENCHMARKS / "run.py"), "--quick", "--only", "W3"]
    cmd += ["--frameworks", "hpd_agent", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    row = next(ln for ln in proc.stdout.splitlines() if ln.startswith("| W3 | ms_per_run |"))
    ours = float(row.split("|")[3].split()[0])
    assert ours > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["summary"]["W3"]["hpd_agent"]["ms_per_run"]["n_processes"] == 1
    assert len((out / "raw.jsonl").read_text().splitlines()) == 1
    # the same table again from the raw results, without running anything
    again = [*cmd[:2], "--only", "W3", "--tabulate", str(out / "raw.jsonl")]
    again += ["--out", str(tmp_path / "again")]
    proc = subprocess.run(again, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert row in proc.stdout.splitlines()


def test_the_durable_ratio_bench_prints_a_ratio_per_store_and_a_profile() -> None:
    script = BENCHMARKS / "bench_durable_ratio.py"
    args = ["--rounds", "2", "--runs", "5", "--turns", "2", "--stores", "memory,sqlite"]
    proc = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120,
        cwd=REPO, env={**os.environ},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("W5 5 runs x 2 turns, 2 rounds")
    assert [ln.split()[0] for ln in lines[1:]] == ["in", "MemoryStore", "SQLite"]
    assert all("ratio wall" in ln and "cpu" in ln for ln in lines[2:])
    # Every function listed (no ranking: on a loaded machine gc.collect may outrank SQLite).
    profile = ["--profile", "sqlite", "--runs", "5", "--turns", "2", "--top", "5000"]
    proc = subprocess.run(
        [sys.executable, str(script), *profile], capture_output=True, text=True, timeout=120,
        cwd=REPO, env={**os.environ},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "top 5000 by tottime" in proc.stdout and "top 5000 by cumtime" in proc.stdout
    assert "execute" in proc.stdout  # the SQLite statements are in the profile


def test_bench_against_runs_both_trees_alternately_and_removes_the_worktree() -> None:
    """``bench_against.py REF``: the same workloads in a worktree of REF and here, the
    figures of each side kept, the worktree gone after."""
    before = subprocess.run(["git", "-C", str(REPO), "worktree", "list"], capture_output=True)
    result = _run(
        BENCHMARKS / "bench_against.py",
        ["HEAD", "--quick", "--rounds", "2", "--workloads", "W1,W5"],
        timeout=600,
    )
    assert result["ref"] == "HEAD" and result["rounds"] == 2
    for workload in ("W1", "W5"):
        figures = result[workload]
        assert len(figures["ref_runs"]) == 2 and len(figures["now_runs"]) == 2
        assert all(x > 0 for x in figures["ref_runs"] + figures["now_runs"])
        assert figures["ref"] == statistics.median(figures["ref_runs"])
        assert figures["change_pct"] == pytest.approx((figures["now"] / figures["ref"] - 1) * 100)
    after = subprocess.run(["git", "-C", str(REPO), "worktree", "list"], capture_output=True)
    assert after.stdout == before.stdout
