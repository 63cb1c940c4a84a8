"""Cold resume after SIGKILL: a real child process dies while a depth-2 question is pending.

The child runs the ``durable_agents`` tree with a store (a SQLite file, or a PostgreSQL
server: then the resuming "worker" is another process of the same cluster). In the
CodingAgent's turn the sibling tool ``record_step`` has already written its side effect when
``ask_user`` waits. The test kills the child, answers through the store from another process
(the CLI), resumes in this process and checks that nothing ran twice.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import durable_agents
import pytest

from hpd_agent.events import ClarificationRequest, Event, ToolCallFinished
from hpd_agent.store import Store, open_store

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]


def _env(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HPD_TEST_DIR": str(workdir),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
        "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
    }


async def _pending_once_sibling_journaled(store: Store) -> list[str]:
    """Ids of pending requests, once the sibling's tool result is journaled too."""
    if await store.get_run("run_kill") is None:
        return []
    journal = await store.journal("run_kill")
    sibling = [k for k, e in journal.items() if e.kind == "tool" and k.endswith(":step")]
    pending = await store.list_requests(run_id="run_kill")
    return [r.request_id for r in pending] if len(sibling) == 1 else []


async def test_sigkill_while_depth2_question_pending_then_resume(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    if location.endswith(".db"):
        open_store(location)  # create the tables, so this process can look before the child
    store = open_store(location)
    child = await anyio.open_process(
        [sys.executable, str(TESTS / "durable_agents.py"), location, "run_kill"],
        env=_env(tmp_path),
    )
    async with child:
        try:
            # Bounded polling of the store for the condition (at most ~60 s).
            for _ in range(3000):
                if pending := await _pending_once_sibling_journaled(store):
                    break
                await anyio.sleep(0.02)
            else:
                raise AssertionError("the depth-2 question never became pending")
        finally:
            child.send_signal(signal.SIGKILL)
            await child.wait()
    assert child.returncode == -signal.SIGKILL
    (request_id,) = pending
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    assert durable_agents.read_lines("calls.txt") == ["orchestrator@0", "coder@0"]
    run_record = await store.get_run("run_kill")
    assert run_record is not None and run_record.status == "running"  # it died running

    # Answer from another process, through the CLI.
    answered = await anyio.run_process(
        [sys.executable, "-m", "hpd_agent.cli", "answer", request_id, "FastAPI", "--db", location],
        env=_env(tmp_path),
        check=False,
    )
    assert answered.returncode == 0, answered.stderr

    # The dead child's lease keeps the run until it lapses (test_lease.py tests that part).
    await durable_agents.wait_lease_lapsed(store, "run_kill")
    events: list[Event] = []
    async with durable_agents.build().resume_stream("run_kill", store=store) as run:
        async for event in run:
            events.append(event)
    result = run.result
    assert result.status == "completed"
    assert result.output == "Orchestrator: built with FastAPI"
    # Nothing ran twice: one side effect, every model turn called exactly once in total.
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    assert durable_agents.read_lines("calls.txt") == durable_agents.EVERY_TURN
    # The question kept its id; its re-emission and the sibling's result are marked replayed.
    (question,) = [e for e in events if isinstance(e, ClarificationRequest)]
    assert question.request_id == request_id and question.replayed
    (step,) = [
        e for e in events if isinstance(e, ToolCallFinished) and e.tool_name == "record_step"
    ]
    assert step.replayed and step.result == "recorded"
    delegate = [
        e for e in events if isinstance(e, ToolCallFinished) and e.tool_name == "CodingAgent"
    ]
    assert [e.replayed for e in delegate] == [False]  # it re-executed, replaying inside
    record = await store.get_run("run_kill")
    assert record is not None and record.status == "completed"
    assert record.output == result.output
    await store.aclose()
