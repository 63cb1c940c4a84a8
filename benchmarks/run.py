"""Run hpd_agent's bench and the peers' benches interleaved, and print one comparison table.

    python benchmarks/run.py --rounds 3        # the full comparison (~15 min on 2 cores)
    python benchmarks/run.py --quick           # under two minutes: fewer repeats, 1 round

What it does:

1. Sets up the peers (OpenAI Agents SDK, pydantic-ai, LangGraph) in their own virtualenv,
   pinned by ``../shared/bench/peers/requirements.txt``, under ``benchmarks/.peers-venv``
   (reused while the requirements file is unchanged).
2. Runs every (framework, workload) job in a fresh process; inside each round the jobs go
   back to back in a new random order per job, so every framework sees the same mix of the
   VM's fast and slow phases (the peers' ``run_all.py`` scheme, whose job table it reuses).
3. Normalises each figure by its process's calibration kernel (``common.calibrate``) to the
   peers' reference speed, takes medians over processes, and prints hpd_agent's figures,
   every peer's, the best peer's, the ratio hpd_agent / best peer and the target.

Results also go to ``--out`` (default ``benchmarks/results/``): ``raw.jsonl``,
``summary.json`` and ``summary.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PEERS_DIR = Path(os.environ.get("HPD_BENCH_PEERS", REPO.parent / "shared" / "bench" / "peers"))
VENV = Path(os.environ.get("HPD_BENCH_PEERS_VENV", HERE / ".peers-venv"))
HPD = "hpd_agent"
HPD_BENCH = HERE / "bench_hpd_agent.py"


# ----------------------------------------------------------------------------- peers' harness
def load_run_all() -> ModuleType:
    """The peers' ``run_all`` module: job table, sizes, reference calibration."""
    if not (PEERS_DIR / "run_all.py").is_file():
        raise SystemExit(
            f"peers not found at {PEERS_DIR} (set HPD_BENCH_PEERS to the directory with "
            "run_all.py, common.py and requirements.txt)"
        )
    sys.path.insert(0, str(PEERS_DIR))
    import run_all

    return run_all


def venv_python() -> Path:
    return VENV / "bin" / "python"


def ensure_peers_venv() -> Path:
    """Create (or reuse) the peers' virtualenv, pinned by their requirements.txt."""
    req = PEERS_DIR / "requirements.txt"
    digest = hashlib.sha256(req.read_bytes()).hexdigest()
    stamp = VENV / "requirements.sha256"
    py = venv_python()
    if py.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return py
    print(f"setting up the peers' virtualenv in {VENV} (pinned by {req}) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(req)],
        check=True,
    )
    stamp.write_text(digest + "\n")
    return py


# ----------------------------------------------------------------------------- jobs
@dataclass
class Job:
    label: str
    args: dict[str, list[str]]  # framework -> bench arguments
    keys: list[str]  # metrics to summarise
    quick: bool = True  # part of --quick


def _hpd_args() -> dict[str, list[str]]:
    """hpd_agent's arguments for the peers' job labels (same sizes, same semantics)."""
    return {
        "W1": ["W1", "--turns", "200", "--runs", "3"],
        "W1-short(20 turns)": ["W1", "--turns", "20", "--runs", "10"],
        "W2": ["W2", "--fanout", "200", "--runs", "5"],
        "W3": ["W3", "--repeats", "200"],
        "W4 depth2 HITL": ["W4", "--depth", "2", "--variant", "hitl"],
        "W4 depth1 HITL": ["W4", "--depth", "1", "--variant", "hitl"],
        "W4 depth2 no-HITL baseline": ["W4", "--depth", "2", "--variant", "base"],
        "W5": ["W5", "--concurrency", "1000", "--w5-turns", "5"],
        "STUB": ["STUB"],
    }


HPD_ONLY = [
    Job(
        "W4 depth2 HITL durable(SQLite)",
        {HPD: ["W4", "--depth", "2", "--variant", "store"]},
        ["ms_round_trip_full", "ms_answer_to_complete"],
    ),
    Job(
        "EVENTS 100 sub-agents streaming",
        {HPD: ["EVENTS", "--agents", "100", "--chunks", "100", "--runs", "5"]},
        ["events_per_s", "us_per_event"],
    ),
    Job(
        "PENDING 10k questions (2k with --quick)",
        {HPD: ["PENDING", "--pending", "10000"]},
        ["kb_per_pending", "s_to_all_pending", "s_answer_all_to_complete"],
    ),
]

# Peer jobs that are another way to do the same thing: the best peer is taken over these too.
POOLS = {
    "W4 depth1 HITL": ["W4 depth1 HITL", "W4 depth1 inline(RequestInput)"],
    "W5": ["W5", "W5 agent.clone() per run"],
}
NOT_IN_QUICK = {"W1+checkpointer", "W5 agent.clone() per run"}
DERIVED = {"W5": "kb_per_run"}  # (peak - before) RSS per in-flight run, for every framework


def build_jobs(run_all: ModuleType) -> list[Job]:
    ours = _hpd_args()
    jobs: list[Job] = []
    for label, per_fw, keys in run_all.JOBS:
        args = {fw: list(a) for fw, a in per_fw.items()}
        if label in ours:
            args[HPD] = ours[label]
        extra = [DERIVED[label]] if label in DERIVED else []
        jobs.append(Job(label, args, [*keys, *extra], quick=label not in NOT_IN_QUICK))
    return [*jobs, *HPD_ONLY]


def quick_args(args: list[str], *, keep_sizes: bool = False) -> list[str]:
    """Fewer repeats (and 100 concurrent runs for W5), same workload shapes.

    ``keep_sizes`` keeps W5's concurrency (to compare with recorded full-size results).
    """
    out = list(args)

    def cap(flag: str, value: int, default: int | None = None) -> None:
        if flag in out:
            i = out.index(flag) + 1
            out[i] = str(min(int(out[i]), value))
        elif default is not None:
            out.extend([flag, str(min(default, value))])

    cap("--runs", 2)
    if not keep_sizes:
        cap("--concurrency", 100)
        cap("--pending", 2000)
    if out[0] in ("W3", "W4"):
        cap("--repeats", 30, default=200)
    return out


# ----------------------------------------------------------------------------- running
def run_one(
    fw: str,
    args: list[str],
    peer_py: Path | None,
    hpd_py: str,
    timeout: int,
    scripts: dict[str, str],
) -> dict[str, Any]:
    if fw == HPD:
        cmd = [hpd_py, str(HPD_BENCH), *args]
        cwd = REPO
    else:
        assert peer_py is not None
        cmd = [str(peer_py), str(PEERS_DIR / scripts[fw]), *args]
        cwd = PEERS_DIR
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return {"framework": fw, "cmd": cmd, "error": f"timed out after {timeout}s", "rc": None}
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT_JSON ")), None)
    if p.returncode != 0 or line is None:
        return {
            "framework": fw,
            "cmd": cmd,
            "error": (p.stderr or p.stdout)[-3000:],
            "rc": p.returncode,
        }
    res: dict[str, Any] = json.loads(line[len("RESULT_JSON ") :])
    res["cmd"] = cmd
    res["wall_s"] = time.time() - t0
    return res


def metric(res: dict[str, Any], key: str) -> float | None:
    m = res["metrics"]
    if key == "kb_per_run" and key not in m:
        return (m["peak_rss_mb"] - m["rss_before_mb"]) * 1024 / m["concurrency"]
    v = m.get(key)
    if isinstance(v, dict):
        return float(v["median"])  # pyright: ignore[reportUnknownArgumentType]
    return None if v is None else float(v)


def is_memory(key: str) -> bool:
    return key.endswith("_mb") or key.startswith("kb_")


# ----------------------------------------------------------------------------- aggregation
@dataclass
class Cell:
    raw: list[float] = field(default_factory=list[float])
    norm: list[float] = field(default_factory=list[float])

    def summary(self) -> dict[str, Any]:
        return {
            "median": statistics.median(self.raw),
            "min": min(self.raw),
            "max": max(self.raw),
            "norm_median": statistics.median(self.norm),
            "norm_min": min(self.norm),
            "norm_max": max(self.norm),
            "n_processes": len(self.raw),
        }


def aggregate(rows: list[dict[str, Any]], jobs: list[Job], ref_ms: float) -> dict[str, Any]:
    keys = {j.label: j.keys for j in jobs}
    cells: dict[str, dict[str, dict[str, Cell]]] = {}
    for r in rows:
        if "error" in r:
            continue
        calibs = [c for c in (r.get("calib_before_ms"), r.get("calib_after_ms")) if c]
        calib = statistics.fmean(calibs)
        for key in keys[r["job"]]:
            v = metric(r, key)
            if v is None:
                continue
            c = (
                cells.setdefault(r["job"], {})
                .setdefault(r["framework"], {})
                .setdefault(key, Cell())
            )
            c.raw.append(v)
            if is_memory(key):
                c.norm.append(v)  # memory does not depend on CPU speed
            elif key.endswith("_per_s"):
                c.norm.append(v * calib / ref_ms)  # a rate: faster machine, higher value
            else:
                c.norm.append(v * ref_ms / calib)
    return {
        job: {fw: {k: c.summary() for k, c in ks.items()} for fw, ks in fws.items()}
        for job, fws in cells.items()
    }


# ----------------------------------------------------------------------------- the table
TARGETS: dict[tuple[str, str], float] = {
    ("W1", "us_per_turn"): 0.05,
    ("W2", "us_per_call"): 0.1,
    ("W2", "total_ms"): 0.1,
    ("W3", "ms_per_run"): 0.05,
    ("W4 depth2 HITL", "ms_round_trip_full"): 0.05,
    ("W4 depth2 HITL", "ms_answer_to_complete"): 0.05,
    ("W4 depth1 HITL", "ms_round_trip_full"): 0.05,
    ("W4 depth1 HITL", "ms_answer_to_complete"): 0.05,
    ("W5", "total_s"): 0.05,
}
ABSOLUTE_TARGETS = {("W5", "kb_per_run"): 20.0}  # KB per in-flight run


def fmt(x: float) -> str:
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def best_peer(
    summary: dict[str, Any], job: str, key: str, peers: Sequence[str]
) -> tuple[str, float] | None:
    best: tuple[str, float] | None = None
    higher_is_better = key.endswith("_per_s")
    for label in POOLS.get(job, [job]):
        for fw in peers:
            s = summary.get(label, {}).get(fw, {}).get(key)
            if s is None:
                continue
            name = fw if label == job else f"{fw} ({label.split(' ', 1)[-1]})"
            v = s["norm_median"]
            if best is None or (v > best[1] if higher_is_better else v < best[1]):
                best = (name, v)
    return best


def table(
    summary: dict[str, Any], jobs: list[Job], peers: Sequence[str], peer_source: str, ran: set[str]
) -> str:
    head = ["job", "metric", "hpd_agent", *peers, "best peer", "ratio", "target", ""]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    verdicts: list[str] = []
    for job in jobs:
        if job.label not in ran:
            continue
        for key in job.keys:
            ours = summary.get(job.label, {}).get(HPD, {}).get(key)
            peer_cells = []
            for fw in peers:
                s = summary.get(job.label, {}).get(fw, {}).get(key)
                peer_cells.append("" if s is None else fmt(s["norm_median"]))
            if ours is None and not any(peer_cells) and HPD not in job.args:
                continue
            if HPD not in job.args:
                ours_cell = "-"  # a peer-only variant (see POOLS)
            elif ours is None:
                ours_cell = "n/a"
            else:
                ours_cell = fmt(ours["norm_median"])
                if ours["n_processes"] > 1:
                    ours_cell += f" [{fmt(ours['norm_min'])}-{fmt(ours['norm_max'])}]"
            best = best_peer(summary, job.label, key, peers)
            ratio = target_cell = verdict = ""
            if ours is not None and best is not None and best[1] > 0:
                r = ours["norm_median"] / best[1]
                ratio = f"{r:.3f}"
                t = TARGETS.get((job.label, key))
                if t is not None:
                    target_cell = f"<= {t:g}"
                    verdict = "met" if r <= t else "NOT met"
            a = ABSOLUTE_TARGETS.get((job.label, key))
            if a is not None and ours is not None:
                target_cell = f"<= {a:g} KB"
                verdict = "met" if ours["norm_median"] <= a else "NOT met"
            if verdict:
                verdicts.append(f"{job.label} {key}: {verdict}")
            best_cell = "" if best is None else f"{fmt(best[1])} ({best[0]})"
            lines.append(
                f"| {job.label} | {key} | {ours_cell} | "
                + " | ".join(peer_cells)
                + f" | {best_cell} | {ratio} | {target_cell} | {verdict} |"
            )
    flat = flatness(summary)
    notes = [
        "",
        "Normalised medians over processes (each process's own median of its repeats), scaled "
        "by the calibration kernel to the peers' reference speed; memory is not normalised. "
        "Lower is better except events_per_s. [min-max] over processes. "
        f"Peers: {peer_source}.",
    ]
    if flat is not None:
        ok = "met" if flat <= 1.2 else "NOT met"
        notes.append(
            f"W1 per-turn cost, 200 turns / 20 turns (hpd_agent): {flat:.2f} (target <= 1.2: {ok})"
        )
    return "\n".join([*lines, *notes])


def flatness(summary: dict[str, Any]) -> float | None:
    try:
        long = summary["W1"][HPD]["us_per_turn"]["norm_median"]
        short = summary["W1-short(20 turns)"][HPD]["us_per_turn"]["norm_median"]
    except KeyError:
        return None
    return long / short


# ----------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="hpd_agent vs peers, interleaved, one table")
    ap.add_argument("--rounds", type=int, default=None, help="default 3 (1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats; under two minutes")
    ap.add_argument("--only", default="", help="comma-separated job-label prefixes")
    ap.add_argument("--frameworks", default="", help="comma-separated (default: all)")
    ap.add_argument(
        "--recorded-peers",
        action="store_true",
        help="do not run the peers: compare with their recorded results/summary.json "
        "(labelled as such in the table; a different run, so a weaker comparison)",
    )
    ap.add_argument("--hpd-python", default=sys.executable, help="interpreter for hpd_agent")
    ap.add_argument("--hpd-backend", choices=("asyncio", "trio"), default="asyncio")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args(argv)
    rounds = a.rounds if a.rounds is not None else (1 if a.quick else 3)
    run_all = load_run_all()
    ref_ms = float(run_all.CALIB_REF_MS)
    jobs = [j for j in build_jobs(run_all) if j.quick or not a.quick]
    only = [s for s in a.only.split(",") if s]
    if only:
        jobs = [j for j in jobs if any(j.label.startswith(o) for o in only)]
    all_fws = [HPD, *run_all.FRAMEWORKS]
    fws = [f for f in a.frameworks.split(",") if f] or all_fws
    peers = [f for f in run_all.FRAMEWORKS if f in fws]
    peer_py = None
    if a.recorded_peers:
        fws = [HPD]
    elif peers:
        peer_py = ensure_peers_venv()
    outdir = Path(a.out)
    outdir.mkdir(parents=True, exist_ok=True)
    raw_path = outdir / "raw.jsonl"
    raw_path.write_text("")
    rng = random.Random(a.seed)
    rows: list[dict[str, Any]] = []
    versions: dict[str, Any] = {}
    started = time.time()
    for rnd in range(rounds):
        for job in jobs:
            if job.label == "STUB" and rnd > 0:
                continue
            order = [f for f in job.args if f in fws]
            rng.shuffle(order)
            for fw in order:
                args = (
                    quick_args(job.args[fw], keep_sizes=a.recorded_peers)
                    if a.quick
                    else job.args[fw]
                )
                if fw == HPD and a.hpd_backend != "asyncio":
                    args = [*args, "--backend", a.hpd_backend]
                res = run_one(fw, args, peer_py, a.hpd_python, a.timeout, run_all.FRAMEWORKS)
                res["job"], res["round"] = job.label, rnd
                rows.append(res)
                with raw_path.open("a") as f:
                    f.write(json.dumps(res) + "\n")
                if "error" in res:
                    print(
                        f"[{rnd}] {job.label:34s} {fw:14s} ERROR rc={res.get('rc')}: "
                        f"{res['error'][-600:]}",
                        flush=True,
                    )
                    continue
                versions.update({k: v for k, v in res.get("versions", {}).items() if v})
                vals = (
                    ", ".join(
                        f"{k}={fmt(v)}" for k in job.keys if (v := metric(res, k)) is not None
                    )
                    or "n/a"
                )
                print(
                    f"[{rnd}] {job.label:34s} {fw:14s} {vals}  calib="
                    f"{res['calib_before_ms']:.2f}/{res['calib_after_ms']:.2f}  "
                    f"net={len(res.get('net_attempts', []))}  ({res['wall_s']:.1f}s)",
                    flush=True,
                )
    summary = aggregate(rows, jobs, ref_ms)
    peer_source = f"run live in this session ({rounds} round(s), interleaved)"
    if a.recorded_peers:
        recorded = json.loads((PEERS_DIR / "results" / "summary.json").read_text())
        for job, per_fw in recorded["summary"].items():
            for fw, keys in per_fw.items():
                keys = dict(keys)
                if "peak_rss_mb" in keys and "rss_before_mb" in keys:
                    # the recorded runs had 1000 in flight (run_all's W5 size)
                    kb = (keys["peak_rss_mb"]["median"] - keys["rss_before_mb"]["median"]) * 1.024
                    keys["kb_per_run"] = {"median": kb, "norm_median": kb, "n_processes": 1}
                summary.setdefault(job, {})[fw] = keys
        versions.update(recorded.get("versions", {}))
        peer_source = (
            f"RECORDED results from {PEERS_DIR / 'results' / 'summary.json'}, "
            "not this run (different noise mix)"
        )
    versions["python"] = sys.version.split()[0]
    ran = {r["job"] for r in rows}
    md = table(summary, jobs, peers, peer_source, ran)
    md += "\n\nversions: " + json.dumps(versions, sort_keys=True)
    md += f"\nwall time: {time.time() - started:.0f} s"
    (outdir / "summary.json").write_text(
        json.dumps(
            {
                "summary": summary,
                "versions": versions,
                "calib_ref_ms": ref_ms,
                "rounds": rounds,
                "quick": a.quick,
                "peer_source": peer_source,
            },
            indent=1,
        )
    )
    (outdir / "summary.md").write_text(md + "\n")
    print()
    print(md)
    errors = [r for r in rows if "error" in r]
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
