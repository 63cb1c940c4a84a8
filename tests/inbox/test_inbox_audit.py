"""The inbox on the audit trail: an answer or decline given through a real ``hpd-agent
inbox`` is recorded as given by the name of the bearer token used (``--token NAME=SECRET``;
a bare secret is named ``token``) on channel ``inbox``: in the POST's reply, on the
``request_resolved`` events, to ``--hook`` hooks and in ``hpd-agent history``. ``--policy``
refuses an answer with a 403 saying why, and nothing is written.

On a SQLite file and on a PostgreSQL server.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import httpx
from _logged_policy import asked
from _webhooks import receiving
from inbox_server import REPO, Events, child_env, cli, inbox_server
from test_inbox_api import _ids, _seed, _stored

ALICE, SHARED, BOB = "alice-secret", "shared-secret", "bob-secret"


def _as(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def _history(location: str, run_id: str = "run_1") -> dict[str, dict[str, Any]]:
    """``hpd-agent history RUN_ID --json``, by request id."""
    command = cli("history", run_id, "--store", location, "--json")
    shown = subprocess.run(command, cwd=REPO, env=child_env(), capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    return {item["request_id"]: item for item in json.loads(shown.stdout)}


def test_an_inbox_answer_is_recorded_with_the_tokens_name_on_channel_inbox(location: str) -> None:
    anyio.run(_seed, location)
    tokens = ("--token", f"alice={ALICE}", "--token", SHARED)  # the bare one is named 'token'
    with receiving() as (receiver, hook_url):
        hooked = ("--hook", "inbox_hooks:webhook")
        with inbox_server(location, *tokens, *hooked, HPD_TEST_WEBHOOK=hook_url) as url:
            events = Events(url, headers=_as(ALICE))
            events.wait_for(lambda e, _: e == "ready")
            with httpx.Client(base_url=url, timeout=60) as client:
                answered = client.post(
                    "inbox/requests/req_q1", json={"answer": "Express"}, headers=_as(ALICE)
                )
                assert answered.status_code == 200, answered.text
                reply = answered.json()
                assert (reply["answered_by"], reply["channel"]) == ("alice", "inbox")
                declined = client.post(
                    "inbox/requests/req_q2", json={"decline": True}, headers=_as(SHARED)
                )
                assert declined.status_code == 200, declined.text
                assert (declined.json()["answered_by"], declined.json()["channel"]) == (
                    "token",
                    "inbox",
                )
            for request_id, by in (("req_q1", "alice"), ("req_q2", "token")):
                _, data, _ = events.wait_for(
                    lambda e, d, r=request_id: e == "request_resolved" and d["request_id"] == r
                )
                assert (data["answered_by"], data["channel"]) == (by, "inbox")
                assert isinstance(data["answered_at"], float)
            events.close()
            assert receiver.wait_arrived(2)
    notes = {r.payload["request_id"]: r.payload for r in receiver.received}
    assert (notes["req_q1"]["answered_by"], notes["req_q1"]["channel"]) == ("alice", "inbox")
    assert (notes["req_q2"]["answered_by"], notes["req_q2"]["channel"]) == ("token", "inbox")
    trail = _history(location)
    assert trail["req_q1"]["status"] == "answered" and trail["req_q1"]["answer"] == "Express"
    assert (trail["req_q1"]["answered_by"], trail["req_q1"]["channel"]) == ("alice", "inbox")
    assert trail["req_q1"]["answered_at"] == reply["answered_at"]
    assert trail["req_p1"]["status"] == "pending" and trail["req_p1"]["answered_by"] is None
    planner = _history(location, "run_secret_2")["req_q2"]  # another run: a decline
    assert (planner["status"], planner["answered_by"], planner["channel"]) == (
        "declined",
        "token",
        "inbox",
    )


def test_a_policy_refuses_with_a_403_and_the_request_stays_pending(location: str) -> None:
    anyio.run(_seed, location)
    args = ("--token", f"alice={ALICE}", "--token", f"bob={BOB}")
    with inbox_server(location, *args, "--policy", "inbox_policies:POLICY") as url:
        events = Events(url, headers=_as(ALICE))
        events.wait_for(lambda e, _: e == "ready")
        with httpx.Client(base_url=url, headers=_as(ALICE), timeout=60) as client:
            approve = {"answer": {"kind": "approve", "scope": "once"}}
            for body in (approve, {"decline": True}):
                refused = client.post("inbox/requests/req_p1", json=body, headers=_as(BOB))
                assert refused.status_code == 403, refused.text
                error = refused.json()["error"]
                assert "'bob' may not answer request req_p1" in error and "write_file" in error
            # Another agent's question; refused before the answer is read (an invalid one
            # is a 403 too, not a 400).
            loose = client.post("inbox/requests/req_q1", json={"answer": 7}, headers=_as(BOB))
            assert loose.status_code == 403, loose.text
            assert "'bob' may answer only" in loose.json()["error"]
            assert anyio.run(_stored, location, "req_p1").status == "pending"
            assert _ids(client) == ["req_q1", "req_p1", "req_q2"]  # listed still
            # What the policy allows goes through, as the one who gave it.
            planner = client.post(
                "inbox/requests/req_q2", json={"answer": "Friday"}, headers=_as(BOB)
            )
            assert planner.status_code == 200 and planner.json()["answered_by"] == "bob"
            allowed = client.post("inbox/requests/req_p1", json=approve, headers=_as(ALICE))
            assert allowed.status_code == 200 and allowed.json()["answered_by"] == "alice"
        events.wait_for(lambda e, d: e == "request_resolved" and d["request_id"] == "req_p1")
        ended = [d for e, d, _ in events.seen if e == "request_resolved"]
        assert [(d["request_id"], d["answered_by"]) for d in ended] == [
            ("req_q2", "bob"),
            ("req_p1", "alice"),
        ]
        events.close()
    trail = _history(location)
    assert trail["req_q1"]["status"] == "pending"
    assert (trail["req_p1"]["answered_by"], trail["req_p1"]["channel"]) == ("alice", "inbox")


def test_the_policy_is_asked_once_per_answer_given_or_refused(location: str, tmp_path: Any) -> None:
    """A policy may look a name up in a directory or log each decision: one question to it
    per POST, whether it allows the answer or refuses it."""
    anyio.run(_seed, location)
    log = tmp_path / "policy.log"
    args = (
        "--token",
        f"alice={ALICE}",
        "--token",
        f"bob={BOB}",
        "--policy",
        "inbox_policies:LOGGED",
    )
    with (
        inbox_server(location, *args, HPD_TEST_POLICY_LOG=str(log)) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        approve = {"answer": {"kind": "approve", "scope": "once"}}
        refused = client.post("inbox/requests/req_p1", json=approve, headers=_as(BOB))
        assert refused.status_code == 403, refused.text
        assert asked(log) == ["bob req_p1"]
        given = client.post("inbox/requests/req_p1", json=approve, headers=_as(ALICE))
        assert given.status_code == 200, given.text
        assert asked(log) == ["bob req_p1", "alice req_p1"]
        declined = client.post("inbox/requests/req_q2", json={"decline": True}, headers=_as(BOB))
        assert declined.status_code == 200, declined.text
    assert asked(log) == ["bob req_p1", "alice req_p1", "bob req_q2"]


def test_a_policy_that_does_not_load_is_one_line_before_serving(tmp_path: Any) -> None:
    command = cli("inbox", "--store", str(tmp_path / "x.db"), "--policy", "no_such_policies:P")
    done = subprocess.run(command, cwd=REPO, env=child_env(), capture_output=True, text=True)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and lines[0].startswith("error: inbox: ") and "no_such_policies" in lines[0]
    )
