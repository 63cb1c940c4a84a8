"""Smoke test of ``benchmarks/bench_hpd_agent.py``: every workload, tiny sizes.

Behaviour, not timing: each workload asserts its own outcome (outputs, result order, every
question answered, ...) and exits non-zero if one fails; here each must print one parsable
``RESULT_JSON`` line with its metrics and no network attempt. The bench imports the peers'
harness (``common.py`` in ``../shared/bench/peers``, or ``$HPD_BENCH_PEERS``); without it
there is nothing to run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "bench_hpd_agent.py"
PEERS = Path(os.environ.get("HPD_BENCH_PEERS", REPO.parent / "shared" / "bench" / "peers"))

pytestmark = pytest.mark.skipif(
    not (PEERS / "common.py").is_file(), reason=f"peer harness not found at {PEERS}"
)

HAS_STORE = importlib.util.find_spec("hpd_agent.store") is not None

CASES: list[tuple[list[str], list[str]]] = [
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


def _run(args: list[str]) -> dict[str, Any]:
    env = {**os.environ, "HPD_BENCH_PEERS": str(PEERS)}
    proc = subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT_JSON ")]
    assert len(lines) == 1, proc.stdout[-2000:]
    return json.loads(lines[0][len("RESULT_JSON ") :])


@pytest.mark.parametrize(("args", "keys"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_every_workload_runs_and_reports(args: list[str], keys: list[str]) -> None:
    result = _run(args)
    assert result["framework"] == "hpd_agent"
    assert result["workload"] == args[0]
    assert result["net_attempts"] == []
    assert result["calib_before_ms"] > 0 and result["calib_after_ms"] > 0
    for key in keys:
        value = result["metrics"][key]
        number = value["median"] if isinstance(value, dict) else value
        assert isinstance(number, float | int) and number >= 0, (key, value)


def test_the_events_workload_counts_every_streamed_piece() -> None:
    metrics = _run(["EVENTS", "--agents", "3", "--chunks", "4", "--runs", "1"])["metrics"]
    # per sub-agent: 4 text pieces, AgentStarted, AgentFinished, and its tool call's
    # ToolCallStarted/Finished at the root; plus the root's own 5 run/agent/text events
    assert metrics["events_per_run"] == 3 * (4 + 2 + 2) + 5


def test_the_durable_variant_runs_with_the_store_or_says_it_is_absent() -> None:
    metrics = _run(["W4", "--variant", "store", "--depth", "2", "--repeats", "2"])["metrics"]
    assert metrics["available"] is HAS_STORE
    if HAS_STORE:
        assert metrics["ms_answer_to_complete"]["median"] > 0
    else:
        assert metrics["ms_round_trip_full"] is None
        assert "n/a" in metrics["mechanism"]
