"""Who answered on the web, and who may: named tokens (``serve --token NAME=SECRET``), the
token's name recorded with each answer (channel ``web``; ``local`` on a server without
tokens), and ``serve --policy``: a refused answer is a 403 saying why and nothing is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from _logged_policy import asked
from conftest import Server, post_run, run_input, start_server

from hpd_agent.store import RequestRecord, SQLiteStore

TOKENS = ("--token", "alice=alice-secret", "--token", "bob=bob-secret")


@pytest.fixture
def governed(tmp_path: Path) -> Iterator[Server]:
    s = start_server(tmp_path, *TOKENS, "--policy", "tests.web.agents:POLICY")
    yield s
    s.stop()


def _as(server: Server, name: str) -> httpx.Client:
    secret = f"{name}-secret"
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {secret}"}, timeout=60
    )


def _record(server: Server, request_id: str) -> RequestRecord:
    async def read() -> RequestRecord | None:
        store = SQLiteStore(server.folder / "web.db")
        try:
            return await store.get_request(request_id)
        finally:
            await store.aclose()

    record = anyio.run(read)
    assert record is not None
    return record


def test_a_policy_refuses_bobs_approval_and_alice_answers_as_herself(governed: Server) -> None:
    with _as(governed, "bob") as bob, _as(governed, "alice") as alice:
        _, first = post_run(bob, run_input("t", "r1", "permission"))
        [interrupt] = first[-1]["outcome"]["interrupts"]
        rid = interrupt["id"]
        refused = bob.post(f"/threads/t/requests/{rid}", json={"answer": {"kind": "approve"}})
        assert refused.status_code == 403
        said = refused.json()["error"]
        assert (
            "'bob' may not answer request" in said and "only alice may decide 'delete_file'" in said
        )
        declined = bob.post(f"/threads/t/requests/{rid}", json={"decline": True})
        assert declined.status_code == 403  # a decline is an answer too
        pending = _record(governed, rid)
        assert (pending.status, pending.answered_at, pending.answered_by) == ("pending", None, None)
        # AG-UI's resume is held to the same rule, all or nothing.
        resume = [{"interruptId": rid, "status": "resolved", "payload": {"kind": "approve"}}]
        _, not_allowed = post_run(bob, run_input("t", "r2", resume=resume))
        assert not_allowed[-1]["code"] == "not_allowed"
        assert _record(governed, rid).status == "pending"
        ok = alice.post(f"/threads/t/requests/{rid}", json={"answer": {"kind": "approve"}})
        assert ok.status_code == 200, ok.text
    record = _record(governed, rid)
    assert (record.status, record.answered_by, record.channel) == ("answered", "alice", "web")


def test_an_ag_ui_resume_is_recorded_as_given_by_the_tokens_name(governed: Server) -> None:
    with _as(governed, "alice") as alice:
        _, first = post_run(alice, run_input("t", "r1", "permission"))
        [interrupt] = first[-1]["outcome"]["interrupts"]
        resume = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"kind": "approve"}}
        ]
        _, second = post_run(alice, run_input("t", "r2", resume=resume))
        assert second[-1]["type"] == "RUN_FINISHED"
    record = _record(governed, interrupt["id"])
    assert (record.status, record.answered_by, record.channel) == ("answered", "alice", "web")


def test_without_tokens_an_answer_is_recorded_as_local(server: Server) -> None:
    with server.client() as c:
        _, first = post_run(c, run_input("t", "r1", "deep"))
        [interrupt] = first[-1]["outcome"]["interrupts"]
        done = c.post(f"/threads/t/requests/{interrupt['id']}", json={"answer": "sqlite"})
        assert done.status_code == 200
    record = _record(server, interrupt["id"])
    assert (record.answered_by, record.channel) == ("local", "web")


def test_a_bare_token_is_named_token(tmp_path: Path) -> None:
    bare = start_server(tmp_path, "--token", "s3cr3t==")  # its base64 padding stays a secret
    try:
        with httpx.Client(
            base_url=bare.url, headers={"Authorization": "Bearer s3cr3t=="}, timeout=60
        ) as c:
            _, first = post_run(c, run_input("t", "r1", "deep"))
            [interrupt] = first[-1]["outcome"]["interrupts"]
            assert c.post(
                f"/threads/t/requests/{interrupt['id']}", json={"answer": "sqlite"}
            ).is_success
        assert _record(bare, interrupt["id"]).answered_by == "token"
    finally:
        bare.stop()


def test_the_policy_is_asked_once_per_answer_given_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy may look a name up in a directory or log each decision: one question to it
    per answer posted, whether it allows the answer or refuses it."""
    log = tmp_path / "policy.log"
    monkeypatch.setenv("HPD_TEST_POLICY_LOG", str(log))  # the server's child inherits it
    server = start_server(tmp_path, *TOKENS, "--policy", "tests.web.agents:LOGGED")
    try:
        with _as(server, "bob") as bob, _as(server, "alice") as alice:
            _, first = post_run(bob, run_input("t", "r1", "permission"))
            [interrupt] = first[-1]["outcome"]["interrupts"]
            rid, approve = interrupt["id"], {"answer": {"kind": "approve"}}
            refused = bob.post(f"/threads/t/requests/{rid}", json=approve)
            assert refused.status_code == 403, refused.text
            assert asked(log) == [f"bob {rid}"]
            given = alice.post(f"/threads/t/requests/{rid}", json=approve)
            assert given.status_code == 200, given.text
            assert asked(log) == [f"bob {rid}", f"alice {rid}"]
    finally:
        server.stop()
    assert _record(server, rid).answered_by == "alice"
