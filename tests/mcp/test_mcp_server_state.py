"""The ``requestState`` of a served run (protocol 2026-07-28): refused when forged or foreign,
kept valid across a restart by the key kept with the store, and bounded in time.

The retry is driven by hand (``client.session.call_tool(..., allow_input_required=True)``),
as a client that persists the state across its own restarts would.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_server_agents as agents
import mcp_types as types
import pytest
from _child import PYTHONPATH, serving_child
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from test_mcp_server import http_url, our_processes

from hpd_agent.store import MemoryStore

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
QUERY = {"query": "a todo API"}
ANSWER = types.ElicitResult(action="accept", content={"answer": "PostgreSQL"})
MCP = [sys.executable, "-m", "hpd_agent.cli", "mcp", "tests.mcp.mcp_server_agents:planner"]
_SERVING = re.compile(r"Serving \S+ over MCP on (http://\S+)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_MCP_TEST_DIR", str(tmp_path))
    return tmp_path


async def _unused(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
    raise AssertionError("the retries are driven by hand")


@asynccontextmanager
async def client_at(url: str) -> AsyncIterator[Client]:
    # The callback declares the elicitation capability; the rounds are driven by hand.
    async with Client(url, elicitation_callback=_unused) as client:
        yield client


async def first_round(client: Client) -> tuple[str, str]:
    """Call the Planner; returns its question's request id and the requestState."""
    first = await client.session.call_tool("Planner", QUERY, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    assert first.input_requests is not None and first.request_state is not None
    [(request_id, request)] = first.input_requests.items()
    assert isinstance(request, types.ElicitRequest)
    assert request.params.message == "Planner > Clarifier: Which database should the plan assume?"
    return request_id, first.request_state


async def retry(
    client: Client,
    state: str,
    responses: dict[str, types.InputResponse] | None = None,
    query: dict[str, Any] = QUERY,
) -> types.CallToolResult | types.InputRequiredResult:
    return await client.session.call_tool(
        "Planner",
        query,
        input_responses=responses,
        request_state=state,
        allow_input_required=True,
    )


def text_of(result: Any) -> str:
    assert isinstance(result, types.CallToolResult)
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_forged_or_foreign_state_is_refused_and_the_run_waits_on() -> None:
    async with (
        http_url(agents.planner) as url,
        http_url(agents.planner) as other_url,
        client_at(url) as client,
        client_at(other_url) as other,
    ):
        request_id, state = await first_round(client)
        _, foreign = await first_round(other)  # the same agent, another server's key
        refused = "Invalid or expired requestState"
        tampered = state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB")
        for bad in ("v1.forged", tampered, foreign):
            with pytest.raises(MCPError, match=refused):
                await retry(client, bad, {request_id: ANSWER})
        # Bound to its call: the same state with other arguments is refused too.
        with pytest.raises(MCPError, match=refused):
            await retry(client, state, {request_id: ANSWER}, {"query": "other"})
        with pytest.raises(MCPError, match="inputResponses names 'nope': no question"):
            await retry(client, state, {"nope": ANSWER})
        with pytest.raises(MCPError, match="inputResponses came without their requestState"):
            await client.session.call_tool(
                "Planner", QUERY, input_responses={request_id: ANSWER}, allow_input_required=True
            )
        # None of that touched the run: the genuine retry finishes it.
        done = await retry(client, state, {request_id: ANSWER})
        assert text_of(done) == "Plan: The user chose PostgreSQL."
        # The run has ended and had no store: its state names nothing any more.
        with pytest.raises(MCPError, match=r"names run 'run_\w+', which this server does not"):
            await retry(client, state, {request_id: ANSWER})
    # Two runs, one per server: each model turn once, each survey once.
    assert sorted(agents.counted("effect")) == ["survey db", "survey db"]
    assert agents.counted("model").count("Planner") == 3  # 2 + the other run's first


async def test_a_retry_that_answers_nothing_gets_the_same_question() -> None:
    async with http_url(agents.planner) as url, client_at(url) as client:
        request_id, state = await first_round(client)
        again = await retry(client, state)
        assert isinstance(again, types.InputRequiredResult)
        assert again.input_requests is not None and list(again.input_requests) == [request_id]
        assert again.request_state is not None
        done = await retry(client, again.request_state, {request_id: ANSWER})
    assert text_of(done) == "Plan: The user chose PostgreSQL."
    assert agents.counted("effect") == ["survey db"]


async def test_a_run_whose_client_never_comes_back_is_cancelled() -> None:
    store = MemoryStore()
    async with http_url(agents.planner, store=store, state_ttl=0.3) as url, client_at(url) as c:
        request_id, state = await first_round(c)
        with anyio.fail_after(30):
            record = await store.wait_resolved(request_id)  # the expiry cancels the run
        assert record.status == "cancelled"
        [run] = await store.list_runs()
        assert run.status == "cancelled"
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await retry(c, state, {request_id: ANSWER})


# -- a restart, with and without a store ------------------------------------------------------
@contextmanager
def served(folder: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``hpd-agent mcp --http --port 0`` serving the Planner; its URL once it listens."""
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1"}
    env["HPD_MCP_TEST_DIR"] = str(folder)
    with serving_child(
        [*MCP, "--http", "--port", "0", *args], cwd=REPO, env=env, serving=_SERVING
    ) as started:
        yield started


async def test_a_restarted_server_continues_the_stored_run(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.db")
    with served(tmp_path, "--store", store) as (url, proc):
        async with client_at(url) as client:
            request_id, state = await first_round(client)
        proc.send_signal(signal.SIGKILL)  # a crash: no shutdown code runs
        proc.wait(30)
    assert agents.counted("model") == ["Planner", "Clarifier", "Clarifier"]
    with served(tmp_path, "--store", store) as (url, proc):
        async with client_at(url) as client:
            done = await retry(client, state, {request_id: ANSWER})
    assert text_of(done) == "Plan: The user chose PostgreSQL."
    # The second life replayed the journal: nothing ran twice.
    assert agents.counted("model") == ["Planner", "Clarifier", "Clarifier", "Clarifier", "Planner"]
    assert agents.counted("effect") == ["survey db"]
    assert our_processes(tmp_path) == []


async def test_without_a_store_a_restarted_server_refuses_the_old_state(tmp_path: Path) -> None:
    with served(tmp_path) as (url, _):
        async with client_at(url) as client:
            request_id, state = await first_round(client)
    with served(tmp_path) as (url, _):
        async with client_at(url) as client:
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await retry(client, state, {request_id: ANSWER})
    assert our_processes(tmp_path) == []


async def test_a_retry_may_answer_part_of_a_batch() -> None:
    async with http_url(agents.lead) as url, client_at(url) as client:
        first = await client.session.call_tool("Lead", {"query": "go"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.input_requests
        keys = {r.params.message.split(":")[0]: k for k, r in first.input_requests.items()}  # type: ignore[union-attr]
        assert sorted(keys) == ["Lead > Fast", "Lead > Slow"]
        red = types.ElicitResult(action="accept", content={"answer": "red"})
        large = types.ElicitResult(action="accept", content={"answer": "large"})
        second = await client.session.call_tool(
            "Lead",
            {"query": "go"},
            input_responses={keys["Lead > Fast"]: red},
            request_state=first.request_state,
            allow_input_required=True,
        )
        # The unanswered question is asked again, alone.
        assert isinstance(second, types.InputRequiredResult) and second.input_requests
        assert list(second.input_requests) == [keys["Lead > Slow"]]
        # Answering the first again (a client resending) changes nothing.
        done = await client.session.call_tool(
            "Lead",
            {"query": "go"},
            input_responses={keys["Lead > Slow"]: large, keys["Lead > Fast"]: large},
            request_state=second.request_state,
            allow_input_required=True,
        )
    assert text_of(done) == "fast got red / slow got large"
    assert sorted(agents.counted("model")) == sorted(["Lead"] * 2 + ["Fast"] * 2 + ["Slow"] * 3)
