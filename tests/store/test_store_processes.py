"""Answers from other OS processes: they wake a waiting run, and racing answers have one winner.

Run against a real SQLite file (short polling) and a real PostgreSQL server (LISTEN/NOTIFY).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import durable_agents
import pytest

from hpd_agent.governance import os_user
from hpd_agent.store import RequestRecord, open_store

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "hpd_agent.cli", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}


async def test_answer_from_another_process_wakes_the_run(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    store = open_store(location)
    outputs: list[str | None] = []

    async def run_it() -> None:
        result = await durable_agents.build().run("Build", store=store, run_id="run_x")
        outputs.append(result.output)

    # The task group ends only when the run wakes up by itself and finishes.
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_it)
            while not (pending := await store.list_requests(run_id="run_x")):
                await anyio.wait_all_tasks_blocked()
            done = await anyio.run_process(
                _cli(
                    "answer", pending[0].request_id, "Sinatra", "--db", location, "--sender", "ops"
                ),
                env=_env(),
                check=False,
            )
            assert done.returncode == 0, done.stderr
    assert outputs == ["Orchestrator: built with Sinatra"]
    record = await store.get_request(pending[0].request_id)
    assert record is not None
    assert record.context == {"channel": "cli", "sender": "ops", "answered_by": os_user()}
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]
    await store.aclose()


async def test_two_processes_answering_at_once_exactly_one_wins(location: str) -> None:
    from hpd_agent.events import ClarificationRequest

    store = open_store(location)
    ids = [f"req_race_{i}" for i in range(3)]
    for rid in ids:
        event = ClarificationRequest(
            run_id="run_r", agent_path=("A",), depth=0, request_id=rid, question="Who wins?"
        )
        await store.add_request(RequestRecord.from_event(event))
    for rid in ids:
        codes, errors = await anyio.to_thread.run_sync(_race, rid, location)
        assert sorted(codes) == [0, 4], errors  # 4: already answered
        loser = errors[codes.index(4)]
        assert "already answered" in loser
        record = await store.get_request(rid)
        assert record is not None and record.status == "answered"
        assert record.answer == f"answer-{codes.index(0)}"
    await store.aclose()


def _race(rid: str, location: str) -> tuple[list[int], list[str]]:
    """Two ``hpd-agent answer`` processes for one request, started together."""
    procs = [
        subprocess.Popen(
            _cli("answer", rid, f"answer-{n}", "--db", location),
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    return [p.returncode for p in procs], [err for _, err in outputs]


async def test_many_waiters_share_one_watcher_that_hands_over(location: str) -> None:
    """Waiters in one process are woken by answers written through another connection,
    also after the task watching for all of them stops waiting."""
    from hpd_agent.events import ClarificationRequest
    from hpd_agent.store import respond

    waiting_side = open_store(location)
    answering_side = open_store(location)  # another connection: wake-ups must come from the DB
    ids = [f"req_many_{i}" for i in range(20)]
    for rid in ids:
        event = ClarificationRequest(
            run_id="run_m", agent_path=("A",), depth=0, request_id=rid, question=rid
        )
        await answering_side.add_request(RequestRecord.from_event(event))
    got: dict[str, str] = {}
    scopes = {rid: anyio.CancelScope() for rid in ids}

    async def wait_one(rid: str) -> None:
        with scopes[rid]:
            got[rid] = (await waiting_side.wait_resolved(rid)).answer

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for rid in ids:
                tg.start_soon(wait_one, rid)
            await anyio.wait_all_tasks_blocked()
            scopes[ids[0]].cancel()  # the first waiter, the watcher: it must hand over
            for rid in reversed(ids[1:]):
                await respond(answering_side, rid, f"answer {rid}")
    assert got == {rid: f"answer {rid}" for rid in ids[1:]}
    await waiting_side.aclose()
    await answering_side.aclose()
