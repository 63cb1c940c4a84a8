"""``--durability sync|async|exit`` on ``hpd-agent run`` and ``resume``: the mode reaches the
store (what another connection sees committed while the run goes on), a mode not one of the
three is a usage error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The second call of `look` counts the tool results another connection sees committed.
AGENT = textwrap.dedent(
    """
    import os, sqlite3
    from hpd_agent import Agent, tool
    from hpd_agent.messages import ToolResultMessage
    from hpd_agent.testing import FunctionModel, text, tool_call

    @tool
    def look(n: int) -> str:
        \"\"\"Count the tool results committed so far.

        Args:
            n: Which call.
        \"\"\"
        db = sqlite3.connect(os.environ["RUNS_DB"])
        try:
            seen = db.execute("SELECT count(*) FROM hpd_journal WHERE kind = 'tool'").fetchone()
        finally:
            db.close()
        return f"call {n} saw {seen[0]}"

    def step(messages, info):
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if len(results) < 2:
            return tool_call("look", _id=f"c{len(results)}", n=len(results))
        return text(" | ".join(str(r.content) for r in results))

    agent = Agent("Looker", model=FunctionModel(step), tools=[look])
    """
)


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "looker.py").write_text(AGENT)
    db = tmp_path / "runs.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RUNS_DB": str(db)}
    command = ["run", "looker:agent", "go", "--store", str(db), *extra]
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", *command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("mode", "seen"), [("sync", 1), ("exit", 0), (None, 1)])
def test_run_commits_as_its_durability_says(tmp_path: Path, mode: str | None, seen: int) -> None:
    out = _run(tmp_path, *(["--durability", mode] if mode else []))
    assert out.returncode == 0, out.stderr
    # The first call's result is committed before the second call in sync (the default),
    # held until the end in exit.
    assert out.stdout.strip() == f"call 0 saw 0 | call 1 saw {seen}"


def test_a_mode_not_one_of_the_three_is_a_usage_error(tmp_path: Path) -> None:
    out = _run(tmp_path, "--durability", "later")
    assert out.returncode == 2
    assert "invalid choice: 'later'" in out.stderr and "sync" in out.stderr
    assert not (tmp_path / "runs.db").exists()  # nothing made


def test_resume_takes_the_option() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", "resume", "--help"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "--durability {sync,async,exit}" in out.stdout
