"""``hpd-agent serve --a2a`` says what it does, as ``serve`` does (tests/web/
test_web_activity.py): a line per run started and ended and per question asked and answered
through an A2A message; ``--quiet`` says only where it serves."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _child import PYTHONPATH, Lines, child_lines
from a2a_ours import COMPLETED, INPUT_REQUIRED, sdk_client, send, status_metadata, user_message

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
_SERVING = re.compile(r"Serving Planner over A2A on (http://\S+)")
_TIME = r"\d\d:\d\d:\d\d "


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK client


@contextmanager
def served(folder: Path, *flags: str) -> Generator[tuple[str, Lines]]:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1"}
    env["HPD_A2A_TEST_DIR"] = str(folder)
    command = [sys.executable, "-m", "hpd_agent.cli", "serve", "--a2a"]
    with child_lines(
        [*command, "a2a_served_agents:planner", "--port", "0", *flags], cwd=HERE, env=env
    ) as lines:
        match = _SERVING.search(lines.until(r"Serving .*")[-1])
        assert match is not None
        yield match.group(1), lines


async def test_a_run_and_its_question_answered_by_message_are_said(tmp_path: Path) -> None:
    with served(tmp_path) as (url, lines):
        client = await sdk_client(url)
        first = (await send(client, user_message("a shop"))).task
        assert first.status.state == INPUT_REQUIRED
        rid = status_metadata(first)["request_id"]
        done = (await send(client, user_message("PostgreSQL", task=first))).task
        assert done.status.state == COMPLETED
        said = lines.until(_TIME + r"run \S+ completed \(A2A\) after .*")
    run = re.escape(first.id)  # the task's id is its run's
    expected = [
        rf"run {run} started \(A2A\)",
        rf"request {rid} asked by Planner > Clarifier \(A2A\): Choose one: Which database "
        r"should the plan assume\?",
        rf"request {rid} answered via a message in its task \(A2A\)",
        rf"run {run} completed \(A2A\) after \d+\.\d s",
    ]
    assert len(said) == len(expected), said
    for line, pattern in zip(said, expected, strict=True):
        assert re.fullmatch(_TIME + pattern, line), (line, pattern)


async def test_quiet_says_only_where_it_serves(tmp_path: Path) -> None:
    with served(tmp_path, "--quiet") as (url, lines):
        client = await sdk_client(url)
        first = (await send(client, user_message("a shop"))).task
        done = (await send(client, user_message("PostgreSQL", task=first))).task
        assert done.status.state == COMPLETED
        assert lines.rest() == []
