"""``hpd-agent serve`` says what it does: one line per run started, resumed or ended and per
request asked or answered (who asks, who answered and through what; the thread), after the
time of day; ``--quiet`` says only where it serves. Each test runs the command as a child
(``examples/served_agent.py:agent``: a depth-2 question, then a permission) and reads its
output line by line as it comes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from _child import Lines, child_lines
from conftest import REPO, post_run, run_input, sse_events
from test_served_example import live_run

AGENT = "examples/served_agent.py:agent"
_SERVING = re.compile(r"Serving \S+ on (http://\S+)")
_RID = r"req_[0-9a-f]+"
_RUN = r"run_[0-9a-f]+"
_QUESTION = 'Choose one: Which web framework for "Build a todo API"\\?'


@contextmanager
def serving(folder: Path, *flags: str) -> Generator[tuple[str, Lines]]:
    """``hpd-agent serve`` of the served example, its URL and its output line by line."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("HPD_AGENT_TOKEN", None)
    command = [sys.executable, "-m", "hpd_agent.cli", "serve", AGENT, "--port", "0"]
    store = ["--store", str(folder / "web.db")]
    with child_lines([*command, *store, *flags], cwd=REPO, env=env) as lines:
        match = _SERVING.search(lines.until(r"Serving .*")[-1])
        assert match is not None
        yield match.group(1), lines


def _timed(pattern: str) -> str:
    return r"\d\d:\d\d:\d\d " + pattern


def test_a_live_run_and_its_questions_answered_on_the_page_are_said_one_line_each(
    tmp_path: Path,
) -> None:
    with serving(tmp_path) as (url, served), httpx.Client(base_url=url, timeout=60) as client:
        user = {"id": "u1", "role": "user", "content": "Build a todo API"}
        asked, events = live_run(client, "first", "first-1", [user])
        assert events[-1]["type"] == "RUN_FINISHED"
        said = served.until(_timed(rf"run {_RUN} completed \(thread first, live\) after .*"))
    question, permission = (r["id"] for r in asked)
    expected = [
        rf"run {_RUN} started \(thread first, live\)",
        rf"request {question} asked by Orchestrator > Coder > Clarifier \(thread first, live\): "
        + _QUESTION,
        rf"request {question} answered by local via the inbox \(thread first\)",
        rf"request {permission} asked by Orchestrator > Coder \(thread first, live\): "
        r"Permission: Allow write_file\?",
        rf"request {permission} answered by local via the inbox \(thread first\)",
        rf"run {_RUN} completed \(thread first, live\) after \d+\.\d s",
    ]
    assert len(said) == len(expected), said
    for line, pattern in zip(said, expected, strict=True):
        assert re.fullmatch(_timed(pattern), line), (line, pattern)


def test_an_interrupted_run_resumed_with_answers_says_who_gave_them(tmp_path: Path) -> None:
    with serving(tmp_path) as (url, served), httpx.Client(base_url=url, timeout=60) as client:
        _, first = post_run(client, run_input("t", "r1", "Build a todo API"))
        (interrupt,) = first[-1]["outcome"]["interrupts"]
        resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "Express"}]
        _, second = post_run(client, run_input("t", "r2", resume=resume))
        (permission,) = second[-1]["outcome"]["interrupts"]
        # The permission answered on the inbox route while the run waits; then resumed.
        posted = client.post(f"/threads/t/requests/{permission['id']}", json={"decline": True})
        assert posted.status_code == 200, posted.text
        _, third = post_run(client, run_input("t", "r3", resume=[]))
        assert third[-1]["type"] == "RUN_FINISHED"
        said = served.until(_timed(rf"run {_RUN} completed \(thread t, interrupt\) after .*"))
    rid, pid = interrupt["id"], permission["id"]
    expected = [
        rf"run {_RUN} started \(thread t, interrupt\)",
        rf"request {rid} asked by Orchestrator > Coder > Clarifier \(thread t, interrupt\): "
        + _QUESTION,
        rf"run {_RUN} interrupted \(thread t, interrupt\) after \d+\.\d s: 1 request waiting",
        rf"run {_RUN} resumed \(thread t, interrupt\)",
        rf"request {rid} answered by local via an AG-UI resume \(thread t\)",
        rf"request {pid} asked by Orchestrator > Coder \(thread t, interrupt\): "
        r"Permission: Allow write_file\?",
        rf"run {_RUN} interrupted \(thread t, interrupt\) after \d+\.\d s: 1 request waiting",
        rf"request {pid} declined by local via the inbox \(thread t\)",
        rf"run {_RUN} resumed \(thread t, interrupt\)",
        rf"run {_RUN} completed \(thread t, interrupt\) after \d+\.\d s",
    ]
    assert len(said) == len(expected), said
    for line, pattern in zip(said, expected, strict=True):
        assert re.fullmatch(_timed(pattern), line), (line, pattern)


def test_an_answer_from_another_process_is_said_as_given_through_the_store(
    tmp_path: Path,
) -> None:
    body = {
        "threadId": "t",
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "Build a todo API"}],
        "forwardedProps": {"hpd_agent": {"mode": "live"}},
    }
    with (
        serving(tmp_path) as (url, served),
        httpx.Client(base_url=url, timeout=60) as client,
        client.stream("POST", "/agent", json=body) as response,
    ):
        events = _events(response.iter_text())
        question = _next_request(events)
        store = str(tmp_path / "web.db")
        command = [sys.executable, "-m", "hpd_agent.cli", "answer", question["id"], "2"]
        answered = subprocess.run(  # in another process, while the run waits here
            [*command, "--store", store],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert answered.returncode == 0, answered.stderr
        permission = _next_request(events)
        said = served.until(_timed(rf"request {permission['id']} asked .*"))
    assert re.fullmatch(
        _timed(rf"request {question['id']} answered elsewhere, through the store \(thread t, "
               r"live\)"),
        said[-2],
    ), said  # fmt: skip


def _events(chunks: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The events of an SSE stream, each once it has fully arrived."""
    buffer = ""
    for chunk in chunks:
        buffer += chunk
        complete, _, buffer = buffer.rpartition("\n\n")
        if complete:
            yield from sse_events(complete + "\n\n")


def _next_request(events: Iterator[dict[str, Any]]) -> dict[str, Any]:
    return next(
        e["value"] for e in events if e.get("type") == "CUSTOM" and e["name"] == "hpd_agent.request"
    )


def test_quiet_says_only_where_it_serves(tmp_path: Path) -> None:
    with serving(tmp_path, "--quiet") as (url, served), httpx.Client(base_url=url) as client:
        user = {"id": "u1", "role": "user", "content": "Build a todo API"}
        _, events = live_run(client, "first", "first-1", [user])
        assert events[-1]["type"] == "RUN_FINISHED"
        assert served.rest() == []
