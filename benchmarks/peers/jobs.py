"""The job tables of ``benchmarks/run.py``: which bench runs with which arguments, per framework.

A job is one workload at one size; each framework taking part has its own arguments (the same
semantics written in its own API). ``run.py`` runs every (job, framework) in a fresh process.
The in-memory table is the peers' study (W1-W5 plus hpd_agent-only workloads); the durable
table (``run.py --durable``) runs hpd_agent's stores against LangGraph's checkpointers on the
same SQLite disk and the same PostgreSQL server.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CALIB_REF_MS = 1.50
"""The calibration kernel's time in the VM's fast mode (``_common.calibrate``): every figure
except memory is scaled by ``CALIB_REF_MS / its process's kernel time``."""

HPD = "hpd_agent"
PEERS = {
    "openai-agents": "bench_openai_agents.py",
    "pydantic-ai": "bench_pydantic_ai.py",
    "langgraph": "bench_langgraph.py",
}
PEER_MODULES = {"openai-agents": "agents", "pydantic-ai": "pydantic_ai", "langgraph": "langgraph"}


@dataclass
class Job:
    """One row group of the table: a label, each framework's arguments, the metrics shown."""

    label: str
    args: dict[str, list[str]]
    keys: list[str]
    quick: bool = True  # part of --quick
    targets: dict[str, float] = field(default_factory=dict[str, float])  # ratio to best peer


def _all(args: list[str], hpd: list[str] | None = None) -> dict[str, list[str]]:
    return {HPD: hpd or list(args), **{fw: list(args) for fw in PEERS}}


_HITL_ROUND_TRIP = ["ms_round_trip_full", "ms_answer_to_complete"]
_W5 = ["total_s", "peak_rss_mb", "rss_before_mb", "kb_per_run"]

IN_MEMORY: list[Job] = [
    Job(
        "W1",
        _all(["W1", "--turns", "200", "--runs", "3"]),
        ["us_per_turn"],
        targets={"us_per_turn": 0.05},
    ),
    Job("W1-short(20 turns)", _all(["W1", "--turns", "20", "--runs", "10"]), ["us_per_turn"]),
    Job(
        "W1+checkpointer",
        {"langgraph": ["W1", "--turns", "200", "--runs", "3", "--checkpointer"]},
        ["us_per_turn"],
        quick=False,
    ),
    Job(
        "W2",
        _all(["W2", "--fanout", "200", "--runs", "5"]),
        ["total_ms", "us_per_call"],
        targets={"total_ms": 0.1, "us_per_call": 0.1},
    ),
    Job("W3", _all(["W3", "--repeats", "200"]), ["ms_per_run"], targets={"ms_per_run": 0.05}),
    Job(
        "W4 depth2 HITL",
        {
            HPD: ["W4", "--depth", "2", "--variant", "hitl"],
            "openai-agents": ["W4", "--depth", "2", "--variant", "hitl"],
            "langgraph": ["W4", "--depth", "2", "--variant", "hitl"],
            "pydantic-ai": ["W4", "--depth", "2", "--variant", "inline"],
        },
        _HITL_ROUND_TRIP,
        targets=dict.fromkeys(_HITL_ROUND_TRIP, 0.05),
    ),
    Job(
        "W4 depth1 HITL",
        {
            HPD: ["W4", "--depth", "1", "--variant", "hitl"],
            "openai-agents": ["W4", "--depth", "1", "--variant", "hitl"],
            "langgraph": ["W4", "--depth", "1", "--variant", "hitl"],
            "pydantic-ai": ["W4", "--depth", "1", "--variant", "deferred"],
        },
        _HITL_ROUND_TRIP,
        targets=dict.fromkeys(_HITL_ROUND_TRIP, 0.05),
    ),
    Job(
        "W4 depth1 inline(RequestInput)",
        {"pydantic-ai": ["W4", "--depth", "1", "--variant", "inline"]},
        _HITL_ROUND_TRIP,
    ),
    Job(
        "W4 depth2 no-HITL baseline",
        _all(["W4", "--depth", "2", "--variant", "base"]),
        ["ms_round_trip_full"],
    ),
    Job(
        "W5",
        _all(["W5", "--concurrency", "1000", "--w5-turns", "5"]),
        _W5,
        targets={"total_s": 0.05},
    ),
    Job(
        "W5 agent.clone() per run",
        {"openai-agents": ["W5", "--concurrency", "1000", "--w5-turns", "5", "--per-run-agent"]},
        _W5,
        quick=False,
    ),
    Job("STUB", _all(["STUB"]), ["stub_us_per_call"]),
    Job(
        "W4 depth2 HITL durable(SQLite)",
        {HPD: ["W4", "--depth", "2", "--variant", "store"]},
        _HITL_ROUND_TRIP,
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


def _durable(
    store: str, label: str, hpd: list[str], lg: list[str], keys: list[str], quick: bool = True
) -> Job:
    checkpointer = "sqlite" if store == "sqlite" else "postgres"
    return Job(
        f"{label} ({'SQLite' if store == 'sqlite' else 'PostgreSQL'})",
        {HPD: [*hpd, "--store", store], "langgraph": [*lg, "--checkpointer", checkpointer]},
        keys,
        quick=quick,
        targets={k: 0.1 for k in keys if not (k.endswith("_mb") or k.startswith("kb_"))},
    )


def durable_jobs() -> list[Job]:
    """hpd_agent's SQLite and PostgreSQL stores against LangGraph's checkpointers."""
    jobs: list[Job] = []
    for store in ("sqlite", "postgres"):
        w1 = ["W1", "--turns", "200", "--runs", "3"]
        jobs += [
            _durable(store, "W1", w1, w1, ["us_per_turn"]),
            _durable(
                store,
                "W1 journal overhead",
                [*w1, "--variant", "journal"],
                [*w1, "--variant", "journal"],
                ["journal_us_per_turn"],
            ),
            _durable(
                store,
                "W4 depth2 HITL",
                ["W4", "--depth", "2", "--variant", "hitl"],
                ["W4", "--depth", "2", "--variant", "hitl"],
                _HITL_ROUND_TRIP,
            ),
            _durable(
                store,
                "W4 depth1 HITL",
                ["W4", "--depth", "1", "--variant", "hitl"],
                ["W4", "--depth", "1", "--variant", "hitl"],
                _HITL_ROUND_TRIP,
            ),
            _durable(
                store,
                "W5",
                ["W5", "--concurrency", "1000", "--w5-turns", "5"],
                ["W5", "--concurrency", "1000", "--w5-turns", "5"],
                ["total_s", "kb_per_run"],
            ),
        ]
    sync = ["--checkpointer", "sqlite-sync"]
    normal = ["--sqlite-synchronous", "NORMAL"]
    for job in [j for j in jobs if j.label.endswith("(SQLite)")]:
        lg = job.args["langgraph"]
        jobs.append(Job(f"{job.label} synchronous=NORMAL", {"langgraph": [*lg, *normal]}, job.keys))
    jobs += [
        Job(
            "W1 (SQLite) sync SqliteSaver",
            {"langgraph": ["W1", "--turns", "200", "--runs", "3", *sync]},
            ["us_per_turn"],
            quick=False,
        ),
        Job(
            "W4 depth2 HITL (SQLite) sync SqliteSaver",
            {"langgraph": ["W4", "--depth", "2", "--variant", "hitl", *sync]},
            _HITL_ROUND_TRIP,
            quick=False,
        ),
    ]
    ours: list[Job] = []
    # Runs that really run at once (each model call yields to the event loop, as a real
    # model's round trip does): the store's group commit at work. hpd_agent alone.
    for store in ("sqlite", "postgres"):
        name = "SQLite" if store == "sqlite" else "PostgreSQL"
        for runs in (1000, 10_000):
            w5 = ["W5", "--variant", "interleaved", "--concurrency", str(runs), "--w5-turns", "5"]
            ours.append(
                Job(
                    f"W5 interleaved {runs} runs ({name})",
                    {HPD: [*w5, "--store", store]},
                    ["total_s", "kb_per_run"],
                    quick=runs == 1000,
                )
            )
    # SQLite with durability="os": an fsync per commit, where grouping commits pays most.
    ours.append(
        Job(
            "W5 1000 runs (SQLite, durability=os)",
            {HPD: ["W5", "--concurrency", "1000", "--w5-turns", "5", "--store", "sqlite-os"]},
            ["total_s", "kb_per_run"],
        )
    )
    return jobs + ours


# Peer jobs that are another way to do the same thing: the best peer is taken over these too.
POOLS = {
    "W4 depth1 HITL": ["W4 depth1 HITL", "W4 depth1 inline(RequestInput)"],
    "W5": ["W5", "W5 agent.clone() per run"],
    **{
        f"{w} (SQLite)": [
            f"{w} (SQLite)",
            f"{w} (SQLite) synchronous=NORMAL",
            f"{w} (SQLite) sync SqliteSaver",
        ]
        for w in ("W1", "W1 journal overhead", "W4 depth2 HITL", "W4 depth1 HITL", "W5")
    },
}
# Targets on hpd_agent's own figure: (job, metric) -> (at most, unit)
ABSOLUTE_TARGETS = {
    ("W5", "kb_per_run"): (20.0, "KB"),
    ("W1 journal overhead (SQLite)", "journal_us_per_turn"): (50.0, "µs"),
    ("W1 journal overhead (PostgreSQL)", "journal_us_per_turn"): (120.0, "µs"),
    ("W4 depth2 HITL (SQLite)", "ms_round_trip_full"): (0.6, "ms"),
}
