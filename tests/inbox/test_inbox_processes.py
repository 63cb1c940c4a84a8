"""One inbox for a whole store: three processes start runs that ask (a script, ``hpd-agent
run``, a served agent via ``hpd-agent serve --store``); ``hpd-agent inbox`` lists all of
them, its event stream says each opened within a second of its write, and it answers each:
every run goes on to its end in its own process, and the stream says each ended.

On a SQLite file and on a PostgreSQL server.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import httpx
from _child import serving_child
from inbox_agents import REGION_QUESTION, TITLE_QUESTION
from inbox_server import HERE, REPO, Events, child_env, cli, inbox_server, make_store

from hpd_agent.store import open_store

SERVE = re.compile(r"Serving Desk on (http://\S+)")


@contextmanager
def served_run(location: str) -> Iterator[list[str]]:
    """``hpd-agent serve inbox_agents:desk --store``, a live AG-UI run started on it and its
    stream read in a thread; yields the text read so far (the whole stream at the end)."""
    command = cli("serve", "inbox_agents:desk", "--store", location, "--port", "0")
    with serving_child(command, cwd=REPO, env=child_env(), serving=SERVE) as (url, _):
        body = {
            "threadId": "thread-inbox",
            "runId": "agui-run-1",
            "messages": [{"id": "u1", "role": "user", "content": "Write the post"}],
            "forwardedProps": {"hpd_agent": {"mode": "live"}},
        }
        read: list[str] = []

        def stream() -> None:
            with (
                httpx.Client(base_url=url, timeout=120) as client,
                client.stream("POST", "agent", json=body) as response,
                contextlib.suppress(httpx.HTTPError),  # the server stopped: the test fails
            ):
                read.extend(response.iter_text())

        reader = threading.Thread(target=stream, daemon=True)
        reader.start()
        yield read
        reader.join(60)


def _label(root: str, run_id: str) -> str:
    return f"{root} #{hashlib.sha256(run_id.encode()).hexdigest()[:6]}"


def test_the_inbox_lists_and_answers_runs_of_three_processes(location: str) -> None:
    make_store(location)
    env = child_env()
    with inbox_server(location) as url, httpx.Client(base_url=url, timeout=60) as client:
        events = Events(url)
        events.wait_for(lambda e, _: e == "ready")
        script = subprocess.Popen(
            [sys.executable, str(HERE / "inbox_agents.py"), location, "run_script"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        batch = subprocess.Popen(
            cli(
                "run",
                "inbox_agents:batcher",
                "Ship it",
                "--store",
                location,
                "--run-id",
                "run_batch",
            ),
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        with served_run(location) as served:
            opened = {
                kind: events.wait_for(
                    lambda e, d, k=kind: e == "request_opened" and d["question_kind"] == k
                )
                for kind in ("choice", "permission", "text")
            }
            for _, data, seen in opened.values():
                assert seen - data["created_at"] < 1.0  # heard within a second of its write
            listed = client.get("inbox/requests").json()["requests"]
            assert [r["question_kind"] for r in listed] == sorted(
                (r["question_kind"] for r in listed),
                key=lambda k: opened[k][1]["created_at"],
            )  # oldest first
            by_kind = {r["question_kind"]: r for r in listed}
            assert set(by_kind) == {"choice", "permission", "text"}
            region, permission, title = by_kind["choice"], by_kind["permission"], by_kind["text"]
            assert (region["question"], region["options"]) == (REGION_QUESTION, ["eu", "us"])
            assert region["run_label"] == _label("Scripter", "run_script")
            assert abs(region["expires_at"] - region["created_at"] - 3600) < 1
            assert permission["tool_name"] == "deploy"
            assert permission["arguments"] == {"env": "prod"}
            assert permission["run_label"] == _label("Batcher", "run_batch")
            assert (title["question"], title["agent_path"]) == (TITLE_QUESTION, ["Desk", "Writer"])
            assert title["run_label"].startswith("Desk #")
            # No run id in what the inbox shows: the served run's is its thread's secret.
            run_ids = anyio.run(_run_ids, location)
            assert len(run_ids) == 3
            shown = client.get("inbox/requests").text + "".join(str(o) for o in opened.values())
            assert not [r for r in run_ids if r in shown]

            answers = {
                region["request_id"]: {"answer": "eu"},
                permission["request_id"]: {"answer": {"kind": "approve", "scope": "once"}},
                title["request_id"]: {"answer": "Inboxes at scale"},
            }
            for request_id, body in answers.items():
                response = client.post(f"inbox/requests/{request_id}", json=body)
                assert response.status_code == 200, response.text
                assert response.json()["status"] == "answered"
                events.wait_for(
                    lambda e, d, r=request_id: e == "request_resolved" and d["request_id"] == r
                )
            assert script.wait(60) == 0
            assert script.stdout is not None and script.stdout.read().strip() == (
                "Scripter: deploying to eu"
            )
            out, err = batch.communicate(timeout=60)
            assert batch.returncode == 0, err
            assert out.strip() == "Batcher: deployed to prod"
        stream = "".join(served)
        assert "RUN_FINISHED" in stream and "Desk: Writer: Inboxes at scale" in stream
        assert client.get("inbox/requests").json() == {"requests": []}
        events.close()


async def _run_ids(location: str) -> set[str]:
    store = open_store(location)
    try:
        return {r.run_id for r in await store.list_requests()}
    finally:
        await store.aclose()
