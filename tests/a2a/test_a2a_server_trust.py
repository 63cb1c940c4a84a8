"""``create_app`` at its trust edges, with a2a-sdk's own client: two answers racing for one
question, refusals that quote at most a bounded piece of the answer, a body nested too
deep to read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from a2a.client import Client
from a2a.types import GetTaskRequest, SendMessageRequest, Task
from a2a_ours import COMPLETED, INPUT_REQUIRED, artifact_text, send, served_client, user_message
from a2a_served_agents import counted, planner

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK client


@pytest.fixture(autouse=True)
def counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_A2A_TEST_DIR", str(tmp_path))
    return tmp_path


async def _answer(client: Client, task: Task, answer: str, got: dict[str, Any]) -> None:
    """Send ``answer`` in ``task``; what came back (the last event, or the error)."""
    try:
        request = SendMessageRequest(message=user_message(answer, task=task))
        async for event in client.send_message(request):
            got[answer] = event
    except Exception as e:
        got[answer] = e


@pytest.mark.parametrize("streaming", [True, False])
async def test_two_answers_at_once_one_wins_and_the_task_completes(streaming: bool) -> None:
    # The race is between the run ending and the second answer finding it: a few tries.
    async with served_client(planner, streaming=streaming) as client:
        for _ in range(5):
            task = (await send(client, user_message("a shop"))).task
            assert task.status.state == INPUT_REQUIRED
            got: dict[str, Any] = {}
            async with anyio.create_task_group() as tg:
                for answer in ("SQLite", "PostgreSQL"):
                    tg.start_soon(_answer, client, task, answer, got)
            final = await client.get_task(GetTaskRequest(id=task.id))
            assert final.status.state == COMPLETED, final.status
            assert artifact_text(final) in (
                "Plan: The user chose SQLite.",
                "Plan: The user chose PostgreSQL.",
            )
            for outcome in got.values():
                if isinstance(outcome, Exception):  # the loser, told the task has ended
                    said = str(outcome)
                    assert "already ended" in said or "terminal state" in said, said
    # One answer taken per task: the Clarifier went on once, the Planner finished once.
    assert counted("effect") == ["survey db"] * 5
    assert counted("model").count("Planner") == 10
