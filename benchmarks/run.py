"""Run hpd_agent's bench and the peers' benches interleaved, and print one comparison table.

    python benchmarks/run.py --rounds 3        # the full comparison (~10 min on 2 cores)
    python benchmarks/run.py --quick           # a few minutes: fewer repeats, 1 round
    python benchmarks/run.py --durable         # the durable path: stores vs checkpointers

What it does:

1. Finds the peers (OpenAI Agents SDK, pydantic-ai, LangGraph and LangGraph's SQLite and
   Postgres checkpointers), pinned by the ``bench`` extra in ``pyproject.toml``: in this
   interpreter when ``pip install -e ".[bench]"`` put them here, else in a virtualenv it
   creates once under ``benchmarks/.peers-venv`` from the same pins (``--peers-python``
   chooses).
2. Runs every (framework, job) of ``benchmarks/peers/jobs.py`` in a fresh process: the
   benches are ``benchmarks/bench_hpd_agent.py`` and ``benchmarks/peers/bench_*.py``, with one
   command line and one ``RESULT_JSON`` line. Inside each round the jobs go back to back in a
   new random order per job, so every framework sees the same mix of the VM's fast and slow
   phases. ``--durable`` first starts a private PostgreSQL server on 127.0.0.1
   (``benchmarks/peers/_postgres.py``) that every PostgreSQL job uses, each process in a
   database of its own.
3. Normalises each figure by its process's calibration kernel to the reference speed
   (``jobs.CALIB_REF_MS``), takes medians over processes, and prints hpd_agent's figures,
   every peer's, the best peer's, the ratio hpd_agent / best peer and the target.

Results also go to ``--out`` (default ``benchmarks/results/``): ``raw.jsonl``,
``summary.json`` and ``summary.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PEERS_DIR = HERE / "peers"
VENV = HERE / ".peers-venv"
HPD_BENCH = HERE / "bench_hpd_agent.py"
sys.path.insert(0, str(PEERS_DIR))

from jobs import (  # noqa: E402
    ABSOLUTE_TARGETS,
    CALIB_REF_MS,
    HPD,
    IN_MEMORY,
    PEERS,
    POOLS,
    Job,
    durable_jobs,
)


# ----------------------------------------------------------------------------- the peers
def bench_requirements() -> list[str]:
    """The ``bench`` extra of ``pyproject.toml``: the peers and their pinned versions."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project["optional-dependencies"]["bench"])


def peers_importable(python: str) -> bool:
    """Whether ``python`` has every package of the ``bench`` extra at its pinned version."""
    check = (
        "import sys\nfrom importlib.metadata import version, PackageNotFoundError\n"
        "for pin in sys.argv[1:]:\n"
        "    name, _, want = pin.partition('==')\n"
        "    if not want: continue\n"
        "    try: got = version(name)\n"
        "    except PackageNotFoundError: sys.exit(1)\n"
        "    if got != want: sys.exit(1)\n"
    )
    done = subprocess.run([python, "-c", check, *bench_requirements()], capture_output=True)
    return done.returncode == 0


def ensure_peers_venv() -> str:
    """Create (or reuse) ``benchmarks/.peers-venv`` with the ``bench`` extra's pins."""
    pins = bench_requirements()
    digest = hashlib.sha256("\n".join(pins).encode()).hexdigest()
    stamp = VENV / "bench-extra.sha256"
    py = VENV / "bin" / "python"
    if py.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return str(py)
    print(f"setting up the peers' virtualenv in {VENV} (the bench extra's pins) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, *pins], check=True)
    stamp.write_text(digest + "\n")
    return str(py)


def peer_python(choice: str) -> str:
    """The interpreter for the peers' benches: ``auto``, ``current``, ``venv`` or a path."""
    if choice == "venv":
        return ensure_peers_venv()
    if choice == "current":
        if not peers_importable(sys.executable):
            raise SystemExit(
                "the peers are not installed in this interpreter at the pinned versions: "
                'pip install -e ".[bench]" (or --peers-python venv)'
            )
        return sys.executable
    if choice != "auto":
        return choice
    return sys.executable if peers_importable(sys.executable) else ensure_peers_venv()


# ----------------------------------------------------------------------------- jobs
def quick_args(args: list[str]) -> list[str]:
    """Fewer repeats (and 100 concurrent runs for W5), same workload shapes."""
    out = list(args)

    def cap(flag: str, value: int, default: int | None = None) -> None:
        if flag in out:
            i = out.index(flag) + 1
            out[i] = str(min(int(out[i]), value))
        elif default is not None:
            out.extend([flag, str(min(default, value))])

    cap("--runs", 2)
    cap("--concurrency", 100)
    cap("--pending", 2000)
    if out[0] in ("W3", "W4"):
        cap("--repeats", 30, default=200)
    return out


def needs_postgres(jobs: Sequence[Job], fws: Sequence[str]) -> bool:
    return any("postgres" in a for j in jobs for fw, a in j.args.items() if fw in fws)


@contextlib.contextmanager
def postgres_server(wanted: bool) -> Iterator[str | None]:
    """The private PostgreSQL server the durable jobs share (None when not wanted)."""
    if not wanted:
        yield None
        return
    import _postgres

    try:
        with _postgres.server() as dsn:
            yield dsn
    except _postgres.ServerUnavailable as e:
        raise SystemExit(f"--durable needs a PostgreSQL server: {e}") from e


# ----------------------------------------------------------------------------- running
def run_one(
    fw: str, args: list[str], peer_py: str | None, hpd_py: str, timeout: int, dsn: str | None
) -> dict[str, Any]:
    if "postgres" in args and dsn is not None:
        args = [*args, "--dsn", dsn]
    if fw == HPD:
        cmd = [hpd_py, str(HPD_BENCH), *args]
    else:
        assert peer_py is not None
        cmd = [peer_py, str(PEERS_DIR / PEERS[fw]), *args]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
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
        # The faster of the two kernel timings: a process starved for a moment while it
        # timed one (seen up to 13x here) would otherwise be scaled down by that much.
        calib = min(calibs)
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


# ----------------------------------------------------------------------------- the table
def variant_name(job: str, label: str) -> str:
    """What ``label`` adds to ``job`` (the words after their common ones)."""
    words, base = label.split(), job.split()
    n = 0
    while n < min(len(words), len(base)) and words[n] == base[n]:
        n += 1
    return " ".join(words[n:])


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
            name = fw if label == job else f"{fw} ({variant_name(job, label)})"
            v = s["norm_median"]
            if best is None or (v > best[1] if higher_is_better else v < best[1]):
                best = (name, v)
    return best


def _row(summary: dict[str, Any], job: Job, key: str, peers: Sequence[str]) -> tuple[str, str]:
    """One table line for (job, metric), and its verdict ("" when it has no target)."""
    ours = summary.get(job.label, {}).get(HPD, {}).get(key)
    peer_cells = []
    for fw in peers:
        s = summary.get(job.label, {}).get(fw, {}).get(key)
        peer_cells.append("" if s is None else fmt(s["norm_median"]))
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
        t = job.targets.get(key)
        if t is not None:
            target_cell = f"<= {t:g}"
            verdict = "met" if r <= t else "NOT met"
    absolute = ABSOLUTE_TARGETS.get((job.label, key))
    if absolute is not None and ours is not None:
        limit, unit = absolute
        target_cell = f"{target_cell}; " if target_cell else ""
        target_cell += f"<= {limit:g} {unit}"
        met = ours["norm_median"] <= limit and verdict != "NOT met"
        verdict = "met" if met else "NOT met"
    best_cell = "" if best is None else f"{fmt(best[1])} ({best[0]})"
    line = (
        f"| {job.label} | {key} | {ours_cell} | "
        + " | ".join(peer_cells)
        + f" | {best_cell} | {ratio} | {target_cell} | {verdict} |"
    )
    return line, verdict


def table(
    summary: dict[str, Any], jobs: list[Job], peers: Sequence[str], peer_source: str, ran: set[str]
) -> str:
    head = ["job", "metric", "hpd_agent", *peers, "best peer", "ratio", "target", ""]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for job in jobs:
        if job.label not in ran:
            continue
        for key in job.keys:
            if not any(key in summary.get(job.label, {}).get(fw, {}) for fw in job.args):
                continue
            lines.append(_row(summary, job, key, peers)[0])
    notes = [
        "",
        "Normalised medians over processes (each process's own median of its repeats), scaled "
        "by the calibration kernel to the reference speed; memory is not normalised. "
        "Lower is better except events_per_s. [min-max] over processes. "
        f"Peers: {peer_source}.",
    ]
    flat = flatness(summary)
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
def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="hpd_agent vs peers, interleaved, one table")
    ap.add_argument("--rounds", type=int, default=None, help="default 3 (1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats, 1 round")
    ap.add_argument(
        "--durable",
        action="store_true",
        help="the durable table: hpd_agent's SQLite/PostgreSQL stores vs LangGraph's "
        "SQLite/Postgres checkpointers (starts a private PostgreSQL server)",
    )
    ap.add_argument("--only", default="", help="comma-separated job-label prefixes")
    ap.add_argument("--frameworks", default="", help="comma-separated (default: all)")
    ap.add_argument(
        "--peers-python",
        default="auto",
        help="interpreter for the peers: auto (this one if the bench extra is installed, "
        "else the venv), current, venv (benchmarks/.peers-venv) or a path",
    )
    ap.add_argument("--hpd-python", default=sys.executable, help="interpreter for hpd_agent")
    ap.add_argument("--hpd-backend", choices=("asyncio", "trio"), default="asyncio")
    ap.add_argument(
        "--dsn", default=None, help="use this PostgreSQL server instead of a private one"
    )
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument(
        "--tabulate",
        metavar="RAW_JSONL",
        default=None,
        help="run nothing: print the table of an earlier run's raw.jsonl (with --durable "
        "for a durable run)",
    )
    return ap.parse_args(argv)


def select_jobs(a: argparse.Namespace) -> list[Job]:
    jobs = [j for j in (durable_jobs() if a.durable else IN_MEMORY) if j.quick or not a.quick]
    only = [s for s in a.only.split(",") if s]
    if only:
        jobs = [j for j in jobs if any(j.label.startswith(o) for o in only)]
    return jobs


def run_rounds(
    a: argparse.Namespace, jobs: list[Job], fws: list[str], peer_py: str | None, dsn: str | None
) -> list[dict[str, Any]]:
    rounds = a.rounds if a.rounds is not None else (1 if a.quick else 3)
    outdir = Path(a.out)
    outdir.mkdir(parents=True, exist_ok=True)
    raw_path = outdir / "raw.jsonl"
    raw_path.write_text("")
    rng = random.Random(a.seed)
    rows: list[dict[str, Any]] = []
    for rnd in range(rounds):
        for job in jobs:
            if job.label == "STUB" and rnd > 0:
                continue
            order = [f for f in job.args if f in fws]
            rng.shuffle(order)
            for fw in order:
                args = quick_args(job.args[fw]) if a.quick else job.args[fw]
                if fw == HPD and a.hpd_backend != "asyncio":
                    args = [*args, "--backend", a.hpd_backend]
                res = run_one(fw, args, peer_py, a.hpd_python, a.timeout, dsn)
                res["job"], res["round"] = job.label, rnd
                rows.append(res)
                with raw_path.open("a") as f:
                    f.write(json.dumps(res) + "\n")
                print(progress(rnd, job, fw, res), flush=True)
    return rows


def progress(rnd: int, job: Job, fw: str, res: dict[str, Any]) -> str:
    head = f"[{rnd}] {job.label:38s} {fw:14s}"
    if "error" in res:
        return f"{head} ERROR rc={res.get('rc')}: {res['error'][-600:]}"
    vals = ", ".join(f"{k}={fmt(v)}" for k in job.keys if (v := metric(res, k)) is not None)
    return (
        f"{head} {vals or 'n/a'}  calib={res['calib_before_ms']:.2f}/{res['calib_after_ms']:.2f}"
        f"  net={len(res.get('net_attempts', []))}  ({res['wall_s']:.1f}s)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    a = parse(argv)
    jobs = select_jobs(a)
    all_fws = [HPD, *PEERS]
    fws = [f for f in a.frameworks.split(",") if f] or all_fws
    unknown = sorted(set(fws) - set(all_fws))
    if unknown:
        raise SystemExit(f"unknown framework(s) {unknown}; choose from {all_fws}")
    in_jobs = {fw for j in jobs for fw in j.args}
    peers = [f for f in PEERS if f in fws and f in in_jobs]
    started = time.time()
    if a.tabulate:
        peer_py = f"tabulated from {a.tabulate}"
        lines = Path(a.tabulate).read_text().splitlines()
        rows = [r for r in map(json.loads, lines) if r["job"] in {j.label for j in jobs}]
        peers = [f for f in peers if any(r["framework"] == f for r in rows)]
        Path(a.out).mkdir(parents=True, exist_ok=True)
    else:
        peer_py = peer_python(a.peers_python) if peers else None
        with postgres_server(a.dsn is None and needs_postgres(jobs, fws)) as private_dsn:
            rows = run_rounds(a, jobs, fws, peer_py, a.dsn or private_dsn)
    summary = aggregate(rows, jobs, CALIB_REF_MS)
    versions: dict[str, Any] = {}
    for r in rows:
        versions.update({k: v for k, v in r.get("versions", {}).items() if v})
    versions["python"] = sys.version.split()[0]
    rounds = max((r["round"] for r in rows), default=0) + 1
    peer_source = f"{rounds} round(s), interleaved; {peer_py}"
    md = table(summary, jobs, peers, peer_source, {r["job"] for r in rows})
    md += "\n\nversions: " + json.dumps(versions, sort_keys=True)
    md += f"\nwall time: {time.time() - started:.0f} s"
    outdir = Path(a.out)
    report = {
        "summary": summary,
        "versions": versions,
        "calib_ref_ms": CALIB_REF_MS,
        "rounds": rounds,
        "quick": a.quick,
        "durable": a.durable,
        "peer_source": peer_source,
    }
    (outdir / "summary.json").write_text(json.dumps(report, indent=1))
    (outdir / "summary.md").write_text(md + "\n")
    print()
    print(md)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
