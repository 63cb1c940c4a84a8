"""Live mode, the thread routes, and a server killed while a question is pending."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Server, post_run, read_until, run_input, sse_events, start_server

LIVE = {"forwardedProps": {"hpd_agent": {"mode": "live"}}}


def _wait_requests(c: httpx.Client, thread: str, count: int) -> list[dict[str, Any]]:
    """Follow the thread's events until ``count`` requests were announced (bounded)."""
    seen: list[dict[str, Any]] = []
    with c.stream("GET", f"/threads/{thread}/events", timeout=60) as response:
        buffer = ""
        for chunk in response.iter_text():
            buffer += chunk
            events = sse_events(buffer)
            seen = [e["value"] for e in events if e.get("name") == "hpd_agent.request"]
            if len(seen) >= count:
                return seen
    raise AssertionError(f"only {len(seen)} requests announced")


def test_live_run_outlives_its_client_and_takes_answers_by_post(server: Server) -> None:
    with server.client() as c:
        done: dict[str, Any] = {}

        def first_client() -> None:
            # This client leaves after the first request: the server-owned run goes on.
            with c.stream("POST", "/agent", json=run_input("t", "r1", "parallel", **LIVE)) as r:
                for line in r.iter_lines():
                    if "hpd_agent.request" in line:
                        done["left"] = True
                        return

        reader = threading.Thread(target=first_client)
        reader.start()
        reader.join(60)
        assert done.get("left")
        asked = _wait_requests(c, "t", 2)
        listed = c.get("/threads/t/requests").json()["requests"]
        assert {r["id"] for r in listed} == {r["id"] for r in asked}
        by_question = {r["question"]: r for r in asked}
        db = by_question["Which database?"]
        assert db["agentPath"] == ["Orchestrator", "Manager", "Specialist"]
        assert db["responseSchema"] == {"type": "string", "enum": ["postgres", "sqlite"]}
        assert c.post(f"/threads/t/requests/{db['id']}", json={"answer": "nope"}).status_code == 400
        for request, answer in ((db, "sqlite"), (by_question["First question?"], "hi")):
            ok = c.post(f"/threads/t/requests/{request['id']}", json={"answer": answer})
            assert ok.status_code == 200
        replay = c.get("/threads/t/events", params={"from": 0}, timeout=60).text
    events = sse_events(replay)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["result"] == "done: hi | manager: use sqlite"
    ids = [int(line[4:]) for line in replay.splitlines() if line.startswith("id: ")]
    assert ids == list(range(len(events)))


def test_messages_route_lists_the_thread_conversation(server: Server) -> None:
    with server.client() as c:
        post_run(c, run_input("t", "r1", "note"))
        messages = c.get("/threads/t/messages").json()["messages"]
        assert c.get("/threads/unknown/messages").status_code == 404
    assert messages[0] == {"id": "u-r1", "role": "user", "content": "note"}
    assert messages[1]["toolCalls"][0]["function"]["name"] == "write_note"
    assert messages[2]["role"] == "tool" and messages[2]["content"] == "noted: hello note"
    assert messages[-1]["content"] == "done: noted: hello note"


def test_killed_server_restarts_and_the_run_completes_with_each_side_effect_once(
    tmp_path: Path,
) -> None:
    first = start_server(tmp_path)
    try:
        with first.client() as c:
            _, events = post_run(c, run_input("t", "r1", "deep"))
        [interrupt] = events[-1]["outcome"]["interrupts"]
        assert first.notes() == ["specialist started"]
    finally:
        first.kill()  # SIGKILL while the question is pending
    second = start_server(tmp_path)
    try:
        with second.client() as c:
            pending = c.get("/threads/t/requests").json()["requests"]
            assert [r["id"] for r in pending] == [interrupt["id"]]
            resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "sqlite"}]
            _, after = post_run(c, run_input("t", "r2", resume=resume))
        assert after[-1]["result"] == "done: manager: use sqlite"
        results = {e["toolCallId"] for e in after if e["type"] == "TOOL_CALL_RESULT"}
        assert interrupt["toolCallId"] in results
        assert not [e for e in after if e["type"] == "TOOL_CALL_START"]
        assert second.notes() == ["specialist started"]
    finally:
        second.stop()


def _note_done(events: list[dict[str, Any]]) -> bool:
    """Whether the specialist's ``write_note`` call has sent its result."""
    notes = {e["toolCallId"] for e in events if e.get("toolCallName") == "write_note"}
    return any(e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] in notes for e in events)


def _wait_tool_journaled(db: Path) -> None:
    """Wait (bounded, on the store's state) until a tool result is in the journal."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            rows = conn.execute("SELECT key FROM hpd_journal WHERE kind = 'tool'").fetchall()
        if rows:
            return
        time.sleep(0.05)
    raise AssertionError("the note's tool result was never journaled")


def _wait_lease_lapsed(db: Path) -> None:
    """Wait (bounded, on the store's state) until no run's lease is live."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            rows = conn.execute("SELECT expires_at FROM hpd_leases").fetchall()
        if all(expires <= time.time() for (expires,) in rows):
            return
        time.sleep(0.05)
    raise AssertionError("the killed server's lease never lapsed")


def test_live_run_killed_mid_question_resumes_by_interrupt_after_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The killed server's run keeps its lease until it lapses (docs/guarantees.md): short here.
    monkeypatch.setenv("HPD_AGENT_LEASE_TTL", "1")
    first = start_server(tmp_path)
    try:
        with (
            first.client() as c,
            c.stream("POST", "/agent", json=run_input("t", "r1", "deep", **LIVE)) as response,
        ):
            text = ""
            for chunk in response.iter_text():
                text += chunk
                events = sse_events(text)
                asked = [e for e in events if e.get("name") == "hpd_agent.request"]
                if asked and _note_done(events):
                    break
            # The note's tool call runs beside the question: kill once its result is
            # journaled, so the resumed run replays it instead of writing the note again.
            _wait_tool_journaled(tmp_path / "web.db")
            first.kill()  # SIGKILL while the question is pending, its client still reading
            asked = asked[0]["value"]
    finally:
        first.kill()
    _wait_lease_lapsed(tmp_path / "web.db")
    second = start_server(tmp_path)
    try:
        with second.client() as c:
            resume = [{"interruptId": asked["id"], "status": "resolved", "payload": "postgres"}]
            _, after = post_run(c, run_input("t", "r2", resume=resume))
        assert after[-1]["result"] == "done: manager: use postgres"
        assert second.notes() == ["specialist started"]
    finally:
        second.stop()


def test_input_on_a_busy_thread_is_refused_and_the_run_goes_on(server: Server) -> None:
    with (
        server.client() as c,
        c.stream("POST", "/agent", json=run_input("t", "r1", "deep", **LIVE)) as response,
    ):
        lines = response.iter_text()
        text = read_until(lines)
        _, refused = post_run(c, run_input("t", "r2", "hello"))
        assert [e["type"] for e in refused] == ["RUN_STARTED", "RUN_ERROR"]
        assert refused[-1]["code"] == "busy"
        [asked] = c.get("/threads/t/requests").json()["requests"]
        assert c.post(f"/threads/t/requests/{asked['id']}", json={"answer": "sqlite"}).is_success
        text += "".join(lines)
    events = sse_events(text)
    assert events[-1]["result"] == "done: manager: use sqlite"
    assert "RUN_ERROR" not in [e["type"] for e in events]
