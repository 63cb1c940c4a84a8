"""Every example runs offline, exits 0 and shows what it is about."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

EXPECTED: dict[str, list[str]] = {
    "dict_store.py": [
        "DictStore: run interrupted at 'Which framework?'",
        "resumed: plan: use FastAPI",
    ],
    "hello.py": [
        "run(): Hello! I am an hpd_agent agent.",
        "stream(): Hello  | again, |  piece |  by pi | ece.",
        "Usage(requests=1, input_tokens=14, output_tokens=7)",
    ],
    "agent_as_tool.py": [
        "[Orchestrator] calls ResearchAgent",
        "[Orchestrator > ResearchAgent] started on: SQLite or Postgres for a small app?",
        "[Orchestrator > ResearchAgent] finished (depth 1)",
        "Answer: Go with SQLite for now",
    ],
    "nested_clarification.py": [
        "question from Manager > Architect > Engineer (depth 2): Which language",
        "answered 'Rust' to request req_",
        "Result: Manager reports: Architect reports: Service scaffolded in Rust.",
    ],
    "parallel_questions.py": [
        "both questions are pending at once",
        "answering Backend with FastAPI\nanswering Frontend with React",
        "Result: Frontend will use React. Backend will use FastAPI.",
    ],
    "permissions.py": [
        "Reason: README.md is not a build artefact",
        "approved for the rest of the run",
        "deleted: ['build/cache.bin', 'build/a.o', 'build/b.o']",
        "kept README.md as asked",
    ],
    "served_agent.py": [
        'question from Orchestrator > Coder > Clarifier: Which web framework for "Build a todo API"?',
        "permission asked by Orchestrator > Coder: write_file",
        "Result: Done. Built it with Express and wrote app.js.",
        'question from Orchestrator > Coder > Clarifier: Which web framework for "Build a blog"?',
        "workspace: ['app.js']",
    ],
    "seed_scenario.py": [
        "[Orchestrator] asks: Which framework: Express, FastAPI or Django?",
        "Result: Done. Built the auth system with Express",
        "Model requests in the whole tree: 6",
    ],
    "tracing.py": [
        "Result: Manager reports: Architect reports: Service scaffolded in Rust.",
        "13 spans",
        "└─ invoke_agent Manager  (path=Manager, tokens in=200, out=15)",
        "│  └─ invoke_agent Architect  (path=Manager > Architect,",
        "│     │     ├─ execute_tool ask_user  (call=call_1)",
        "│     │     │  └─ await_human text  (outcome=answered)",
    ],
    "mcp_planner.py": [
        "legacy: protocol 2025-11-25\n  elicitation: Planner > Clarifier: Which database",
        "auto: protocol 2026-07-28\n  elicitation: Planner > Clarifier: Which database",
        "  result: Plan: build it on what the Clarifier learned (The user chose PostgreSQL.)",
    ],
    "mcp_orchestrator.py": [
        "[Orchestrator > Planner > Clarifier] asks: Which database should the plan assume?",
        "  form: ['answer']\n  answered PostgreSQL to req_",
        "  Planner returned: Plan: build it on what the Clarifier learned (The user chose PostgreSQL.)",
        "legacy: completed: Orchestrator: the plan is in.",
        "auto: completed: Orchestrator: the plan is in.",
    ],
    "a2a_planner.py": [
        "question from Orchestrator > Planner > Clarifier: Which database should the plan assume?",
        "answered 'PostgreSQL' to request req_",
        "Result: The remote Planner says: Plan: build it on what the Clarifier learned (The user",
    ],
    "acp_planner.py": [
        "serving Planner over ACP",
        "  tool call: Planner: Clarifier\n  tool call: Planner > Clarifier: ask_user\n",
        "  question: Planner > Clarifier: Which database should the plan assume?",
        "  permission: Planner: write_plan (allow_once, allow_always, reject_once)",
        "  agent: The plan is in PLAN.md (The user chose PostgreSQL.)\nstop: end_turn",
    ],
    "custom_event_loop.py": [
        "? Which framework? ['Express', 'FastAPI'] -> FastAPI",
        "Built a FastAPI app and wrote app.py.",
        "[run completed; 3 model requests]",
        "files: {'app.py': '# FastAPI app\\n'}",
    ],
}


def test_every_example_is_checked() -> None:
    # durable_run.py runs twice (stop, then resume): its own tests are below.
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted([*EXPECTED, "durable_run.py"])


@pytest.mark.parametrize(
    ("name", "args"),
    [(name, ()) for name in sorted(EXPECTED)] + [("custom_event_loop.py", ("trio",))],
)
def test_example_runs_offline(name: str, args: tuple[str, ...]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0"}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    for needle in EXPECTED[name]:
        assert needle in out.stdout, f"{name}: {needle!r} not in output:\n{out.stdout}"
    assert "litellm" not in out.stderr


@pytest.mark.parametrize(("answer", "chosen"), [("FastAPI", "FastAPI"), ("3", "Django")])
def test_seed_scenario_takes_an_option_or_its_number(answer: str, chosen: str) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "seed_scenario.py"), answer],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0"},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert f"Result: Done. Built the auth system with {chosen}:" in out.stdout


def test_seed_scenario_refuses_another_answer_in_one_line() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "seed_scenario.py"), "Rails"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0"},
        timeout=120,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("error: invalid answer") and "'Rails' is not one" in out.stderr


def _run_durable(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "durable_run.py"), *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_durable_example_stops_then_resumes_without_repeating_side_effects(tmp_path: Path) -> None:
    for _ in range(2):  # the pair runs again as it did the first time, and leaves nothing
        first = _run_durable(tmp_path)
        assert first.count("[side effect]") == 1
        assert "interrupted: req_" in first
        assert (tmp_path / "durable.db").exists()
        second = _run_durable(tmp_path, "fastapi")
        assert "[side effect]" not in second
        assert second.strip() == "Done: scaffolded api, using FastAPI"
        assert list(tmp_path.iterdir()) == []


def test_durable_example_run_twice_before_answering_continues(tmp_path: Path) -> None:
    # Every other path of durable_run.py (pending, answer, resume): tests/apps/test_durable_example.py
    assert "interrupted: req_" in _run_durable(tmp_path)
    again = _run_durable(tmp_path)  # the question still waits: nothing is done twice
    assert "[side effect]" not in again and "interrupted: req_" in again
    assert _run_durable(tmp_path, "express").strip() == "Done: scaffolded api, using Express"
    assert list(tmp_path.iterdir()) == []
