"""What a served agent owes a client that misbehaves, vanishes or is load-balanced: real
``hpd-agent mcp --http`` servers, driven by the SDK's own client.

- A 2025-11-25 client killed while its question is shown: its run is cancelled a bounded
  time later (``CLIENT_GRACE``), its lease let go; a client still there is not touched.
- Two servers on one store: a 2026-07-28 retry reaching the one not driving the run is
  answered through the store, and no lease holder (host, process id) reaches the client.
- A bad answer (JSON nested 100,000 deep, a 2 MB permission decision) is refused, quoting at
  most 200 characters, and its question asked again; the run goes on.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_server_agents as agents
import mcp_types as types
import pytest
from _child import PYTHONPATH, serving_child
from mcp import Client
from test_mcp_server import VERSION, Human, text_of
from test_mcp_server_state import ANSWER, client_at, first_round, retry

from hpd_agent.mcp._server_calls import CLIENT_GRACE, PING_EVERY
from hpd_agent.store import SQLiteStore

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ASKED = "asked: Planner > Clarifier: Which database should the plan assume?"
_SERVING = re.compile(r"Serving \S+ over MCP on (http://\S+)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_MCP_TEST_DIR", str(tmp_path))
    return tmp_path


def _env(folder: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1"}
    env["HPD_MCP_TEST_DIR"] = str(folder)
    return env


@contextmanager
def serving(folder: Path, agent: str, *args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``hpd-agent mcp tests.mcp.mcp_server_agents:AGENT --http --port 0`` and its URL."""
    command = [sys.executable, "-m", "hpd_agent.cli", "mcp", f"tests.mcp.mcp_server_agents:{agent}"]
    with serving_child(
        [*command, "--http", "--port", "0", *args],
        cwd=REPO,
        env=_env(folder),
        serving=_SERVING,
    ) as started:
        yield started


async def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    with anyio.fail_after(60):
        return (
            await anyio.to_thread.run_sync(proc.stdout.readline, abandon_on_cancel=True)
        ).strip()


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait (60 s at most) for a state of the store that another process writes: the store
    wakes nobody for it, so it is looked at every 0.1 s."""
    for _ in range(600):
        if await check():
            return
        await anyio.sleep(0.1)
    raise AssertionError(f"not within 60 s: {what}")


def _legacy_client(url: str, folder: Path) -> subprocess.Popen[str]:
    """``mcp_legacy_client.py URL``: a 2025-11-25 client calling the Planner."""
    return subprocess.Popen(
        [sys.executable, str(HERE / "mcp_legacy_client.py"), url],
        env=_env(folder),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


# -- 5: a 2025-11-25 client that goes away mid-question ----------------------------------------
async def test_legacy_clients_killed_mid_question_have_their_runs_cancelled(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    clients: list[subprocess.Popen[str]] = []
    try:
        with serving(tmp_path, "planner", "--store", str(db)) as (url, _):
            asked: list[str] = []  # each client's run, in the order they were asked
            for _ in range(4):
                clients.append(_legacy_client(url, tmp_path))
                assert await _line(clients[-1]) == ASKED
                known = {run.run_id for run in await store.list_runs()}
                [new] = known - set(asked)
                asked.append(new)
            alive, *killed = clients
            kept, *gone = asked
            for proc in killed:
                proc.send_signal(signal.SIGKILL)  # while its question is shown
                proc.wait(30)
            with anyio.fail_after(PING_EVERY + CLIENT_GRACE + 60):
                for run_id in gone:
                    [request] = await store.list_requests(run_id=run_id, status=None)
                    assert (await store.wait_resolved(request.request_id)).status == "cancelled"

            async def let_go() -> bool:
                runs = {r.run_id: r.status for r in await store.list_runs()}
                leases = [await store.get_lease(run_id) for run_id in gone]
                return [runs[r] for r in gone] == ["cancelled"] * 3 and leases == [None] * 3

            await _until(let_go, "the three runs cancelled, their leases let go")
            # The client still there was pinged all along, and its run waits on.
            assert (await store.get_run(kept)).status == "running"  # type: ignore[union-attr]
            assert alive.stdin is not None
            alive.stdin.write("PostgreSQL\n")
            alive.stdin.flush()
            assert await _line(alive) == "result: Plan: The user chose PostgreSQL."
            assert alive.wait(30) == 0
        assert (await store.get_run(kept)).status == "completed"  # type: ignore[union-attr]
    finally:
        for proc in clients:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        await store.aclose()


# -- 6: two servers on one store ---------------------------------------------------------------
async def test_a_retry_reaching_the_server_not_driving_the_run_is_answered(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    with (
        serving(tmp_path, "planner", "--store", db) as (a_url, a),
        serving(tmp_path, "planner", "--store", db) as (b_url, b),
    ):
        async with client_at(a_url) as at_a, client_at(b_url) as at_b:
            request_id, state = await first_round(at_a)  # A drives the run
            wrong = types.ElicitResult(action="accept", content={"answer": "MySQL"})
            with anyio.fail_after(60):
                again = await retry(at_b, state, {request_id: wrong})
            # Refused through the store: asked again with the reason, the run untouched.
            assert isinstance(again, types.InputRequiredResult), again
            assert again.input_requests is not None and again.request_state is not None
            [(key, request)] = again.input_requests.items()
            assert key == request_id and isinstance(request, types.ElicitRequest)
            said = request.params.message
            assert said.endswith(
                "(Your last answer was not accepted: 'MySQL' is not one of the options "
                "['SQLite', 'PostgreSQL'])"
            )
            with anyio.fail_after(60):
                done = await retry(at_b, again.request_state, {request_id: ANSWER})
        assert isinstance(done, types.CallToolResult) and not done.is_error
        assert text_of(done) == "Plan: The user chose PostgreSQL."
    said += text_of(done)
    for secret in (f":{a.pid}:", f":{b.pid}:", socket.gethostname(), "Leased", "lease"):
        assert secret not in said
    # A drove it all: each model turn once, the survey once; B ran nothing.
    assert agents.counted("model") == ["Planner", "Clarifier", "Clarifier", "Clarifier", "Planner"]
    assert agents.counted("effect") == ["survey db"]


async def test_a_cancel_reaching_the_server_not_driving_the_run_cancels_the_run(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "runs.db")
    with (
        serving(tmp_path, "planner", "--store", db) as (a_url, _a),
        serving(tmp_path, "planner", "--store", db) as (b_url, _b),
    ):
        async with client_at(a_url) as at_a, client_at(b_url) as at_b:
            request_id, state = await first_round(at_a)  # A drives the run
            cancel = types.ElicitResult(action="cancel")
            with anyio.fail_after(60):
                done = await retry(at_b, state, {request_id: cancel})
        assert isinstance(done, types.CallToolResult) and done.is_error
        assert text_of(done).startswith("The run was cancelled: the MCP client cancelled")
        store = SQLiteStore(db)
        try:
            question = await store.get_request(request_id)
            record = None if question is None else await store.get_run(question.run_id)
        finally:
            await store.aclose()
    # Before: only the question ended; the run went on and was still running.
    assert record is not None and record.status == "cancelled"
    assert question is not None and question.status == "cancelled"
    # The Clarifier surveyed, then asked; nothing ran after the cancel.
    assert agents.counted("model") == ["Planner", "Clarifier", "Clarifier"]
    assert agents.counted("effect") == ["survey db"]


# -- 8: bad answers stay in their bounds ---------------------------------------------------------
DEEP = "[" * 100_000 + "]" * 100_000
BAD = [
    # the question, the refused reply, the good one, what the tool got, the refusal said
    (
        "custom_nested",
        {"answer": DEEP},
        {"answer": '{"range": {"from": 3}}'},
        'answer: {"range": {"from": 3}}',
        "the answer nests too deeply to be read as JSON",
    ),
    (
        "permission",
        {"decision": "x" * 2_000_000},
        {"decision": "approve_once"},
        "answer: deployed to prod",
        "decision must be one of approve_once, approve_run, deny, got 'xxxx",
    ),
]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(("kind", "bad", "good", "got", "refusal"), BAD, ids=[b[0] for b in BAD])
async def test_a_bad_answer_is_refused_quoting_little_and_asked_again(
    tmp_path: Path, mode: str, kind: str, bad: dict[str, Any], good: dict[str, Any], got: str,
    refusal: str,
) -> None:  # fmt: skip
    replies = iter([bad, good])

    async def reply(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=next(replies))

    human = Human(reply)
    with serving(tmp_path, "asker") as (url, _):
        async with Client(url, mode=mode, elicitation_callback=human) as client:
            assert client.protocol_version == VERSION[mode]
            with anyio.fail_after(120):
                result = await client.call_tool("Asker", {"query": kind})
    assert not result.is_error and text_of(result) == got
    first, second = human.messages
    note = second.removeprefix(f"{first}\n(Your last answer was not accepted: ")
    assert note.startswith(refusal)
    assert len(note) <= 400  # the answer quoted at most 200 characters
