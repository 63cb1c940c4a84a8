"""The documented ``hpd-agent serve`` command, run as written from the root of a checkout.

README.md and docs/web.md name one agent to serve; these tests start exactly that command as
a subprocess (the ``hpd-agent`` console script of this interpreter, on a free port and a
store in tmp_path) and drive it over HTTP as the page and an AG-UI client do: the depth-2
question and the permission request come, are answered, and the run finishes. Every new
conversation, and a second task in one, plays the whole exchange again.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import REPO, post_run, run_input, sse_events

SERVE_LINE = re.compile(r"hpd-agent serve (\S+)")
SERVING = re.compile(r"Serving (\S+) on (http://\S+)")
LIVE = {"forwardedProps": {"hpd_agent": {"mode": "live"}}}


def documented_refs() -> list[str]:
    """Every agent reference a ``hpd-agent serve`` command in README.md or docs/web.md names
    (the synopsis ``MODULE:ATTR`` left out)."""
    refs: list[str] = []
    for doc in (REPO / "README.md", REPO / "docs" / "web.md"):
        refs += [r.strip("`") for r in SERVE_LINE.findall(doc.read_text()) if r != "MODULE:ATTR"]
    return refs


def test_the_docs_name_one_agent_to_serve_and_it_is_shipped() -> None:
    refs = documented_refs()
    assert len(refs) >= 2, refs  # README's line and docs/web.md's
    assert len(set(refs)) == 1, f"README.md and docs/web.md serve different agents: {refs}"
    script = refs[0].rpartition(":")[0]
    assert (REPO / script).is_file(), f"{script} is not in the repository"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The documented command, exactly, in the repository root; yields its URL."""
    ref = documented_refs()[0]
    exe = shutil.which("hpd-agent", path=str(Path(sys.executable).parent))
    command = [exe] if exe else [sys.executable, "-m", "hpd_agent.cli"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("HPD_AGENT_TOKEN", None)
    proc = subprocess.Popen(
        [*command, "serve", ref, "--port", "0", "--store", str(tmp_path / "web.db")],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    url = None
    try:
        while url is None:
            line = lines.get(timeout=60)
            if line is None:
                raise AssertionError(f"`hpd-agent serve {ref}` exited:\n" + "".join(output))
            found = SERVING.search(line)
            if found:
                assert found.group(1) == "Orchestrator"
                url = found.group(2)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "Traceback" not in "".join(output), "".join(output)


def live_run(
    client: httpx.Client, thread: str, run: str, messages: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One live run: every request is answered (by POST, on another connection) as it comes.

    Returns the requests announced and the run's events.
    """
    body = {"threadId": thread, "runId": run, "messages": messages, **LIVE}
    asked: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    with (
        httpx.Client(base_url=str(client.base_url), timeout=60) as answers,
        client.stream("POST", "/agent", json=body) as response,
    ):
        assert response.status_code == 200
        buffer = ""
        for chunk in response.iter_text():
            buffer += chunk
            frames, _, buffer = buffer.rpartition("\n\n")
            for event in sse_events(frames + "\n\n") if frames else []:
                if event.get("type") == "CUSTOM" and event["name"] == "hpd_agent.request":
                    asked.append(event["value"])
                    answer = answer_for(event["value"])
                    posted = answers.post(
                        f"/threads/{thread}/requests/{event['value']['id']}",
                        json={"answer": answer},
                    )
                    assert posted.status_code == 200, posted.text
                events.append(event)
        return asked, events


def answer_for(request: dict[str, Any]) -> Any:
    if request["kind"] == "permission":
        return {"kind": "approve", "scope": "once"}
    return "Django"


def check_exchange(asked: list[dict[str, Any]], task: str) -> None:
    question, permission = asked
    assert question["agentPath"] == ["Orchestrator", "Coder", "Clarifier"]  # depth 2
    assert question["question"] == f'Which web framework for "{task}"?'
    assert question["options"] == ["FastAPI", "Express", "Django"]
    assert permission["kind"] == "permission"
    assert permission["agentPath"] == ["Orchestrator", "Coder"]
    assert permission["toolName"] == "write_file"
    assert permission["arguments"]["path"] == "views.py"


def test_the_documented_command_serves_a_nested_agent_that_asks_live(
    served: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = served
    with httpx.Client(base_url=url, timeout=60) as client:
        for thread in ("first", "second"):  # every new conversation plays it all again
            user = {"id": f"u-{thread}", "role": "user", "content": "Build a todo API"}
            asked, got = live_run(client, thread, f"{thread}-1", [user])
            check_exchange(asked, "Build a todo API")
            assert got[-1]["type"] == "RUN_FINISHED", got[-1]
            assert got[-1]["result"] == "Done. Built it with Django and wrote views.py."
            resolved = [e for e in got if e.get("name") == "hpd_agent.request_resolved"]
            assert [r["value"]["id"] for r in resolved] == [r["id"] for r in asked]

        # A second task in the same conversation: the history goes with it, the exchange again.
        history = client.get("/threads/first/messages").json()["messages"]
        again = {"id": "u-first-2", "role": "user", "content": "Build a blog"}
        asked, got = live_run(client, "first", "first-2", [*history, again])
        check_exchange(asked, "Build a blog")
        assert got[-1]["result"] == "Done. Built it with Django and wrote views.py."


def test_the_documented_command_serves_an_ag_ui_client_with_interrupts(
    served: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = served
    with httpx.Client(base_url=url, timeout=60) as client:
        _, first = post_run(client, run_input("t", "r1", "Build a todo API"))
        interrupts = first[-1]["outcome"]["interrupts"]
        assert [i["message"] for i in interrupts] == ['Which web framework for "Build a todo API"?']
        _, second = post_run(
            client,
            run_input(
                "t",
                "r2",
                resume=[
                    {"interruptId": interrupts[0]["id"], "status": "resolved", "payload": "Express"}
                ],
            ),
        )
        (permission,) = second[-1]["outcome"]["interrupts"]
        assert permission["reason"] == "confirmation"
        approve = {"kind": "approve", "scope": "once"}
        resume = [{"interruptId": permission["id"], "status": "resolved", "payload": approve}]
        _, third = post_run(client, run_input("t", "r3", resume=resume))
    assert third[-1]["type"] == "RUN_FINISHED"
    assert third[-1]["result"] == "Done. Built it with Express and wrote app.js."
