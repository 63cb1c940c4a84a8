"""The inbox's JSON API and event stream against a real ``hpd-agent inbox`` on 127.0.0.1:
the listing (oldest first, its fields, the ``path`` and ``kind`` filters, no run id), an
answer and each refusal (400 bounded, 404, 409; nothing written), a decline, the events of
requests opened and answered by other processes within a second, ``--hook`` hooks told of
every request of the store, and a feed lost and heard again.

On a SQLite file and on a PostgreSQL server.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

import anyio
import httpx
import pytest
from _webhooks import receiving
from inbox_hooks import SECRET
from inbox_server import REPO, Events, child_env, cli, inbox_server, make_store

from hpd_agent.events import ClarificationRequest
from hpd_agent.store import RequestRecord, open_store, respond
from hpd_agent.testing.store_contract import permission, question
from hpd_agent.text import MAX_ERROR_CHARS

FIELDS = {
    "request_id",
    "agent_path",
    "question_kind",
    "question",
    "options",
    "schema",
    "tool_name",
    "arguments",
    "created_at",
    "expires_at",
    "run_label",
    "label",
    "context",
    "data",
}


def _planner(request_id: str, created_at: float) -> RequestRecord:
    """A question of another run, asked by its root agent, a Planner."""
    event = ClarificationRequest(
        run_id="run_secret_2",
        agent_path=("Planner",),
        depth=0,
        request_id=request_id,
        question="Which **deadline**?",
        context="The release notes say _soon_.",
    )
    return RequestRecord.from_event(event, timeout=600, now=created_at)


async def _seed(location: str) -> None:
    store = open_store(location)
    now = time.time()
    try:
        for record in [
            replace(question("req_q1", options=("Express", "FastAPI")), created_at=now),
            replace(permission("req_p1"), created_at=now + 0.5),
            _planner("req_q2", now + 1),
            question("req_done"),
        ]:
            await store.add_request(record)
        await respond(store, "req_done", "Django")
    finally:
        await store.aclose()


async def _stored(location: str, request_id: str) -> RequestRecord:
    store = open_store(location)
    try:
        record = await store.get_request(request_id)
        assert record is not None
        return record
    finally:
        await store.aclose()


def _ids(client: httpx.Client, query: str = "") -> list[str]:
    response = client.get(f"inbox/requests{query}")
    assert response.status_code == 200, response.text
    return [r["request_id"] for r in response.json()["requests"]]


def test_the_listing_shows_every_pending_request_oldest_first(location: str) -> None:
    anyio.run(_seed, location)
    with inbox_server(location) as url, httpx.Client(base_url=url, timeout=60) as client:
        listed: list[dict[str, Any]] = client.get("inbox/requests").json()["requests"]
        assert [r["request_id"] for r in listed] == ["req_q1", "req_p1", "req_q2"]
        assert all(set(r) == FIELDS for r in listed)
        q1, p1, q2 = listed
        assert q1["question_kind"] == "text" and q1["options"] == ["Express", "FastAPI"]
        assert q1["schema"] == {"type": "string", "enum": ["Express", "FastAPI"]}
        assert q1["agent_path"] == ["Orchestrator", "CodingAgent"]
        assert (p1["question_kind"], p1["tool_name"], p1["arguments"]) == (
            "permission",
            "write_file",
            {"path": "a.txt"},
        )
        assert q2["context"] == "The release notes say _soon_."
        assert q2["expires_at"] == pytest.approx(q2["created_at"] + 600)
        # The run by its root agent and a tag; never by its id.
        assert q1["run_label"] == p1["run_label"] != q2["run_label"]
        assert q1["run_label"].startswith("Orchestrator #") and len(q1["run_label"]) == 20
        assert q2["run_label"].startswith("Planner #")
        body = client.get("inbox/requests").text
        assert "run_1" not in body and "run_secret_2" not in body
        # Filters: an agent path's names from the root, a kind; both at once.
        assert _ids(client, "?kind=permission") == ["req_p1"]
        assert _ids(client, "?path=Orchestrator") == ["req_q1", "req_p1"]
        assert _ids(client, "?path=Orchestrator > CodingAgent") == ["req_q1"]
        assert _ids(client, "?path=Orchestrator>CodingAgent") == ["req_q1"]
        assert _ids(client, "?path=Orchestrator > Coding") == []
        assert _ids(client, "?path=Planner&kind=text") == ["req_q2"]
        assert _ids(client, "?path=Planner&kind=permission") == []
        refused = client.get("inbox/requests", params={"path": "A" * 1001})
        assert refused.status_code == 400 and "at most 1000" in refused.json()["error"]


def test_answers_are_checked_as_the_store_checks_them(location: str) -> None:
    anyio.run(_seed, location)
    with inbox_server(location) as url, httpx.Client(base_url=url, timeout=60) as client:
        answered = client.post("inbox/requests/req_q1", json={"answer": "Express"})
        assert answered.status_code == 200, answered.text
        record = answered.json()
        assert (record["request_id"], record["status"], record["answer"]) == (
            "req_q1",
            "answered",
            "Express",
        )
        assert record["answered_at"] >= record["created_at"]
        # Without tokens the inbox answers as "local" (the audit trail's name for it).
        assert (record["answered_by"], record["channel"]) == ("local", "inbox")
        assert _ids(client) == ["req_p1", "req_q2"]  # listed no more, at once
        again = client.post("inbox/requests/req_q1", json={"answer": "FastAPI"})
        assert again.status_code == 409 and "already answered" in again.json()["error"]
        done = client.post("inbox/requests/req_done", json={"answer": "Flask"})
        assert done.status_code == 409
        unknown = client.post("inbox/requests/req_nope", json={"answer": "x"})
        assert unknown.status_code == 404
        # A permission takes a decision, exactly; a wrong one says why, boundedly.
        loose = client.post("inbox/requests/req_p1", json={"answer": "yes"})
        assert loose.status_code == 400 and "approve" in loose.json()["error"]
        huge = client.post("inbox/requests/req_p1", json={"answer": {"kind": "x" * 200_000}})
        assert huge.status_code == 400 and len(huge.json()["error"]) < MAX_ERROR_CHARS + 100
        for body in ({"answer": 1, "decline": True}, {"decline": False}, {"answr": 1}, [1]):
            assert client.post("inbox/requests/req_p1", json=body).status_code == 400
        not_json = client.post(
            "inbox/requests/req_p1", content=b"{", headers={"Content-Type": "application/json"}
        )
        assert not_json.status_code == 400
        assert anyio.run(_stored, location, "req_p1").status == "pending"  # nothing written
        declined = client.post("inbox/requests/req_q2", json={"decline": True})
        assert declined.status_code == 200 and declined.json()["status"] == "declined"
        approved = client.post(
            "inbox/requests/req_p1", json={"answer": {"kind": "approve", "scope": "run"}}
        )
        assert approved.status_code == 200
        assert approved.json()["answer"] == {"kind": "approve", "scope": "run"}
        assert client.get("inbox/requests").json() == {"requests": []}
    assert anyio.run(_stored, location, "req_q1").answer == "Express"
    assert anyio.run(_stored, location, "req_q1").answered_by == "local"
    assert anyio.run(_stored, location, "req_q2").status == "declined"


_ADD = """
import sys, time, anyio
from hpd_agent.store import open_store
from hpd_agent.testing.store_contract import permission, question
from hpd_agent.text import MAX_ERROR_CHARS

async def main(location):
    store = open_store(location)
    await store.add_request(question("req_text"))
    await store.add_request(permission("req_perm"))
    print(time.time(), flush=True)
    await store.aclose()

anyio.run(main, sys.argv[1])
"""


def test_events_tell_what_other_processes_open_and_answer_within_a_second(location: str) -> None:
    make_store(location)
    with inbox_server(location) as url:
        every = Events(url)
        permissions = Events(url, "?kind=permission")
        for stream in (every, permissions):
            stream.wait_for(lambda e, _: e == "ready")
        added = subprocess.run(
            [sys.executable, "-c", _ADD, location], env=child_env(), capture_output=True
        )
        assert added.returncode == 0, added.stderr
        written = float(added.stdout.split()[0])
        for request_id in ("req_text", "req_perm"):
            _, data, seen = every.wait_for(
                lambda e, d, r=request_id: e == "request_opened" and d["request_id"] == r
            )
            assert seen - written < 1.0
        assert data["question_kind"] == "permission" and data["tool_name"] == "write_file"
        answer = cli("answer", "req_text", "Express", "--db", location)
        assert subprocess.run(answer, cwd=REPO, env=child_env()).returncode == 0
        _, data, seen = every.wait_for(lambda e, _: e == "request_resolved")
        assert (data["request_id"], data["status"]) == ("req_text", "answered")
        assert data["channel"] == "cli" and data["answered_by"]  # as the other process wrote
        assert data["run_label"].startswith("Orchestrator #")
        assert seen - data["answered_at"] < 1.0  # from the write (the answering process's clock)
        # With what was asked and answered: a page shows it without listing it again.
        assert (data["answer"], data["question_kind"]) == ("Express", "text")
        with httpx.Client(base_url=url, timeout=60) as client:
            ended = client.get("inbox/resolved").json()["resolved"]
            assert [(r["request_id"], r["answer"], r["channel"]) for r in ended] == [
                ("req_text", "Express", "cli")
            ]
            assert ended[0]["question"] == data["question"] and ended[0]["answered_by"]
            assert client.get("inbox/resolved?kind=permission").json() == {"resolved": []}
        # The filtered stream was told of the permission alone.
        permissions.wait_for(lambda e, d: e == "request_opened" and d["request_id"] == "req_perm")
        assert [d["request_id"] for e, d, _ in permissions.seen if e.startswith("request_")] == [
            "req_perm"
        ]
        every.close()
        permissions.close()


async def _open(location: str, record: RequestRecord) -> None:
    store = open_store(location)
    try:
        await store.add_request(record)
    finally:
        await store.aclose()


async def _answer(location: str, request_id: str, answer: Any) -> None:
    store = open_store(location)
    try:
        await respond(store, request_id, answer)
    finally:
        await store.aclose()


def test_hooks_are_told_of_every_request_of_the_store(location: str) -> None:
    make_store(location)
    with receiving() as (receiver, hook_url):
        args = ("--hook", "inbox_hooks:webhook")
        with inbox_server(location, *args, HPD_TEST_WEBHOOK=hook_url) as url:
            events = Events(url)
            events.wait_for(lambda e, _: e == "ready")
            # Written by this process, not the inbox's: the store's feed tells the inbox.
            anyio.run(_open, location, question("req_hooked"))
            events.wait_for(lambda e, _: e == "request_opened")
            anyio.run(_answer, location, "req_hooked", "Express")
            assert receiver.wait_arrived(2)
            events.close()
    notes = [r.payload for r in receiver.received]
    assert [(n["event"], n["request_id"]) for n in notes] == [
        ("opened", "req_hooked"),
        ("resolved", "req_hooked"),
    ]
    assert notes[1]["status"] == "answered"
    assert all(r.signed_by(SECRET) for r in receiver.received)


def test_a_lost_feed_tells_the_streams_to_resync_and_listens_again(fresh_postgres: str) -> None:
    import psycopg

    with inbox_server(fresh_postgres) as url:
        before = Events(url)
        before.wait_for(lambda e, _: e == "ready")
        # The inbox's listening connection dies (a server restart, a proxy's timeout).
        with psycopg.connect(fresh_postgres, autocommit=True) as conn:
            killed = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN hpd_agent_opened%'"
            ).fetchall()
        assert len(killed) == 1
        before.wait_for(lambda e, _: e == "resync")  # what happened meanwhile: list again
        after = Events(url)
        after.wait_for(lambda e, _: e == "ready")  # listening again, on a new connection
        anyio.run(_open, fresh_postgres, question("req_after_loss"))
        after.wait_for(lambda e, d: e == "request_opened" and d["request_id"] == "req_after_loss")
        with httpx.Client(base_url=url, timeout=60) as client:
            assert _ids(client) == ["req_after_loss"]
        before.close()
        after.close()
