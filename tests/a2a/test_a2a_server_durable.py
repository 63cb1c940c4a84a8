"""``hpd-agent serve --a2a`` in a real subprocess: a server with a SQLite store killed
(SIGKILL) while a question waits, then restarted, still shows the question and takes its
answer in the same task and run (model calls and side effects once each); without a token
it refuses a non-loopback interface."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _child import PYTHONPATH, serving_child
from a2a.types import GetTaskRequest
from a2a_ours import (
    COMPLETED,
    INPUT_REQUIRED,
    artifact_text,
    sdk_client,
    send,
    status_metadata,
    status_text,
    user_message,
)
from a2a_served_agents import counted

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SERVE = [sys.executable, "-m", "hpd_agent.cli", "serve", "--a2a"]
_SERVING = re.compile(r"over A2A on (http://\S+)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK client


@contextmanager
def served(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``hpd-agent serve --a2a --port 0`` serving the Planner (``env`` added to its
    environment); its URL once it listens."""
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1", **(env or {})}
    env["HPD_A2A_TEST_DIR"] = str(folder)
    with serving_child(
        [*SERVE, "a2a_served_agents:planner", "--port", "0", *args],
        cwd=HERE,  # MODULE:ATTR is importable from the current directory
        env=env,
        serving=_SERVING,
    ) as started:
        yield started


async def test_a_killed_server_restarted_on_its_store_takes_the_answer(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.db")
    with served(tmp_path, "--store", store) as (url, proc):
        first = (await send(await sdk_client(url), user_message("a shop"))).task
        assert first.status.state == INPUT_REQUIRED
        proc.send_signal(signal.SIGKILL)  # a crash: no shutdown code runs
        proc.wait(30)
    assert counted("model", tmp_path) == ["Planner", "Clarifier", "Clarifier"]
    with served(tmp_path, "--store", store) as (url, _):
        client = await sdk_client(url)
        again = await client.get_task(GetTaskRequest(id=first.id))
        assert again.status.state == INPUT_REQUIRED  # no pending question lost
        assert status_metadata(again)["request_id"] == status_metadata(first)["request_id"]
        assert status_text(again) == "Which database should the plan assume?"
        done = (await send(client, user_message("PostgreSQL", task=again))).task
    assert done.id == first.id and done.status.state == COMPLETED
    assert artifact_text(done) == "Plan: The user chose PostgreSQL."
    # The second life replayed the journal: nothing ran twice.
    assert counted("model", tmp_path) == [
        "Planner", "Clarifier", "Clarifier", "Clarifier", "Planner"
    ]  # fmt: skip
    assert counted("effect", tmp_path) == ["survey db"]


def test_serve_a2a_refuses_a_public_interface_without_a_token(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "HPD_A2A_TEST_DIR": str(tmp_path)}
    done = subprocess.run(
        [*SERVE, "a2a_served_agents:planner", "--host", "0.0.0.0"],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "without a token" in done.stderr and "Traceback" not in done.stderr
    assert counted("model", tmp_path) == []
