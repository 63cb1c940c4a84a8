"""Answers given outside the AG-UI stream: the live-mode route by request id alone, and an
interrupted run answered by the answer route, ``hpd-agent answer`` or expiry, then resumed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import REPO, Server, post_run, read_until, run_input, sse_events, start_server

from hpd_agent.store import SQLiteStore

LIVE = {"forwardedProps": {"hpd_agent": {"mode": "live"}}}


def test_live_request_is_answered_by_its_id_alone(server: Server) -> None:
    with (
        server.client() as c,
        c.stream("POST", "/agent", json=run_input("t", "r1", "deep", **LIVE)) as response,
    ):
        chunks = response.iter_text()
        text = read_until(chunks)
        asked = next(e["value"] for e in sse_events(text) if e.get("name") == "hpd_agent.request")
        assert c.post(f"/requests/{asked['id']}", json={"answer": "nope"}).status_code == 400
        wrong = c.post(f"/requests/{asked['id']}", json={"threadId": "other", "answer": "sqlite"})
        assert wrong.status_code == 404
        ok = c.post(f"/requests/{asked['id']}", json={"answer": "sqlite"})
        assert ok.status_code == 200 and ok.json() == {"id": asked["id"], "answer": "sqlite"}
        again = c.post(f"/requests/{asked['id']}", json={"answer": "sqlite"})
        assert again.status_code == 409
        assert c.post("/requests/req_unknown", json={"answer": "x"}).status_code == 404
        text += "".join(chunks)
    assert sse_events(text)[-1]["result"] == "done: manager: use sqlite"


def _answer_by_route(server: Server, c: httpx.Client, request_id: str) -> None:
    assert c.post(f"/threads/t/requests/{request_id}", json={"answer": "sqlite"}).is_success


def _answer_by_cli(server: Server, c: httpx.Client, request_id: str) -> None:
    command = [sys.executable, "-m", "hpd_agent.cli", "answer", request_id, "sqlite"]
    done = subprocess.run(
        [*command, "--db", str(server.folder / "web.db")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _answer_by_expiry(server: Server, c: httpx.Client, request_id: str) -> None:
    async def expire() -> list[str]:
        store = SQLiteStore(server.folder / "web.db")
        try:
            return await store.recover(0)
        finally:
            await store.aclose()

    assert anyio.run(expire) == [request_id]


ANSWERERS = {"route": _answer_by_route, "cli": _answer_by_cli, "expiry": _answer_by_expiry}


@pytest.mark.parametrize("how", sorted(ANSWERERS))
@pytest.mark.parametrize("entries", ["named", "empty"])
def test_an_interrupted_run_answered_elsewhere_is_continued_by_the_next_resume(
    server: Server, how: str, entries: str
) -> None:
    with server.client() as c:
        _, first = post_run(c, run_input("t", "r1", "deep"))
        [interrupt] = first[-1]["outcome"]["interrupts"]
        ANSWERERS[how](server, c, interrupt["id"])
        assert c.get("/threads/t/requests").json()["requests"] == []
        _, refused = post_run(c, run_input("t", "r2", "hello"))
        assert refused[-1]["code"] == "interrupted"  # a new prompt still waits for the run
        resume: list[dict[str, Any]] = []
        if entries == "named":  # what a client that saw the interrupt sends: the store wins
            resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "postgres"}]
        _, after = post_run(c, run_input("t", "r3", resume=resume))
    assert after[-1]["type"] == "RUN_FINISHED", after[-1]
    assert after[-1]["outcome"] == {"type": "success"}
    if how != "expiry":
        assert after[-1]["result"] == "done: manager: use sqlite"
    assert server.notes() == ["specialist started"]


def test_a_resume_naming_another_runs_request_is_still_refused(server: Server) -> None:
    with server.client() as c:
        _, first = post_run(c, run_input("a", "r1", "deep"))
        [other] = first[-1]["outcome"]["interrupts"]
        _, mine = post_run(c, run_input("b", "r1", "deep"))
        [own] = mine[-1]["outcome"]["interrupts"]
        assert c.post(f"/threads/b/requests/{own['id']}", json={"answer": "sqlite"}).is_success
        resume = [{"interruptId": other["id"], "status": "resolved", "payload": "sqlite"}]
        _, refused = post_run(c, run_input("b", "r2", resume=resume))
        assert refused[-1]["code"] == "unknown_interrupt"
        assert c.get("/threads/a/requests").json()["requests"][0]["id"] == other["id"]


def test_a_live_request_is_declined_by_its_id(server: Server) -> None:
    with (
        server.client() as c,
        c.stream("POST", "/agent", json=run_input("t", "r1", "deep", **LIVE)) as response,
    ):
        chunks = response.iter_text()
        text = read_until(chunks)
        asked = next(e["value"] for e in sse_events(text) if e.get("name") == "hpd_agent.request")
        path = f"/requests/{asked['id']}"
        for bad in ({"decline": False}, {"decline": True, "answer": "sqlite"}, {}):
            assert c.post(path, json=bad).status_code == 400, bad
        ok = c.post(path, json={"decline": True})
        assert ok.status_code == 200 and ok.json() == {"id": asked["id"], "declined": True}
        for late in ({"decline": True}, {"answer": "sqlite"}):
            again = c.post(path, json=late)
            assert again.status_code == 409 and "declined" in again.json()["error"]
        text += "".join(chunks)
    events = sse_events(text)
    (resolved,) = [e["value"] for e in events if e.get("name") == "hpd_agent.request_resolved"]
    assert resolved == {"id": asked["id"], "status": "declined", "answer": None}
    assert events[-1]["result"].startswith("done: manager: use The user declined to answer.")


def test_an_interrupted_run_declined_by_the_thread_route_goes_on(server: Server) -> None:
    with server.client() as c:
        _, first = post_run(c, run_input("t", "r1", "deep"))
        [interrupt] = first[-1]["outcome"]["interrupts"]
        declined = c.post(f"/threads/t/requests/{interrupt['id']}", json={"decline": True})
        assert declined.json() == {"id": interrupt["id"], "declined": True}
        assert c.get("/threads/t/requests").json()["requests"] == []
        _, after = post_run(c, run_input("t", "r2", resume=[]))
    assert after[-1]["type"] == "RUN_FINISHED", after[-1]
    assert after[-1]["result"].startswith("done: manager: use The user declined to answer.")


def test_a_kind_of_the_apps_own_is_described_and_checked_by_its_schema(tmp_path: Path) -> None:
    server = start_server(tmp_path, agent="tests.web.rating_agents:rater")
    try:
        with (
            server.client() as c,
            c.stream("POST", "/agent", json=run_input("t", "r1", "rate", **LIVE)) as response,
        ):
            chunks = response.iter_text()
            text = read_until(chunks)
            asked = next(
                e["value"] for e in sse_events(text) if e.get("name") == "hpd_agent.request"
            )
            assert (asked["kind"], asked["label"]) == ("rating", "Rate 1–5")
            schema = {"type": "integer", "minimum": 1, "maximum": 5}
            assert asked["responseSchema"] == schema
            assert c.get("/threads/t/requests").json()["requests"][0]["label"] == "Rate 1–5"
            path = f"/requests/{asked['id']}"
            for bad, why in [(9, "9 is greater than the maximum of 5"), ("4", "not of type")]:
                refused = c.post(path, json={"answer": bad})
                assert refused.status_code == 400 and why in refused.text, refused.text
            ok = c.post(path, json={"answer": 4})
            assert ok.status_code == 200 and ok.json() == {"id": asked["id"], "answer": 4}
            text += "".join(chunks)
        assert sse_events(text)[-1]["result"] == "done: rated 4 of 5"
    finally:
        server.stop()
