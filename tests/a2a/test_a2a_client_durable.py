"""``RemoteAgent`` in durable runs: the remote task's id is journaled as soon as the task
exists; a resumed run re-attaches to that task and never sends the query again; an answer
given while the caller was down is sent on resume, and the same task goes on."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from a2a_servers import Asking, a2a_server
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from hpd_agent import Agent, ClarificationRequest
from hpd_agent.a2a import RemoteAgent
from hpd_agent.store import SQLiteStore, respond
from hpd_agent.testing import FunctionModel, text, tool_call

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CALLER = Path(__file__).resolve().parent / "a2a_caller.py"
CITY = ("Which city?", {"options": ["Paris", "Rome"]})


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0"}


async def _line_starting(child: Process, prefix: str) -> str:
    """The child's first stdout line starting with ``prefix`` (bounded: 60 s)."""
    assert child.stdout is not None
    buffered = ""
    with anyio.fail_after(60):
        async for chunk in TextReceiveStream(child.stdout):
            buffered += chunk
            for line in buffered.splitlines():
                if line.startswith(prefix):
                    return line
    raise AssertionError(f"the child ended without printing {prefix!r}: {buffered!r}")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_sigkill_while_the_remote_question_waits_then_resume(tmp_path: Path) -> None:
    executor = Asking([CITY])
    db, ledger = tmp_path / "runs.db", tmp_path / "ledger.txt"
    with a2a_server(executor) as server:
        command = [sys.executable, str(CALLER), "start", server.url, str(db), str(ledger)]
        child = await anyio.open_process(command, env=_env())
        async with child:
            try:
                asked = await _line_starting(child, "ASKED ")
            finally:
                child.send_signal(signal.SIGKILL)
                await child.wait()
        assert child.returncode == -signal.SIGKILL
        _, run_id, request_id = asked.split()
        ((task_id, context_id),) = executor.tasks
        assert executor.queries == ["plan a trip"] and executor.answers == []

        # While the caller is down: its journal holds the task, the human answers.
        store = SQLiteStore(db)
        try:
            journal = await store.journal(run_id)
            steps = [e.value for e in journal.values() if e.kind == "step"]
            assert steps == [{"result": {"task_id": task_id, "context_id": context_id}}]
            await respond(store, request_id, "Rome")
        finally:
            await store.aclose()

        command = [sys.executable, str(CALLER), "resume", server.url, str(db), str(ledger), run_id]
        resumed = await anyio.run_process(command, env=_env(), check=False)
        methods = server.recorder.methods()
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert "RESULT completed final: plan a trip -> Rome" in resumed.stdout.decode()
    # The query went out once; the answer went into the same task, which went on.
    assert executor.queries == ["plan a trip"]
    assert len(server.recorder.queries()) == 1
    assert executor.answers == ["Rome"]
    assert set(executor.tasks) == {(task_id, context_id)}
    assert "GetTask" in methods and "CancelTask" not in methods
    # One model call per life: the first turn was replayed from the journal.
    assert _lines(ledger) == ["model call", "model call"]


async def test_an_interrupted_run_re_attaches_and_sends_the_answers_given_meanwhile(
    tmp_path: Path,
) -> None:
    executor = Asking([("First?", {}), ("Second?", {"request_id": "second"})])
    calls: list[str] = []

    def reply(messages: list[Any], params: Any) -> Any:
        calls.append(messages[-1].kind)
        if messages[-1].kind == "tool":
            return text(f"final: {messages[-1].content}")
        return tool_call("Planner", query="plan a trip")

    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with a2a_server(executor) as server:
            remote = RemoteAgent(server.url, name="Planner")
            agent = Agent("Orchestrator", model=FunctionModel(reply), tools=[remote.as_tool()])
            first = await agent.run("go", store=store, on_unhandled="interrupt")
            assert first.status == "interrupted"
            (one,) = first.pending
            assert isinstance(one, ClarificationRequest)
            assert (one.question, one.agent_path) == ("First?", ("Orchestrator", "Planner"))
            await respond(store, one.request_id, "one")  # while nobody runs the run

            second = await agent.resume(first.run_id, store=store, on_unhandled="interrupt")
            assert second.status == "interrupted"
            (two,) = second.pending
            assert isinstance(two, ClarificationRequest) and two.question == "Second?"
            assert two.request_id != one.request_id

            third = await agent.resume(first.run_id, store=store, answers={two.request_id: "two"})
            methods = server.recorder.methods()
    finally:
        await store.aclose()
    assert third.status == "completed"
    assert third.output == "final: plan a trip -> one, two"
    assert executor.queries == ["plan a trip"]  # never sent again
    assert executor.answers == ["one", "two"]
    assert executor.answer_metadata == [{}, {"request_id": "second"}]
    assert len(set(executor.tasks)) == 1  # the same task throughout
    assert methods.count("GetTask") >= 2 and "CancelTask" not in methods
    assert calls == ["user", "tool"]  # the first model turn ran once, then was replayed


async def test_a_durable_run_cancelled_on_purpose_cancels_the_remote_task(tmp_path: Path) -> None:
    executor = Asking([CITY])
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with a2a_server(executor) as server:
            remote = RemoteAgent(server.url, name="Planner")
            model = FunctionModel(lambda messages, params: tool_call("Planner", query="q"))
            agent = Agent("Orchestrator", model=model, tools=[remote.as_tool()])
            async with agent.stream("go", store=store) as run:
                async for event in run:
                    if isinstance(event, ClarificationRequest):
                        run.cancel()
            methods = server.recorder.methods()
    finally:
        await store.aclose()
    assert run.result.status == "cancelled"
    assert methods.count("CancelTask") == 1
    assert executor.cancels == [executor.tasks[0][0]]
