"""W1-W5 in memory, this checkout against an earlier commit, alternately, one harness.

    python benchmarks/bench_against.py REF [--workloads W1,W2,W3,W4,W5] [--rounds 8] [--quick]

REF is any commit (``2330ed9^``: just before invocation ids). A git worktree of REF is made
in a temporary folder and removed at the end; this checkout's ``bench_hpd_agent.py`` and
its harness (``peers/_common.py``) are copied into it, so both trees run the same workload
code and only the framework differs. Each round runs every workload once in each tree, in
alternating order (ABBA), each in a fresh process; the figure per workload is the median
over the rounds of each process's own median: W1 microseconds per turn, W2 per parallel
call, W3 milliseconds per nested run, W4 per question round trip, W5 CPU seconds for 1,000
concurrent runs. Medians and the change are printed, then one ``RESULT_JSON`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = "benchmarks/bench_hpd_agent.py"
COMMON = "benchmarks/peers/_common.py"

METRIC = {"W1": "us_per_turn", "W2": "us_per_call", "W3": "ms_per_run", "W4": "ms_round_trip_full"}
"""The figure read per workload (W5: the process's CPU seconds, ``cpu_s``)."""

SIZES = {
    "W1": (["--runs", "5"], ["--turns", "5", "--runs", "1"]),
    "W2": (["--runs", "5"], ["--fanout", "5", "--runs", "1"]),
    "W3": (["--repeats", "200"], ["--repeats", "2"]),
    "W4": (["--repeats", "200"], ["--repeats", "2"]),
    "W5": (["--concurrency", "1000"], ["--concurrency", "10"]),
}
"""Each workload's arguments: (a measurement, ``--quick``)."""


@contextmanager
def earlier_tree(ref: str) -> Iterator[Path]:
    """A worktree of ``ref`` holding this checkout's bench and harness (removed after)."""
    folder = Path(tempfile.mkdtemp(prefix="bench-against-"))
    tree = folder / "tree"
    git = ["git", "-C", str(REPO)]
    subprocess.run([*git, "worktree", "add", "--detach", "-q", str(tree), ref], check=True)
    try:
        for name in (BENCH, COMMON):
            shutil.copyfile(REPO / name, tree / name)
        yield tree
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def figure(tree: Path, workload: str, args: Sequence[str]) -> float:
    """One process of ``workload`` in ``tree``: its figure (see ``METRIC``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the tree's own package
    done = subprocess.run(
        [sys.executable, str(tree / BENCH), workload, *args],
        cwd=tree, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{workload} failed in {tree}:\n{done.stderr[-2000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT_JSON "))
    metrics = json.loads(line.removeprefix("RESULT_JSON "))["metrics"]
    if workload == "W5":
        return float(metrics["cpu_s"])
    return float(metrics[METRIC[workload]]["median"])


def compare(ref_tree: Path, workloads: Sequence[str], rounds: int, quick: bool) -> dict[str, Any]:
    """Every workload in both trees, ``rounds`` times, alternately; medians and changes."""
    seen: dict[str, dict[str, list[float]]] = {w: {"ref": [], "now": []} for w in workloads}
    trees = {"ref": ref_tree, "now": REPO}
    for r in range(rounds):
        order = ("ref", "now") if r % 2 == 0 else ("now", "ref")
        for workload in workloads:
            args = SIZES[workload][1 if quick else 0]
            for side in order:
                seen[workload][side].append(figure(trees[side], workload, args))
    result: dict[str, Any] = {}
    for workload, sides in seen.items():
        ref, now = statistics.median(sides["ref"]), statistics.median(sides["now"])
        result[workload] = {
            "ref": ref,
            "now": now,
            "change_pct": (now / ref - 1) * 100,
            "ref_runs": sides["ref"],
            "now_runs": sides["now"],
        }
    return result


def main(argv: Sequence[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ref", help="the earlier commit (e.g. 2330ed9^)")
    p.add_argument("--workloads", default="W1,W2,W3,W4,W5")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    args = p.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in workloads if w not in SIZES]
    if unknown:
        p.error(f"unknown workloads {unknown}: choose from {sorted(SIZES)}")
    with earlier_tree(args.ref) as tree:
        result = compare(tree, workloads, args.rounds, args.quick)
    print(f"{'workload':<9}{'figure':<22}{args.ref:>14}{'now':>14}{'change':>10}")
    for workload, r in result.items():
        name = METRIC.get(workload, "cpu_s (1,000 runs)")
        print(f"{workload:<9}{name:<22}{r['ref']:>14.4f}{r['now']:>14.4f}{r['change_pct']:>+9.1f}%")
    print("RESULT_JSON " + json.dumps({"ref": args.ref, "rounds": args.rounds, **result}))


if __name__ == "__main__":
    main(sys.argv[1:])
