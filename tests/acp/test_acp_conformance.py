"""Conformance: the official ACP TypeScript SDK's client (``@agentclientprotocol/sdk`` 2.4.0,
Node) drives ``hpd-agent acp`` in a child process, one scripted scenario per numbered behaviour
of the server (tests/acp/node/scenarios.mjs); the SDK checks every message against the ACP
schema as it parses it.

The npm packages are pinned in tests/acp/node/package.json (lock file beside it) and installed
once into tests/acp/node/node_modules by the fixture below (``npm ci``, under a file lock: the
suite runs in parallel workers); without node/npm, or when the registry can't be reached, the
tests skip with the reason. Every server ends within 5 s of its stdin closing, wrote nothing but
JSON-RPC messages on stdout, and is gone from /proc once the scenario is over.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _child import PYTHONPATH

from hpd_agent.store import open_store

HERE = Path(__file__).parent
NODE_DIR = HERE / "node"


@pytest.fixture(scope="module")
def node() -> str:
    exe, npm = shutil.which("node"), shutil.which("npm")
    if exe is None or npm is None:
        pytest.skip("node and npm not found: the ACP conformance tests need them")
    with (NODE_DIR / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker installs, the others wait for it
        if not (NODE_DIR / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=NODE_DIR,
                capture_output=True,
                text=True,
                timeout=280,
            )
            if done.returncode != 0:
                pytest.skip(f"npm could not install the ACP SDK: {done.stderr.strip()[-500:]}")
    return exe


def drive(node: str, scenario: str, tmp_path: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": PYTHONPATH,
        "HPD_ACP_TEST_DIR": str(tmp_path),
        "HPD_ACP_STORE": str(tmp_path / "sessions.db"),
        "HPD_ACP_COMMAND": json.dumps([sys.executable, "-m", "hpd_agent.cli", "acp"]),
    }
    done = subprocess.run(
        [node, "node/drive.mjs", scenario],
        cwd=HERE,  # MODULE:ATTR is importable from the current directory
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    for end in _ends(seen):
        assert end["code"] == 0 and end["signal"] is None, end["stderr"]
        assert end["ms"] < 5000, "the server took too long to end after its stdin closed"
        assert end["stdoutClean"], "the server wrote something else than protocol messages"
        assert "Traceback" not in end["stderr"]
        assert not _alive(end["pid"])
    return seen


def _ends(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "end":
                yield inner
            else:
                yield from _ends(inner)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is still a process (not a zombie) of a server command."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and b"hpd_agent.cli" in cmdline


def updates_of(log: list[dict[str, Any]], session: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in log
        if m.get("method") == "session/update" and m["params"]["sessionId"] == session
    ]


# -- 2, 4, 5, 6 ------------------------------------------------------------------------------------
def test_initialize_sessions_prompts_and_stop_reasons(node: str, tmp_path: Path) -> None:
    seen = drive(node, "basics", tmp_path)
    echo = seen["echo"]
    assert echo["init"]["protocolVersion"] == 1
    assert echo["init"]["agentCapabilities"]["loadSession"] is False
    assert echo["init"]["agentInfo"]["name"] == "Echo"
    assert len(set(echo["sessions"])) == 3
    assert echo["stops"] == ["end_turn"] * 3
    assert echo["said"] == [
        "heard aheard a | bheard a | b | c",  # each turn continues its session's history
        "heard x",  # and no other session's
        "heard one\nfile:///src/x.py\ntwo",
    ]
    assert echo["chunks"] > 1  # streamed piece by piece
    assert echo["unknown"]["code"] == -32002
    assert echo["load"] is not None  # no store: session/load refused
    assert seen["looper"]["stop"] == "max_turn_requests"
    error = seen["broken"]["error"]
    assert "RuntimeError" in error["message"] and "the model broke" in error["message"]


# -- 7 ---------------------------------------------------------------------------------------------
def test_the_trees_tool_calls_and_the_root_text(node: str, tmp_path: Path) -> None:
    seen = drive(node, "stream", tmp_path)
    assert seen["stop"] == "end_turn"
    updates = updates_of(seen["log"], seen["session"])
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert [c["title"] for c in calls] == [
        "Top: Mid",
        "Top > Mid: Leaf",
        "Top > Mid > Leaf: deploy",
    ]
    assert len({c["toolCallId"] for c in calls}) == 3
    assert all(c["status"] in ("pending", "in_progress") for c in calls)
    assert calls[2]["rawInput"] == {"target": "prod1"}
    assert calls[2]["_meta"]["hpd_agent"] == {
        "agent_path": ["Top", "Mid", "Leaf"],
        "tool_name": "deploy",
    }
    ends = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert [(e["toolCallId"], e["status"]) for e in ends] == [
        (c["toolCallId"], "completed") for c in reversed(calls)
    ]
    assert ends[0]["content"] == [
        {"type": "content", "content": {"type": "text", "text": "deployed to prod1"}}
    ]
    assert seen["said"] == "top: mid: leaf: deployed to prod1"  # the root's text only
    chunks = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert len(chunks) == 1  # an answer the model did not stream: one chunk
    log = seen["log"]
    response = next(i for i, m in enumerate(log) if m.get("response") == "session/prompt")
    assert all(i < response for i, m in enumerate(log) if m.get("method") == "session/update")
    asked = next(i for i, m in enumerate(log) if m.get("method") == "session/request_permission")
    announced = next(
        i
        for i, m in enumerate(log)
        if m.get("method") == "session/update" and m["params"]["update"] == calls[2]
    )
    assert announced < asked  # the tool call is announced before its permission is asked
    # 9: the permission is asked on that very tool call, with the three options
    permission = log[asked]["params"]
    assert permission["sessionId"] == seen["session"]
    assert permission["toolCall"]["toolCallId"] == calls[2]["toolCallId"]
    assert permission["toolCall"]["title"] == "Top > Mid > Leaf: deploy"
    assert permission["toolCall"]["rawInput"] == {"target": "prod1"}
    assert [o["kind"] for o in permission["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
    ]
    assert len({o["optionId"] for o in permission["options"]}) == 3
    # a tool whose result is an error ends "failed", its error as the content
    fumbled = seen["fumbler"]
    assert fumbled["stop"] == "end_turn"
    call, end, answer = fumbled["updates"]
    assert call["sessionUpdate"] == "tool_call" and call["title"] == "Fumbler: explode"
    assert end["sessionUpdate"] == "tool_call_update" and end["toolCallId"] == call["toolCallId"]
    assert end["status"] == "failed"
    assert "RuntimeError: the tool broke" in end["content"][0]["content"]["text"]
    assert answer["content"] == {"type": "text", "text": "recovered"}


# -- 6: one turn at a time -------------------------------------------------------------------------
def test_a_prompt_while_the_turn_runs_is_refused(node: str, tmp_path: Path) -> None:
    seen = drive(node, "busy", tmp_path)
    assert seen["second"] is not None and "still running" in seen["second"]["message"]
    assert seen["stop"] == "end_turn"
    assert seen["effects"] == ["deploy prod1"]  # the running turn went on, once
    assert seen["other"] is True


# -- 8 ---------------------------------------------------------------------------------------------
def test_parallel_questions_outstanding_together_answered_in_reverse(
    node: str, tmp_path: Path
) -> None:
    seen = drive(node, "parallel", tmp_path)
    assert seen["stop"] == "end_turn"
    assert sorted(seen["asked"]) == [
        "Lead > Fast: Fast: which colour?",
        "Lead > Slow: Slow: which size?",
    ]
    assert seen["said"] == "fast got red / slow got large"  # each answer reached its asker


# -- 9 ---------------------------------------------------------------------------------------------
def test_permission_outcomes(node: str, tmp_path: Path) -> None:
    runs = {r["option"]: r for r in drive(node, "permissions", tmp_path)["runs"]}
    assert all(r["stop"] == "end_turn" for r in runs.values())  # the turn goes on
    assert runs["approve_once"]["asked"] == 2
    assert runs["approve_once"]["effects"] == ["deploy prod1", "deploy prod2"]
    assert runs["approve_run"]["asked"] == 1  # not asked again in that run
    assert runs["approve_run"]["effects"] == ["deploy prod1", "deploy prod2"]
    assert runs["deny"]["effects"] == [] and "denied by the editor" in runs["deny"]["ends"][0]
    assert runs[None]["effects"] == [] and "declined" in runs[None]["ends"][0]
    assert runs["bogus"]["effects"] == [] and "denied" in runs["bogus"]["ends"][0]


# -- 10 --------------------------------------------------------------------------------------------
def test_questions_are_forms_by_kind(node: str, tmp_path: Path) -> None:
    kinds = drive(node, "forms", tmp_path)["kinds"]
    schemas = {k: v["forms"][0]["requestedSchema"] for k, v in kinds.items()}
    assert schemas["text"]["properties"]["answer"]["type"] == "string"
    assert schemas["input"]["properties"]["answer"]["minLength"] == 1
    assert schemas["text_options"]["properties"]["answer"]["enum"] == ["tabs", "spaces"]
    assert schemas["choice"]["properties"]["answer"]["enum"] == ["red", "green"]
    assert schemas["choices"]["properties"]["answer"]["items"]["enum"] == ["red", "green", "blue"]
    assert schemas["confirm"]["properties"]["answer"]["type"] == "boolean"
    assert set(schemas["custom_flat"]["properties"]) == {"name", "age"}
    assert schemas["custom_nested"]["properties"]["answer"]["type"] == "string"
    for kind in ("text", "text_options", "input", "choice", "choices", "confirm"):
        assert schemas[kind]["required"] == ["answer"]
    expected = {
        "text": 'text="Ada"',
        "text_options": 'text_options="spaces"',
        "input": 'input="bob"',
        "choice": 'choice="green"',
        "choices": 'choices=["blue", "red"]',
        "confirm": "confirm=true",
        "custom_flat": 'custom_flat={"name": "Ada", "age": 3}',
        "custom_nested": 'custom_nested={"range": {"from": 2}}',
    }
    for kind, effect in expected.items():
        form = kinds[kind]["forms"][0]
        assert kinds[kind]["effects"] == [effect]
        assert form["mode"] == "form"
        assert form["toolCallId"] == kinds[kind]["call"]["toolCallId"]
        assert form["_meta"]["hpd_agent"]["agent_path"] == ["Asker"]
        assert form["message"].startswith("Asker: ")
    assert kinds["text"]["forms"][0]["message"] == "Asker: Your name?\nFor the greeting."
    first, second = (f["message"] for f in kinds["refused"]["forms"])
    assert second.startswith(first + "\n(Your last answer was not accepted: ")
    assert kinds["refused"]["effects"] == ['input="bob"']
    assert kinds["decline"]["effects"] == [] and "declined" in kinds["decline"]["result"]
    assert kinds["cancel"]["effects"] == [] and "cancelled" in kinds["cancel"]["result"]
    assert kinds["decline"]["stop"] == kinds["cancel"]["stop"] == "end_turn"


# -- 11 --------------------------------------------------------------------------------------------
def test_without_forms(node: str, tmp_path: Path) -> None:
    kinds = drive(node, "fallback", tmp_path)["kinds"]
    assert all(k["forms"] == [] for k in kinds.values())  # never sent elicitation/create
    options = {
        kind: [(o["name"], o["kind"]) for o in kinds[kind]["permissions"][0]["options"]]
        for kind in ("confirm", "choice", "text_options")
    }
    assert options == {
        "confirm": [("Yes", "allow_once"), ("No", "reject_once")],
        "choice": [("red", "allow_once"), ("green", "allow_once")],
        "text_options": [("tabs", "allow_once"), ("spaces", "allow_once")],
    }
    assert kinds["confirm"]["permissions"][0]["toolCall"]["title"] == "Asker: Go on?"
    assert kinds["confirm"]["effects"] == ["confirm=false"]
    assert kinds["choice"]["effects"] == ['choice="green"']
    assert kinds["text_options"]["effects"] == ['text_options="tabs"']
    for kind in ("text", "input", "choices", "custom_flat", "action"):  # unanswered at once
        assert kinds[kind]["permissions"] == [] and kinds[kind]["effects"] == []
        assert "cancelled before the user answered" in kinds[kind]["result"]
        assert kinds[kind]["stop"] == "end_turn"
    dismissed = kinds["dismissed"]  # the permission dialog dismissed: the question cancelled
    assert len(dismissed["permissions"]) == 1 and dismissed["effects"] == []
    assert "cancelled" in dismissed["result"] and dismissed["stop"] == "end_turn"


# -- 12 --------------------------------------------------------------------------------------------
def test_cancel(node: str, tmp_path: Path) -> None:
    seen = drive(node, "cancel", tmp_path)
    assert seen["stop"] == "cancelled"
    assert seen["ms"] < 2000  # without waiting for the permission's reply
    assert seen["effectsAfterCancel"] == []
    assert seen["next"] == "end_turn"  # the session takes the next prompt
    assert seen["effects"] == ["deploy prod1"]  # the late approval reached nobody
    # every call of the turn ended before the prompt was answered: deploy with the result its
    # model got (it did not run), the sub-agent calls the cancel cut short "failed"
    turn = seen["turnOne"]
    top, mid, deploy = (u["toolCallId"] for u in turn if u["sessionUpdate"] == "tool_call")
    ends = [u for u in turn if u["sessionUpdate"] == "tool_call_update"]
    assert {u["toolCallId"]: u["status"] for u in ends} == {
        deploy: "completed",
        top: "failed",
        mid: "failed",
    }
    assert len(ends) == 3
    assert "did not run" in ends[0]["content"][0]["content"]["text"]


# -- 13 --------------------------------------------------------------------------------------------
def test_a_store_keeps_sessions_across_a_killed_server(node: str, tmp_path: Path) -> None:
    seen = drive(node, "restart", tmp_path)
    assert seen["killed"]["signal"] == "SIGKILL"
    assert not _alive(seen["firstPid"])
    assert seen["init"]["agentCapabilities"]["loadSession"] is True
    assert seen["replayed"] == [["user_message_chunk", "a plan"]]
    assert seen["asked"] == ["Planner > Clarifier: Which database should the plan assume?"]
    assert seen["stop"] == "end_turn"
    # the resumed turn's plan, then the new prompt's turn (answered from the history)
    assert seen["said"].endswith("Plan: The user chose PostgreSQL.Plan: The user chose PostgreSQL.")
    assert seen["effects"] == ["survey db"]  # no side effect ran again
    assert seen["models"].count("Clarifier") == 3
    assert seen["unknown"]["code"] == -32002


def test_a_store_replays_completed_turns_and_the_history_goes_on(node: str, tmp_path: Path) -> None:
    seen = drive(node, "reload", tmp_path)
    assert seen["first"]["stops"] == ["end_turn", "end_turn"]
    assert seen["second"]["init"]["agentCapabilities"]["loadSession"] is True
    assert seen["second"]["replayed"] == [
        ["user_message_chunk", "a"],
        ["agent_message_chunk", "heard a"],
        ["user_message_chunk", "b"],
        ["agent_message_chunk", "heard a | b"],
    ]
    assert seen["second"]["stop"] == "end_turn"
    assert seen["second"]["next"] == "heard a | b | c"


# -- issue 35 item 2: who answered ------------------------------------------------------------------
def test_the_editors_answers_are_recorded_by_its_client_name(node: str, tmp_path: Path) -> None:
    seen = drive(node, "answered", tmp_path)
    assert seen["planner"]["stop"] == seen["top"]["stop"] == "end_turn"

    async def records() -> list[Any]:
        store = open_store(str(tmp_path / "sessions.db"))
        try:
            return await store.list_requests(status=None)
        finally:
            await store.aclose()

    kept = {(r.kind, r.status, r.answered_by, r.channel) for r in anyio.run(records)}
    assert kept == {  # the client's clientInfo.name (tests/acp/node/lib.mjs), channel acp
        ("text", "answered", "hpd-agent-tests", "acp"),
        ("permission", "answered", "hpd-agent-tests", "acp"),
    }


# -- 2: stdin ending ---------------------------------------------------------------------------------
def test_stdin_ending_mid_question_ends_the_server(node: str, tmp_path: Path) -> None:
    seen = drive(node, "hangup", tmp_path)  # drive checks the exit: status 0, within 5 s, gone
    assert seen["end"]["code"] == 0
    assert seen["effects"] == ["survey db"]


# -- 2: stdout -------------------------------------------------------------------------------------
def test_nothing_but_protocol_messages_on_stdout(node: str, tmp_path: Path) -> None:
    seen = drive(node, "stdout", tmp_path)  # drive checks stdout line by line
    assert seen["stop"] == "end_turn" and seen["said"] == "shouted HI"
    stderr = seen["end"]["stderr"]
    for line in ("importing acp_agents", "building the noisy agent", "SHOUT hi", "RAW BYTES"):
        assert line in stderr
    assert "logged hi" in stderr


# -- 23, the server's part -------------------------------------------------------------------------
def test_deep_questions_and_permissions_carry_their_path(node: str, tmp_path: Path) -> None:
    seen = drive(node, "headline", tmp_path)
    form = seen["planner"]["form"]
    assert form["_meta"]["hpd_agent"]["agent_path"] == ["Planner", "Clarifier"]
    assert form["message"] == "Planner > Clarifier: Which database should the plan assume?"
    assert seen["planner"]["said"] == "Plan: The user chose SQLite."
    permission = seen["top"]["permission"]
    assert permission["toolCall"]["_meta"]["hpd_agent"]["agent_path"] == ["Top", "Mid", "Leaf"]
    assert permission["toolCall"]["title"] == "Top > Mid > Leaf: deploy"
