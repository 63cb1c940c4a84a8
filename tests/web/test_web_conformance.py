"""Conformance: the real ``@ag-ui/client`` HttpAgent (Node) drives ``hpd-agent serve``.

The npm packages are pinned in tests/web/node/package.json (lock file beside it) and
installed once into tests/web/node/node_modules by the fixture below (with npm ci; node and
npm themselves are not installed by the tests); without node/npm, or when the registry can't
be reached, the tests skip with the reason. Every response body the
client received is captured byte for byte and checked by ag-ui-validate 0.4.0: zero errors,
zero warnings.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Server, assert_conformant, sse_events

NODE_DIR = Path(__file__).parent / "node"


@pytest.fixture(scope="module")
def node() -> str:
    # The tests install no system packages: node and npm come from the machine (Debian's
    # nodejs and npm; .ci/run installs them). Only the pinned npm packages are fetched here.
    exe, npm = shutil.which("node"), shutil.which("npm")
    missing = [name for name, path in (("node", exe), ("npm", npm)) if path is None]
    if exe is None or npm is None:
        pytest.skip(
            f"{' and '.join(missing)} not found: the @ag-ui/client conformance tests need "
            "node and npm (apt-get install nodejs npm; .ci/run does)"
        )
    if not (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=280,
        )
        if done.returncode != 0:
            pytest.skip(f"npm could not install @ag-ui/client: {done.stderr.strip()[-500:]}")
    return exe


def drive(node: str, server: Server, scenario: str, out: Path) -> dict[str, Any]:
    done = subprocess.run(
        [node, "drive.mjs", server.url, scenario, str(out)],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def captures(out: Path, scenario: str) -> list[str]:
    files = sorted(out.glob(f"{scenario}-*.sse"), key=lambda p: int(p.stem.split("-")[-1]))
    assert files, f"no capture for {scenario}"
    return [f.read_text() for f in files]


def check_all(out: Path, scenario: str, count: int) -> list[list[dict[str, Any]]]:
    texts = captures(out, scenario)
    assert len(texts) == count
    for i, text in enumerate(texts):
        assert_conformant(text, out, f"{scenario}-{i}-checked")
    return [sse_events(t) for t in texts]


def test_chat(node: str, server: Server, tmp_path: Path) -> None:
    summary = drive(node, server, "chat", tmp_path)
    [run] = summary["runs"]
    assert run["result"] == "Hello! You said: hello"
    assert run["types"][0] == "RUN_STARTED" and run["types"][-1] == "RUN_FINISHED"
    assert summary["messages"][-1]["content"] == "Hello! You said: hello"
    check_all(tmp_path, "chat", 1)


def test_tool_call(node: str, server: Server, tmp_path: Path) -> None:
    summary = drive(node, server, "tool", tmp_path)
    assert summary["runs"][0]["result"] == "done: noted: hello note"
    calls = [m for m in summary["messages"] if m["role"] == "assistant" and m.get("toolCalls")]
    assert calls[0]["toolCalls"][0]["function"]["name"] == "write_note"
    assert any(
        m["role"] == "tool" and m["content"] == "noted: hello note" for m in summary["messages"]
    )
    check_all(tmp_path, "tool", 1)
    assert server.notes() == ["hello note"]


def test_depth_three_question_via_interrupt_and_resume(
    node: str, server: Server, tmp_path: Path
) -> None:
    summary = drive(node, server, "deep", tmp_path)
    first, second = summary["runs"]
    [interrupt] = first["finished"]["outcome"]["interrupts"]
    assert interrupt["message"] == "Which database?"
    assert second["result"] == "done: manager: use sqlite"
    streams = check_all(tmp_path, "deep", 2)
    names = {e["subagentRunId"]: e for e in streams[0] if e["type"] == "SUBAGENT_STARTED"}
    leaf = names[interrupt["subagentRunId"]]
    assert [leaf["name"], names[leaf["parentSubagentRunId"]]["name"]] == ["Specialist", "Manager"]
    results = [e for e in streams[1] if e["type"] == "TOOL_CALL_RESULT"]
    assert interrupt["toolCallId"] in {e["toolCallId"] for e in results}
    assert server.notes() == ["specialist started"]


def test_parallel_questions_answered_in_reverse_order_via_interrupt(
    node: str, server: Server, tmp_path: Path
) -> None:
    summary = drive(node, server, "parallel", tmp_path)
    first, second = summary["runs"]
    interrupts = first["finished"]["outcome"]["interrupts"]
    assert [i["message"] for i in interrupts] == ["First question?", "Second question?"]
    assert second["result"] == "done: the first answer | the second answer"
    check_all(tmp_path, "parallel", 2)


def test_parallel_questions_from_two_depths_answered_in_reverse_order_live(
    node: str, server: Server, tmp_path: Path
) -> None:
    summary = drive(node, server, "live", tmp_path)
    asked = summary["asked"]
    assert [r["agentPath"] for r in asked] == [
        ["Orchestrator"],
        ["Orchestrator", "Manager", "Specialist"],
    ]
    assert [a["status"] for a in summary["answers"]] == [200, 200]
    assert [a["body"]["id"] for a in summary["answers"]] == [asked[1]["id"], asked[0]["id"]]
    [run] = summary["runs"]
    assert run["result"] == "done: the first answer | manager: use postgres"
    resolved = [c for c in run["customs"] if c["name"] == "hpd_agent.request_resolved"]
    assert [c["value"]["id"] for c in resolved] == [asked[1]["id"], asked[0]["id"]]
    check_all(tmp_path, "live", 1)
