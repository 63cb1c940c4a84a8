"""Cold resume after SIGKILL: a real child process dies while a depth-2 question is pending.

The child runs the ``durable_agents`` tree with a SQLite store. In the CodingAgent's turn the
sibling tool ``record_step`` has already written its side effect when ``ask_user`` waits.
The test kills the child, answers through the store from another process (the CLI), resumes
in this process and checks that nothing ran twice.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import anyio.to_thread
import durable_agents
import pytest

from hpd_agent.events import ClarificationRequest, Event, ToolCallFinished
from hpd_agent.store import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


def _env(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HPD_TEST_DIR": str(workdir),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
        "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
    }


def _wait_until(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _pending_and_journaled(db: Path) -> list[str]:
    """Ids of pending requests, once the sibling's tool result is journaled too."""
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        try:
            pending = [
                r[0] for r in conn.execute("SELECT id FROM hpd_requests WHERE status='pending'")
            ]
            sibling = conn.execute(
                "SELECT count(*) FROM hpd_journal WHERE kind='tool' AND key LIKE '%:step'"
            ).fetchone()[0]
        except sqlite3.OperationalError:  # tables not created yet
            return []
    finally:
        conn.close()
    return pending if sibling == 1 else []


def _kill_at_pending_question_then_answer(db: Path, workdir: Path) -> str:
    """Start the child, SIGKILL it once the depth-2 question waits, answer from the CLI."""
    child = subprocess.Popen(
        [sys.executable, str(TESTS / "durable_agents.py"), str(db), "run_kill"],
        env=_env(workdir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_until(lambda: _pending_and_journaled(db), "the depth-2 question to be pending")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    (request_id,) = _pending_and_journaled(db)
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    assert durable_agents.read_lines("calls.txt") == ["orchestrator@0", "coder@0"]

    # Answer from another process, through the CLI.
    answered = subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", "answer", request_id, "FastAPI", "--db", str(db)],
        env=_env(workdir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answered.returncode == 0, answered.stderr
    return request_id


async def test_sigkill_while_depth2_question_pending_then_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    db = tmp_path / "runs.db"
    request_id = await anyio.to_thread.run_sync(_kill_at_pending_question_then_answer, db, tmp_path)

    store = SQLiteStore(db)
    events: list[Event] = []
    async with durable_agents.build().resume_stream("run_kill", store=store) as run:
        async for event in run:
            events.append(event)
    result = run.result
    assert result.status == "completed"
    assert result.output == "Orchestrator: built with FastAPI"
    # Nothing ran twice: one side effect, every model turn called exactly once in total.
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    assert durable_agents.read_lines("calls.txt") == [
        "orchestrator@0",
        "coder@0",
        "coder@1",
        "orchestrator@1",
    ]
    # The question kept its id; its re-emission and the sibling's result are marked replayed.
    (question,) = [e for e in events if isinstance(e, ClarificationRequest)]
    assert question.request_id == request_id and question.replayed
    (step,) = [
        e for e in events if isinstance(e, ToolCallFinished) and e.tool_name == "record_step"
    ]
    assert step.replayed and step.result == "recorded"
    delegate = [
        e for e in events if isinstance(e, ToolCallFinished) and e.tool_name == "CodingAgent"
    ]
    assert [e.replayed for e in delegate] == [False]  # it re-executed, replaying inside
    record = await store.get_run("run_kill")
    assert record is not None and record.status == "completed"
    assert record.output == result.output
    await store.aclose()
