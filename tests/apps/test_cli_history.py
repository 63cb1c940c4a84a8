"""``hpd-agent answer --as NAME --policy MODULE:ATTR`` and ``hpd-agent history``: who may
answer, and the audit trail of who did, on which channel, when; real processes on a SQLite
file and a PostgreSQL server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from hpd_agent import Agent, ask_user, tool
from hpd_agent.governance import os_user
from hpd_agent.store import open_store
from hpd_agent.testing import ScriptedModel, tool_call

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]


async def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS), str(TESTS / "governance")]),
    }
    done = await anyio.run_process(
        [sys.executable, "-m", "hpd_agent.cli", *args], env=env, check=False
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


@tool(requires_approval=True)
async def deploy(env: str) -> str:
    """Deploy."""
    return f"deployed to {env}"


async def _asking_run(location: str) -> tuple[str, list[str]]:
    """An interrupted run of Ops waiting on a question and on deploy's permission."""
    model = ScriptedModel(
        [[tool_call("ask_user", question="Which region?"), tool_call("deploy", env="prod")]]
    )
    agent = Agent("Ops", model=model, tools=[ask_user(), deploy])
    store = open_store(location)
    try:
        result = await agent.run("ship it", store=store, on_unhandled="interrupt")
    finally:
        await store.aclose()
    assert result.status == "interrupted"
    return result.run_id, [r.request_id for r in result.pending]


async def test_a_policy_refuses_bob_and_history_shows_who_answered(location: str) -> None:
    run_id, (question, permission) = await _asking_run(location)
    policy = ("--policy", "policies:TEAM")
    refused = await cli("answer", permission, "yes", "--db", location, "--as", "bob", *policy)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "'bob' may not answer request" in refused.stderr
    assert "only alice may decide 'deploy'" in refused.stderr
    store = open_store(location)
    try:
        record = await store.get_request(permission)
    finally:
        await store.aclose()
    assert record is not None and (record.status, record.answered_at) == ("pending", None)

    approved = await cli("answer", permission, "yes", "--db", location, "--as", "alice", *policy)
    assert approved.returncode == 0, approved.stderr
    answered = await cli("answer", question, "eu-west", "--store", location)
    assert answered.returncode == 0, answered.stderr  # --store: another spelling of --db

    trail = await cli("history", run_id, "--store", location)
    assert trail.returncode == 0, trail.stderr
    lines = trail.stdout.splitlines()
    assert len(lines) == 2
    assert 'Ops  text: Which region?  -> answered "eu-west"' in lines[0]
    assert f"by {os_user()} via cli at " in lines[0]  # no --as: the OS user
    assert "Ops  permission: " in lines[1] and " by alice via cli at " in lines[1]

    as_json = await cli("history", run_id, "--store", location, "--json")
    items = json.loads(as_json.stdout)
    assert [(i["request_id"], i["status"], i["answered_by"], i["channel"]) for i in items] == [
        (question, "answered", os_user(), "cli"),
        (permission, "answered", "alice", "cli"),
    ]
    assert items[1]["answer"] == {"scope": "once", "kind": "approve"}
    assert all(i["answered_at"] >= i["created_at"] for i in items)


async def test_history_and_answer_refuse_bad_input_in_one_line(location: str) -> None:
    run_id, (question, _) = await _asking_run(location)
    unknown = await cli("history", "run_nope", "--store", location)
    assert unknown.returncode == 11 and "no run 'run_nope'" in unknown.stderr
    missing = await cli("history", run_id)
    assert missing.returncode == 2 and "--store" in missing.stderr
    for bad, said in [
        (("--policy", "policies:NOT_A_POLICY"), "not a policy"),
        (("--policy", "nowhere:X"), "cannot load it"),
        (("--as", " "), "--as needs a name"),
    ]:
        done = await cli("answer", question, "eu", "--db", location, *bad)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
    pending = await cli("history", run_id, "--store", location)
    assert "-> pending" in pending.stdout.splitlines()[0]
