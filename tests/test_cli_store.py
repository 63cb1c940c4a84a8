"""The ``hpd-agent pending``, ``answer`` and ``resume`` commands, run as real processes
against a real SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import durable_agents
import pytest

from hpd_agent.events import ClarificationRequest
from hpd_agent.store import RequestRecord, SQLiteStore

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


def _env(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HPD_TEST_DIR": str(workdir),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
        "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
    }


async def cli(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = await anyio.run_process(
        [sys.executable, "-m", "hpd_agent.cli", *args], env=_env(workdir), check=False
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    return tmp_path


async def _interrupted_run(db: Path) -> tuple[str, str]:
    store = SQLiteStore(db)
    result = await durable_agents.build().run("Build", store=store, on_unhandled="interrupt")
    await store.aclose()
    assert result.status == "interrupted"
    return result.run_id, result.pending[0].request_id


async def test_pending_lists_requests(workdir: Path) -> None:
    db = workdir / "runs.db"
    empty = await cli(workdir, "pending", "--db", str(db))
    assert empty.returncode == 0 and empty.stdout == "" and "no pending" in empty.stderr
    run_id, rid = await _interrupted_run(db)
    listed = await cli(workdir, "pending", "--db", str(db))
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == [
        f"{rid}  {run_id}  Orchestrator/CodingAgent  text: {durable_agents.QUESTION}"
    ]
    as_json = await cli(workdir, "pending", "--db", str(db), "--json", "--run", run_id)
    (line,) = as_json.stdout.splitlines()
    item = json.loads(line)
    assert item["id"] == rid and item["agent_path"] == ["Orchestrator", "CodingAgent"]
    other = await cli(workdir, "pending", "--db", str(db), "--run", "run_other", "--json")
    assert other.stdout == ""


async def test_answer_exit_statuses(workdir: Path) -> None:
    db = workdir / "runs.db"
    store = SQLiteStore(db)
    event = ClarificationRequest(
        run_id="run_1",
        agent_path=("A",),
        depth=0,
        request_id="req_opt",
        question="Pick",
        options=("red", "blue"),
    )
    await store.add_request(RequestRecord.from_event(event))
    await store.aclose()
    unknown = await cli(workdir, "answer", "req_nope", "x", "--db", str(db))
    assert unknown.returncode == 3 and "no request" in unknown.stderr
    invalid = await cli(workdir, "answer", "req_opt", "green", "--db", str(db))
    assert invalid.returncode == 7 and "not one of the options" in invalid.stderr
    bad_json = await cli(workdir, "answer", "req_opt", "{nope", "--db", str(db), "--json")
    assert bad_json.returncode == 2 and "not valid JSON" in bad_json.stderr
    ok = await cli(workdir, "answer", "req_opt", "BLUE", "--db", str(db))
    assert ok.returncode == 0 and ok.stdout.strip() == 'answered req_opt: "blue"'
    again = await cli(workdir, "answer", "req_opt", "red", "--db", str(db))
    assert again.returncode == 4 and "already answered" in again.stderr


async def test_resume_with_answer_completes_without_rerunning(workdir: Path) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)
    agent = "durable_agents:build"
    stopped = await cli(workdir, "resume", run_id, "--db", str(db), "--agent", agent, "--interrupt")
    assert stopped.returncode == 75  # interrupted: not an error status
    assert stopped.stdout.strip() == f"pending {rid}: {durable_agents.QUESTION}"
    done = await cli(
        workdir, "resume", run_id, "--db", str(db), "--agent", agent, "--answer", f"{rid}=Hanami"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Orchestrator: built with Hanami"
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    assert durable_agents.read_lines("calls.txt") == [
        "orchestrator@0",
        "coder@0",
        "coder@1",
        "orchestrator@1",
    ]


def _resume_and_answer_from_another_terminal(
    db: Path, workdir: Path, run_id: str, rid: str
) -> subprocess.Popen[str]:
    resume = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hpd_agent.cli",
            "resume",
            run_id,
            "--db",
            str(db),
            "--agent",
            "durable_agents:build",
        ],
        env=_env(workdir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert resume.stderr is not None
        notice = resume.stderr.readline()  # blocks until the question is announced
        assert notice.startswith(f"waiting for {rid} (Orchestrator/CodingAgent)")
        answered = subprocess.run(
            [sys.executable, "-m", "hpd_agent.cli", "answer", rid, "Falcon", "--db", str(db)],
            env=_env(workdir),
            capture_output=True,
            timeout=60,
        )
        assert answered.returncode == 0
        resume.wait(timeout=60)
    finally:
        resume.kill()
    return resume


async def test_resume_waits_for_an_answer_from_another_terminal(workdir: Path) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)
    resume = await anyio.to_thread.run_sync(
        _resume_and_answer_from_another_terminal, db, workdir, run_id, rid
    )
    assert resume.stdout is not None
    out = resume.stdout.read()
    assert resume.returncode == 0
    assert out.strip() == "Orchestrator: built with Falcon"


async def test_resume_reports_bad_input(workdir: Path) -> None:
    db = workdir / "runs.db"
    run_id, rid = await _interrupted_run(db)
    no_run = await cli(
        workdir, "resume", "run_missing", "--db", str(db), "--agent", "durable_agents:build"
    )
    assert no_run.returncode == 1 and "no run 'run_missing'" in no_run.stderr
    bad_agent = await cli(
        workdir, "resume", run_id, "--db", str(db), "--agent", "durable_agents:nothing"
    )
    assert bad_agent.returncode == 1 and "cannot load --agent" in bad_agent.stderr
    bad_form = await cli(
        workdir,
        "resume",
        run_id,
        "--db",
        str(db),
        "--agent",
        "durable_agents:build",
        "--answer",
        "oops",
    )
    assert bad_form.returncode == 2 and "REQUEST_ID=TEXT" in bad_form.stderr
    # A refused answer resumes nothing and leaves the request pending.
    wrong = await cli(
        workdir,
        "resume",
        run_id,
        "--db",
        str(db),
        "--agent",
        "durable_agents:build",
        "--answer",
        "req_x=1",
    )
    assert wrong.returncode == 1 and "no request" in wrong.stderr
    store = SQLiteStore(db)
    record = await store.get_request(rid)
    assert record is not None and record.status == "pending"
    await store.aclose()


async def test_answer_a_permission_request(workdir: Path) -> None:
    from hpd_agent.events import PermissionRequest

    db = workdir / "runs.db"
    store = SQLiteStore(db)
    event = PermissionRequest(
        run_id="run_1",
        agent_path=("A",),
        depth=0,
        request_id="req_perm",
        tool_name="deploy",
        arguments={"target": "prod"},
        tool_call_id="c1",
    )
    await store.add_request(RequestRecord.from_event(event))
    listed = await cli(workdir, "pending", "--db", str(db))
    assert 'permission: May deploy run with {"target": "prod"}?' in listed.stdout
    refused = await cli(workdir, "answer", "req_perm", "maybe", "--db", str(db))
    assert refused.returncode == 7 and "neither an approval nor a denial" in refused.stderr
    ok = await cli(workdir, "answer", "req_perm", "always", "--db", str(db))
    assert ok.returncode == 0
    record = await store.get_request("req_perm")
    assert record is not None and record.answer == {"scope": "run", "kind": "approve"}
    await store.aclose()
