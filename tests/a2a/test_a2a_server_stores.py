"""Several ``hpd-agent serve --a2a --store`` servers on one store, driven by a2a-sdk's own
client: a task started on A (which drives its run: it holds the run's lease) is answered
and canceled through B.

- An answer reaching B is given to the run through the store: a refused one is asked again
  with the reason, a good one completes the task with the run's output, each model turn
  and side effect once (A drove it all), and A reports the same task.
- ``CancelTask`` on B cancels the run A drives: A stops at once, before its next model turn.
- A's run is taken over by B once A has died.
- Nothing a client reads names the lease's holder (host, process id), and an error the
  server did not expect is ``Internal server error``, not its text.
"""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from a2a.client import Client
from a2a.types import GetTaskRequest, Task
from a2a.utils.errors import A2AError
from a2a_ours import (
    CANCELED,
    COMPLETED,
    INPUT_REQUIRED,
    artifact_text,
    cancel,
    our_server,
    sdk_client,
    send,
    status_metadata,
    status_text,
    user_message,
)
from a2a_served_agents import counted, planner
from google.protobuf.json_format import MessageToJson
from test_a2a_server_durable import served

from hpd_agent.store import SQLiteStore, Store, open_store

pytestmark = pytest.mark.anyio

ASKED = "Which database should the plan assume?"
PLAN = "Plan: The user chose PostgreSQL."
REFUSED = "(Your last answer was not accepted: 'MySQL' is not one of the options"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK client


class Reader:
    """A client of one server, keeping everything it read (tasks, errors) as text."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.read: list[str] = []

    async def send(self, answer: str, task: Task | None = None, **metadata: Any) -> Task:
        message = user_message(answer, task=task, metadata=metadata or None)
        return self._saw((await send(self.client, message)).task)

    async def get(self, task: Task) -> Task:
        return self._saw(await self.client.get_task(GetTaskRequest(id=task.id)))

    async def cancel(self, task: Task) -> Task:
        return self._saw(await cancel(self.client, task))

    async def refused(self, answer: str, task: Task) -> str:
        with pytest.raises(A2AError) as error:
            await self.send(answer, task)
        self.read.append(str(error.value))
        return str(error.value)

    def _saw(self, task: Task) -> Task:
        self.read.append(MessageToJson(task))
        return task


def secrets(*servers: subprocess.Popen[str]) -> list[str]:
    """What names a lease's holder: ``host:pid:...``, and the word lease."""
    host = socket.gethostname()
    return [f"{host}:", *(f":{s.pid}:" for s in servers), "lease", "Leased"]


async def _in_store(location: str, run_id: str) -> tuple[Any, ...]:
    store: Store = open_store(location)
    try:
        record = await store.get_run(run_id)
        requests = await store.list_requests(run_id=run_id, status=None)
        lease = await store.get_lease(run_id)
    finally:
        await store.aclose()
    assert record is not None
    return record.status, [r.status for r in requests], lease


async def test_an_answer_reaching_the_server_not_driving_the_run_is_taken(
    location: str, tmp_path: Path
) -> None:
    with (
        served(tmp_path, "--store", location) as (a_url, a),
        served(tmp_path, "--store", location) as (b_url, b),
    ):
        at_a, at_b = Reader(await sdk_client(a_url)), Reader(await sdk_client(b_url))
        first = await at_a.send("a shop")  # A starts the run and drives it
        assert first.status.state == INPUT_REQUIRED
        asked = status_metadata(first)["request_id"]
        seen = await at_b.get(first)
        assert seen.status.state == INPUT_REQUIRED and status_text(seen) == ASKED
        # Refused through the store: asked again at once, with the reason.
        again = await at_b.send("MySQL", seen, request_id=asked)
        assert again.status.state == INPUT_REQUIRED
        assert status_metadata(again)["request_id"] == asked
        assert status_text(again).startswith(f"{ASKED}\n{REFUSED}")
        # Taken through the store: A's run goes on, B reports where it went.
        done = await at_b.send("PostgreSQL", again, request_id=asked)
        assert done.status.state == COMPLETED and artifact_text(done) == PLAN
        on_a = await at_a.get(first)  # A reads the task the store keeps
        assert on_a.status.state == COMPLETED and artifact_text(on_a) == PLAN
        said = await at_a.refused("SQLite", first)  # the task has ended, on A too
        assert "already ended" in said or "terminal state" in said, said
        everything = "\n".join(at_a.read + at_b.read)
        for secret in secrets(a, b):
            assert secret not in everything
    # A drove it all: each model turn once, the survey once; B ran nothing.
    assert counted("model", tmp_path) == [
        "Planner", "Clarifier", "Clarifier", "Clarifier", "Planner"
    ]  # fmt: skip
    assert counted("effect", tmp_path) == ["survey db"]
    assert await _in_store(location, first.id) == ("completed", ["answered"], None)


@pytest.mark.parametrize("b_took_a_message", [False, True])
async def test_a_task_canceled_on_the_server_not_driving_its_run_cancels_the_run(
    tmp_path: Path, b_took_a_message: bool
) -> None:
    """B cancels it as a2a-sdk does a task executed elsewhere (it writes the task
    canceled), or, once B has executed a message of the task, through its executor."""
    db = str(tmp_path / "runs.db")
    # A lease of 60 s is renewed every 20 s: only the cancel can stop A's run in time.
    slow = {"HPD_AGENT_LEASE_TTL": "60"}
    with (
        served(tmp_path, "--store", db, env=slow) as (a_url, a),
        served(tmp_path, "--store", db, env=slow) as (b_url, b),
    ):
        at_a, at_b = Reader(await sdk_client(a_url)), Reader(await sdk_client(b_url))
        first = await at_a.send("a shop")
        assert first.status.state == INPUT_REQUIRED
        if b_took_a_message:
            refused = await at_b.send("MySQL", first)
            assert refused.status.state == INPUT_REQUIRED and REFUSED in status_text(refused)
        canceled = await at_b.cancel(first)
        assert canceled.status.state == CANCELED
        # The run is cancelled in the store, its question too, the lease given up ...
        assert await _in_store(db, first.id) == ("cancelled", ["cancelled"], None)
        # ... and A knows: the task has ended there too.
        assert (await at_a.get(first)).status.state == CANCELED
        said = await at_a.refused("PostgreSQL", first)
        assert "already ended" in said or "terminal state" in said, said
        everything = "\n".join(at_a.read + at_b.read)
        for secret in secrets(a, b):
            assert secret not in everything
    # A's run stopped where it waited: the Clarifier was not asked again.
    assert counted("model", tmp_path) == ["Planner", "Clarifier", "Clarifier"]
    assert counted("effect", tmp_path) == ["survey db"]


async def test_a_dead_drivers_run_is_taken_over(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    with (
        served(tmp_path, "--store", db) as (a_url, a),
        served(tmp_path, "--store", db) as (b_url, b),
    ):
        at_a, at_b = Reader(await sdk_client(a_url)), Reader(await sdk_client(b_url))
        first = await at_a.send("a shop")
        a.send_signal(signal.SIGKILL)  # A dies while its run waits for the answer
        a.wait(30)
        done = await at_b.send("PostgreSQL", first)
        assert done.status.state == COMPLETED and artifact_text(done) == PLAN
        for secret in secrets(a, b):
            assert secret not in "\n".join(at_b.read)
    assert counted("model", tmp_path) == [
        "Planner", "Clarifier", "Clarifier", "Clarifier", "Planner"
    ]  # fmt: skip
    assert counted("effect", tmp_path) == ["survey db"]


class _Failing(SQLiteStore):
    """A store whose run records cannot be read back, failing with words no client may
    read."""

    async def get_run(self, run_id: str) -> Any:
        raise RuntimeError("disk /srv/secret/runs.db held by vm:4242:0a1b")


async def test_an_error_the_server_did_not_expect_is_not_sent_to_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPD_A2A_TEST_DIR", str(tmp_path))
    store = _Failing(tmp_path / "runs.db")
    try:  # the second server reads the run's record to resume it: that fails
        with our_server(planner, store=store) as url, our_server(planner, store=store) as b:
            first = await Reader(await sdk_client(url)).send("a shop")
            assert first.status.state == INPUT_REQUIRED
            said = await Reader(await sdk_client(b)).refused("PostgreSQL", first)
    finally:
        await store.aclose()
    assert "Internal server error" in said and "secret" not in said and "4242" not in said
